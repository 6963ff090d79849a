/**
 * Shared helpers for the engine tests. Nothing here sleeps to "let things
 * settle": waiting is always on a condition, bounded by a timeout.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach } from "vitest";
import type { Clock } from "../../src/core/clock.js";
import type { TaskDefinition } from "../../src/engine/definition.js";
import { type OpenOptions, silentLogger } from "../../src/engine/options.js";
import { Ratchet, type TickReport } from "../../src/engine/ratchet.js";
import { RatchetError } from "../../src/errors.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import type { ClaimRequest, NewTask, TaskRecord } from "../../src/store/store.js";
import { FakeClock, seededRandom } from "../../src/testing/fake-clock.js";

export { FakeClock, seededRandom, silentLogger };

/** Resources opened by a test, closed after it (even when it fails). */
const cleanups: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  const list = cleanups.splice(0).reverse();
  for (const c of list) {
    try {
      await c();
    } catch {
      // Closing twice or after a failure must not hide the test's own error.
    }
  }
});

export function onCleanup(fn: () => Promise<void> | void): void {
  cleanups.push(fn);
}

/** Opens an in-memory Ratchet (unless `store` is given) that is closed after the test. */
export async function openRatchet(
  tasks: readonly TaskDefinition[],
  opts: Omit<OpenOptions, "tasks"> = {},
): Promise<Ratchet> {
  const r = await Ratchet.open({
    store: "sqlite::memory:",
    logger: silentLogger,
    random: seededRandom(1),
    ...opts,
    tasks,
  });
  onCleanup(() => r.close());
  return r;
}

/** A fresh temp directory (removed after the test) and a database path inside it. */
export function tempDbPath(): string {
  const dir = mkdtempSync(join(tmpdir(), "ratchet-test-"));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, "ratchet.db");
}

/** A migrated SqliteStore for white-box tests, closed after the test. */
export async function openStore(clock: Clock, path = ":memory:"): Promise<SqliteStore> {
  const s = new SqliteStore({ path, clock });
  await s.migrate();
  onCleanup(() => s.close());
  return s;
}

/** A NewTask with defaults, for direct store calls. */
export function newTask(over: Partial<NewTask> = {}): NewTask {
  return {
    name: "t",
    version: 1,
    queue: "default",
    input: "null",
    maxAttempts: 4,
    priority: 0,
    maxMs: 1_000,
    delayMs: 0,
    dedupe: null,
    job: null,
    needs: [],
    ...over,
  };
}

export const unlimited = { maxDepth: () => 1_000_000 };

export function claimReq(over: Partial<ClaimRequest> = {}): ClaimRequest {
  return {
    workerId: "w1",
    queues: ["default"],
    names: ["t"],
    limit: 10,
    leaseGraceMs: 10_000,
    ...over,
  };
}

/** Polls `cond` until it returns a truthy value; throws after `timeoutMs`. */
export async function until<T>(
  cond: () => T | Promise<T>,
  what = "condition",
  timeoutMs = 10_000,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let delay = 1;
  for (;;) {
    const v = await cond();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 20);
  }
}

/** Waits until task `id` has the given status. */
export function untilStatus(r: Ratchet, id: number, status: TaskRecord["status"]): Promise<TaskRecord> {
  return until(async () => {
    const t = await r.get(id);
    return t?.status === status ? t : null;
  }, `task ${id} to be ${status}`);
}

/** A promise with its resolve function exposed. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Resolves when `signal` aborts. */
export function aborted(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason);
    else signal.addEventListener("abort", () => resolve(signal.reason), { once: true });
  });
}

/** All task rows (newest first), straight from the store. */
export async function allTasks(r: Ratchet): Promise<TaskRecord[]> {
  return r.store.list({ limit: 100_000 });
}

export async function countTasks(r: Ratchet): Promise<number> {
  const stats = await r.stats();
  let n = 0;
  for (const q of stats) for (const v of Object.values(q.byStatus)) n += v ?? 0;
  return n;
}

/** Runs `fn`, expects a RatchetError with `code`, and returns it. */
export async function expectCode(fn: () => unknown, code: string): Promise<RatchetError> {
  let caught: unknown;
  try {
    await fn();
  } catch (e) {
    caught = e;
  }
  if (caught === undefined) throw new Error(`expected ${code}, but nothing was thrown`);
  if (!(caught instanceof RatchetError)) {
    throw new Error(`expected RatchetError ${code}, got ${String(caught)}`, { cause: caught });
  }
  if (caught.code !== code) {
    throw new Error(`expected ${code}, got ${caught.code}: ${caught.message}`, { cause: caught });
  }
  return caught;
}

/** Ticks with a generous budget until `cond` holds (bounded number of rounds). */
export async function tickUntil(
  r: Ratchet,
  cond: () => boolean | Promise<boolean>,
  opts: { clock?: FakeClock; advanceMs?: number; rounds?: number } = {},
): Promise<void> {
  for (let i = 0; i < (opts.rounds ?? 50); i++) {
    if (await cond()) return;
    await drain(r);
    if (await cond()) return;
    if (opts.clock && opts.advanceMs) opts.clock.advance(opts.advanceMs);
  }
  throw new Error("tickUntil: condition not reached");
}

/** One tick with a budget large enough for any default definition (maxMs 60 s + reserve). */
export function drain(r: Ratchet): Promise<TickReport> {
  return r.tick({ budgetMs: 3_600_000 });
}
