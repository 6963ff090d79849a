/**
 * Scenario 10, the model's state: tasks as the spec describes them (spec §1.1), in model indices
 * (enqueue order), and the small reads the commands share. No I/O.
 */
import type { Outcome, Status } from "../../src/core/model.js";

/** One AGING_STEP of spec §3.5 (6 min), written again so the model does not borrow the code's constant. */
const AGING_MS = 6 * 60_000;

export interface ModelConfig {
  /** Lease grace of every claim and heartbeat. */
  graceMs: number;
  /** Admission limit per queue (spec §2.7). */
  maxDepth: Readonly<Record<string, number>>;
  /** Names with a registered definition; abort of any other ends `orphaned` (spec §12.6). */
  known: readonly string[];
  /** Only for the harness's own tests: "failed" expects the old end of a marked, exhausted task (see `exhaust`). */
  strictMarkedExhausted?: "failed";
}

/** A stored error. `upstream` is a model index; `holder`: the message must name this holder (spec §5.4). */
export interface MError {
  name: string;
  message?: string;
  upstream?: number;
  holder?: string;
}

export interface MStep {
  result: unknown;
  attempt: number;
  createdAt: number;
}

export interface MTask {
  queue: string;
  name: string;
  priority: number;
  maxMs: number;
  maxAttempts: number;
  dedupe: string | null;
  /** Model index of the one task this one needs, or null. */
  need: number | null;
  createdAt: number;
  runAfter: number;
  status: Status;
  outcome: Outcome | null;
  attempts: number;
  epoch: number;
  leaseUntil: number | null;
  lockedBy: string | null;
  wakeAt: number | null;
  needsPending: number;
  abortRequested: boolean;
  startedAt: number | null;
  claimedAt: number | null;
  endedAt: number | null;
  result: unknown;
  error: MError | null;
  progress: number | null;
  progressNote: string | null;
  steps: Record<string, MStep>;
  /** Reclaims after an expired lease, each one a `reclaimed` event (spec §3.3). */
  reclaims: number;
}

export interface ModelState {
  now: number;
  tasks: MTask[];
}

/** A worker's proof of a claim, in model indices. `abort`: claimed with the mark set (spec §12.5). */
export interface MFence {
  task: number;
  token: number;
  mode: "run" | "abort";
}

/** What a caller sees: a value (in model indices) or a RatchetError code. */
export type Obs = { ok: unknown } | { error: string };

/** One allowed outcome of a command. */
export interface Branch {
  state: ModelState;
  obs: Obs;
}

export interface WorkerSpec {
  id: string;
  queues: readonly string[];
  names: readonly string[];
}

export interface NewTaskSpec {
  queue: string;
  name: string;
  priority: number;
  maxMs: number;
  maxAttempts: number;
  delayMs: number;
  dedupe: string | null;
  need: number | null;
}

/** The part of a ClaimedTask the model predicts. */
export interface ClaimView {
  task: number;
  reclaimed: boolean;
  status: Status;
  attempts: number;
  epoch: number;
  leaseUntil: number | null;
  lockedBy: string | null;
  abortRequested: boolean;
  startedAt: number | null;
  claimedAt: number | null;
}

export type ModelSettlement =
  | { kind: "complete"; result: unknown }
  | { kind: "fail"; error: MError }
  | { kind: "retry"; delayMs: number; error: MError }
  | { kind: "sleep"; step: string; delayMs: number }
  | { kind: "release" }
  | { kind: "aborted"; error: MError };

export function initialState(now: number): ModelState {
  return { now, tasks: [] };
}

export const clone = (s: ModelState): ModelState => structuredClone(s);
export const one = (state: ModelState, obs: Obs): Branch[] => [{ state, obs }];
export const isLive = (t: MTask): boolean => t.status !== "terminal";

export function advance(s0: ModelState, ms: number): ModelState {
  const s = clone(s0);
  s.now += ms;
  return s;
}

export function liveIn(s: ModelState, queue: string): number {
  return s.tasks.filter((t) => t.queue === queue && isLive(t)).length;
}

/** spec §3.5: the order key; smaller is claimed first, then the smaller id (= model index). */
export function orderKey(t: MTask): number {
  return t.createdAt - t.priority * AGING_MS;
}

/** spec §3.1: ready for a claim by this worker (the claim promotes due timers first). */
export function isReady(t: MTask, now: number): boolean {
  return (
    t.status === "pending" ||
    (t.status === "running" && t.leaseUntil !== null && t.leaseUntil <= now) ||
    (t.status === "waiting" && t.wakeAt !== null && t.wakeAt <= now)
  );
}

/** Could this worker's claim take anything now (spec §3.1, §3.6)? */
export function hasReady(s: ModelState, w: WorkerSpec): boolean {
  return s.tasks.some((t) => w.queues.includes(t.queue) && w.names.includes(t.name) && isReady(t, s.now));
}

/** spec §9.3: the earliest due time among pending tasks (now), timers and leases; null if none. */
export function nextRunAt(s: ModelState): number | null {
  if (s.tasks.some((t) => t.status === "pending")) return s.now;
  const times = s.tasks.flatMap((t) =>
    t.status === "waiting" && t.wakeAt !== null
      ? [t.wakeAt]
      : t.status === "running" && t.leaseUntil !== null
        ? [t.leaseUntil]
        : [],
  );
  return times.length === 0 ? null : Math.min(...times);
}
