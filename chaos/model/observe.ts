/**
 * Scenario 10, what is compared: a store's observable state read through the
 * Store interface (tasks by `list` and `get`, `steps`, `listReady`,
 * `nextRunAt`, `events`), projected to the fields the model predicts, and the
 * model's state projected the same way. Ids are the store's; the runner keeps
 * the map from model index to id.
 */
import { isDeepStrictEqual } from "node:util";
import type { Outcome, Status } from "../../src/core/model.js";
import type { StepRecord, Store, TaskId, TaskRecord } from "../../src/store/store.js";
import { isReady, type MError, type ModelState, type MTask, nextRunAt } from "./model.js";

/** The fields of a task the model predicts. */
export interface TaskView {
  queue: string;
  name: string;
  status: Status;
  outcome: Outcome | null;
  priority: number;
  maxMs: number;
  attempts: number;
  epoch: number;
  leaseUntil: number | null;
  lockedBy: string | null;
  wakeAt: number | null;
  runAfter: number;
  needsPending: number;
  abortRequested: boolean;
  dedupe: string | null;
  createdAt: number;
  startedAt: number | null;
  claimedAt: number | null;
  endedAt: number | null;
  result: unknown;
  error: unknown;
  progress: number | null;
  progressNote: string | null;
}

export interface StepView {
  name: string;
  result: unknown;
  attempt: number;
  createdAt: number;
}

/** What was read from the store after one command. */
export interface Snapshot {
  tasks: Map<TaskId, TaskRecord>;
  /** Steps of the tasks that were read (all, or the command's target). */
  steps: Map<TaskId, StepRecord[]>;
  /** Ids listReady returned per queue (full checks only). */
  ready: Map<string, TaskId[]> | null;
  /** nextRunAt, on a store that holds only this sequence's tasks. */
  nextRunAt: number | null | undefined;
  /** Disagreements among the store's own reads (get against list). */
  problems: string[];
}

export interface ReadPlan {
  queues: readonly string[];
  /** The store holds only this sequence's tasks (nextRunAt is then comparable). */
  fresh: boolean;
  /** Read `get`, `steps` and `listReady` for every task, not only the touched ones. */
  full: boolean;
}

/** Reads the store's side: every task of the sequence's queues, and steps of `stepsOf`. */
export async function readSnapshot(
  store: Store,
  plan: ReadPlan,
  stepsOf: readonly TaskId[],
): Promise<Snapshot> {
  const tasks = new Map<TaskId, TaskRecord>();
  for (const queue of plan.queues) {
    for (const t of await store.list({ queue, limit: 1000 })) tasks.set(t.id, t);
  }
  const steps = new Map<TaskId, StepRecord[]>();
  const problems: string[] = [];
  const ids = plan.full ? [...tasks.keys()] : stepsOf.filter((id) => tasks.has(id));
  for (const id of ids) {
    steps.set(id, await store.steps(id));
    // get() and list() must agree on every field (spec §9.1).
    if (plan.full) {
      const one = await store.get(id);
      if (!isDeepStrictEqual(one, tasks.get(id)))
        problems.push(
          `get(${id}) differs from list(): ${JSON.stringify(one)} vs ${JSON.stringify(tasks.get(id))}`,
        );
    }
  }
  let ready: Map<string, TaskId[]> | null = null;
  if (plan.full) {
    ready = new Map();
    for (const q of plan.queues)
      ready.set(
        q,
        (await store.listReady(q, 1000)).map((t) => t.id).sort((a, b) => a - b),
      );
  }
  return { tasks, steps, ready, nextRunAt: plan.fresh ? await store.nextRunAt() : undefined, problems };
}

/** The model's expected error, in the shape the store's error is normalised to. */
function expectedError(e: MError | null, idOf: (k: number) => TaskId | undefined): unknown {
  if (e === null) return null;
  const out: Record<string, unknown> = { name: e.name };
  if (e.message !== undefined) out.message = e.message;
  if (e.upstream !== undefined) {
    const id = idOf(e.upstream);
    out.upstream = id;
    // spec §6.1: the error is `upstream task N failed`, N the root.
    out.message = `upstream task ${id} failed`;
  }
  if (e.holder !== undefined) out.holder = e.holder;
  return out;
}

/** The store's error, keeping what the model predicts (a holder must be named, spec §5.4). */
function actualError(real: unknown, expected: unknown): unknown {
  if (real === null || expected === null || typeof expected !== "object") return real;
  const r = real as { name?: string; message?: string; upstream?: number };
  const x = expected as Record<string, unknown>;
  const out: Record<string, unknown> = { name: r.name };
  if ("message" in x) out.message = r.message;
  if ("upstream" in x) out.upstream = r.upstream;
  if ("holder" in x)
    out.holder = r.message?.includes(`last holder ${x.holder as string}`) ? x.holder : `(${r.message})`;
  return out;
}

export function modelView(t: MTask, idOf: (k: number) => TaskId | undefined): TaskView {
  return {
    queue: t.queue,
    name: t.name,
    status: t.status,
    outcome: t.outcome,
    priority: t.priority,
    maxMs: t.maxMs,
    attempts: t.attempts,
    epoch: t.epoch,
    leaseUntil: t.leaseUntil,
    lockedBy: t.lockedBy,
    wakeAt: t.wakeAt,
    runAfter: t.runAfter,
    needsPending: t.needsPending,
    abortRequested: t.abortRequested,
    dedupe: t.dedupe,
    createdAt: t.createdAt,
    startedAt: t.startedAt,
    claimedAt: t.claimedAt,
    endedAt: t.endedAt,
    result: t.result,
    error: expectedError(t.error, idOf),
    progress: t.progress,
    progressNote: t.progressNote,
  };
}

export function storeView(r: TaskRecord, expected: TaskView | undefined): TaskView {
  return {
    queue: r.queue,
    name: r.name,
    status: r.status,
    outcome: r.outcome,
    priority: r.priority,
    maxMs: r.maxMs,
    attempts: r.attempts,
    epoch: r.epoch,
    leaseUntil: r.leaseUntil,
    lockedBy: r.lockedBy,
    wakeAt: r.wakeAt,
    runAfter: r.runAfter,
    needsPending: r.needsPending,
    abortRequested: r.abortRequested,
    dedupe: r.dedupe,
    createdAt: r.createdAt,
    startedAt: r.startedAt,
    claimedAt: r.claimedAt,
    endedAt: r.endedAt,
    result: r.result,
    error: actualError(r.error, expected?.error ?? null),
    progress: r.progress,
    progressNote: r.progressNote,
  };
}

/** Field-by-field differences, as readable lines ("field: model X, store Y"). */
export function diffFields(label: string, expected: object, actual: object): string[] {
  const out: string[] = [];
  const keys = new Set([...Object.keys(expected), ...Object.keys(actual)]);
  for (const k of keys) {
    const a = (expected as Record<string, unknown>)[k];
    const b = (actual as Record<string, unknown>)[k];
    if (!isDeepStrictEqual(a, b))
      out.push(`${label}.${k}: model ${JSON.stringify(a)}, store ${JSON.stringify(b)}`);
  }
  return out;
}

/**
 * Differences between the model state and a snapshot; empty when they agree.
 * `idOf` maps model indices to the store's ids (every task must be mapped by now).
 */
export function diffState(
  m: ModelState,
  snap: Snapshot,
  idOf: (k: number) => TaskId | undefined,
  plan: ReadPlan,
): string[] {
  const out: string[] = [...snap.problems];
  const mapped = new Set<TaskId>();
  m.tasks.forEach((t, k) => {
    const id = idOf(k);
    if (id === undefined) {
      out.push(`task #${k}: the model has it, the store has no unmatched task for it`);
      return;
    }
    mapped.add(id);
    const r = snap.tasks.get(id);
    if (!r) {
      out.push(`task #${k} (id ${id}): missing from the store`);
      return;
    }
    const exp = modelView(t, idOf);
    out.push(...diffFields(`#${k}`, exp, storeView(r, exp)));
    const steps = snap.steps.get(id);
    if (steps) {
      const want: StepView[] = Object.entries(t.steps)
        .map(([name, s]) => ({ name, ...s }))
        .sort((a, b) => a.name.localeCompare(b.name));
      const got: StepView[] = steps
        .map((s) => ({ name: s.name, result: s.result, attempt: s.attempt, createdAt: s.createdAt }))
        .sort((a, b) => a.name.localeCompare(b.name));
      if (!isDeepStrictEqual(want, got))
        out.push(`#${k}.steps: model ${JSON.stringify(want)}, store ${JSON.stringify(got)}`);
    }
  });
  for (const id of snap.tasks.keys()) {
    if (!mapped.has(id)) out.push(`store task ${id}: not in the model`);
  }
  if (snap.ready) {
    for (const q of plan.queues) {
      const want = m.tasks
        .map((t, k) => ({ t, k }))
        .filter(({ t }) => t.queue === q && isReady(t, m.now))
        .map(({ k }) => idOf(k))
        .sort((a, b) => (a ?? 0) - (b ?? 0));
      const got = snap.ready.get(q) ?? [];
      if (!isDeepStrictEqual(want, got))
        out.push(
          `listReady(${q}) (spec §3.1): model ids ${JSON.stringify(want)}, store ${JSON.stringify(got)}`,
        );
    }
  }
  if (snap.nextRunAt !== undefined && snap.nextRunAt !== nextRunAt(m)) {
    out.push(`nextRunAt (spec §9.3): model ${nextRunAt(m)}, store ${snap.nextRunAt}`);
  }
  return out;
}
