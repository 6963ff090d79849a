/**
 * Shared pieces of the conformance suite: the per-test environment (a fake
 * clock and fresh stores, closed when the test ends) and small builders.
 * Everything goes through the Store interface.
 */
import type { StoredError } from "../../core/json.js";
import { type ErrorCode, RatchetError } from "../../errors.js";
import type {
  AbortResult,
  ClaimedTask,
  ClaimRequest,
  Fence,
  NewTask,
  Store,
  TaskId,
  TaskRecord,
} from "../../store/store.js";
import type { Expect, StoreConformanceOptions } from "../conformance.js";
import { FakeClock } from "../fake-clock.js";

/** Lease grace used by every claim in the suite. */
export const GRACE = 10_000;

export interface Env {
  clock: FakeClock;
  /** A migrated store over empty storage. */
  store: Store;
  /** Opens (and migrates) one more store over its own empty storage, on the same clock. */
  another(): Promise<Store>;
  expect: Expect;
}

const SUITE_NAMES = [
  ..."abcdefgknrtuxy",
  "bad",
  "boom",
  "done",
  "err",
  "json",
  "live",
  "nap",
  "now",
  "ok",
  "probe",
  "run",
];

/** An abort result without the list of marked ids (which a test may check on its own). */
export function abortState(r: AbortResult): Omit<AbortResult, "marked"> {
  const { marked: _marked, ...rest } = r;
  return rest;
}

export type Define = (name: string, fn: (env: Env) => Promise<void>) => void;

export function makeDefine(opts: StoreConformanceOptions): Define {
  return (name, fn) =>
    opts.runner.it(name, async () => {
      const clock = new FakeClock();
      const opened: Store[] = [];
      const open = async () => {
        const s = await opts.open(clock);
        opened.push(s);
        await s.migrate();
        // Every name the suite uses has code, so an abort ends `aborted`, not `orphaned` (spec §12.6).
        await s.registerDefinitions(SUITE_NAMES.map((name) => ({ name, version: 1, hasAbort: false })));
        return s;
      };
      try {
        const store = await open();
        await fn({ clock, store, another: open, expect: opts.runner.expect });
      } finally {
        for (const s of opened.reverse()) await s.close().catch(() => {});
      }
    });
}

/** A NewTask with defaults (name "t", queue "default", maxMs 1 s, 4 attempts). */
export function newTask(over: Partial<NewTask> = {}): NewTask {
  return {
    name: "t",
    version: 1,
    queue: "default",
    input: "null",
    priority: 0,
    maxMs: 1_000,
    maxAttempts: 4,
    delayMs: 0,
    dedupe: null,
    job: null,
    needs: [],
    ...over,
  };
}

export const unlimited = { maxDepth: () => 1_000_000 };

export function claimReq(over: Partial<ClaimRequest> = {}): ClaimRequest {
  return { workerId: "w1", queues: ["default"], names: ["t"], limit: 10, leaseGraceMs: GRACE, ...over };
}

export const ERR: StoredError = { name: "Error", message: "it broke" };

export function fenceOf(c: { id: TaskId; epoch: number; claimedAt: number }): Fence {
  return { taskId: c.id, token: c.epoch, claimedAt: c.claimedAt };
}

/** Enqueues `tasks` and returns their ids. */
export async function ids(store: Store, tasks: NewTask[]): Promise<TaskId[]> {
  return (await store.enqueue(tasks, unlimited)).map((e) => e.id);
}

/** Claims exactly the task `id` (by a claim limited to its name); throws if something else comes back. */
export async function claimId(
  store: Store,
  id: TaskId,
  over: Partial<ClaimRequest> = {},
): Promise<ClaimedTask> {
  const t = await store.get(id);
  if (!t) throw new Error(`claimId: task ${id} does not exist`);
  const got = await store.claim(claimReq({ names: [t.name], queues: [t.queue], limit: 1, ...over }));
  if (got.length !== 1 || got[0]!.id !== id) {
    throw new Error(`claimId: expected to claim task ${id}, got [${got.map((g) => g.id).join(", ")}]`);
  }
  return got[0]!;
}

export async function completeId(store: Store, id: TaskId, result = "null"): Promise<void> {
  const c = await claimId(store, id);
  const [r] = await store.settle([{ kind: "complete", fence: fenceOf(c), result }]);
  if (r !== "ok") throw new Error(`completeId: settle of task ${id} returned ${r}`);
}

export async function failId(
  store: Store,
  id: TaskId,
  outcome: "failed" | "faulted" = "failed",
): Promise<void> {
  const c = await claimId(store, id);
  const [r] = await store.settle([{ kind: "fail", fence: fenceOf(c), outcome, error: ERR }]);
  if (r !== "ok") throw new Error(`failId: settle of task ${id} returned ${r}`);
}

export async function must(store: Store, id: TaskId): Promise<TaskRecord> {
  const t = await store.get(id);
  if (!t) throw new Error(`task ${id} does not exist`);
  return t;
}

/** Every task in the store (newest first). */
export async function all(store: Store): Promise<TaskRecord[]> {
  const out: TaskRecord[] = [];
  let before: number | undefined;
  for (;;) {
    const page = await store.list({ limit: 1000, ...(before === undefined ? {} : { before }) });
    out.push(...page);
    if (page.length < 1000) return out;
    before = page[page.length - 1]!.id;
  }
}

/** Runs `fn`, which must reject with a RatchetError (with `code`, if given); returns the error. */
export async function rejection(fn: () => Promise<unknown>, code?: ErrorCode): Promise<RatchetError> {
  let caught: unknown;
  let threw = false;
  try {
    await fn();
  } catch (e) {
    threw = true;
    caught = e;
  }
  if (!threw) throw new Error(`expected a rejection${code ? ` with ${code}` : ""}, but the call resolved`);
  if (!(caught instanceof RatchetError)) {
    throw new Error(`expected a RatchetError${code ? ` ${code}` : ""}, got ${String(caught)}`, {
      cause: caught,
    });
  }
  if (code !== undefined && caught.code !== code) {
    throw new Error(`expected ${code}, got ${caught.code}: ${caught.message}`, { cause: caught });
  }
  return caught;
}

/** Runs `fn`, which must reject (see `rejection`) and leave every task exactly as it was. */
export async function refusedUnchanged(
  env: Env,
  fn: () => Promise<unknown>,
  code?: ErrorCode,
): Promise<RatchetError> {
  const before = await all(env.store);
  const err = await rejection(fn, code);
  env.expect(await all(env.store), "nothing may be written by a refused call").toEqual(before);
  return err;
}
