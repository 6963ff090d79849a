/**
 * The task model: statuses, outcomes and the allowed transitions, declared
 * once as data. spec §1.1–§1.2.
 *
 * Terminology (used the same everywhere):
 * - task: one durable record that runs a definition's code with an input.
 * - definition: the code for a task name (`defineTask`), living in the process.
 * - step: a memoized unit inside a task; its result is committed once.
 * - job: a named group of tasks enqueued together, usually linked by `needs`.
 * - queue: a lane with its own admission limit; workers choose queues.
 * - claim: the conditional write that makes a worker the holder of a task.
 * - lease: how long a claim lasts without a heartbeat (maxMs + grace).
 * - token: the claim's fencing epoch; every holder write is conditional on it.
 * - attempt: one claim of a task, counted at claim time.
 */

export const STATUSES = ["pending", "running", "waiting", "completing", "terminal"] as const;
export type Status = (typeof STATUSES)[number];

export const OUTCOMES = ["completed", "failed", "aborted", "upstream_failed", "orphaned", "faulted"] as const;
export type Outcome = (typeof OUTCOMES)[number];

export type LiveStatus = Exclude<Status, "terminal">;

/** A status together with its outcome: the unit the transition table speaks about. */
export type State = { status: LiveStatus } | { status: "terminal"; outcome: Outcome };

type StateKey = LiveStatus | `terminal:${Outcome}`;

export function stateKey(s: State): StateKey {
  return s.status === "terminal" ? `terminal:${s.outcome}` : s.status;
}

/** Why a transition happens; every status write in a store names one. */
export type TransitionCause =
  | "enqueue" // (new) → pending | waiting | terminal:upstream_failed
  | "promote" // waiting → pending: timer due or needs satisfied
  | "claim" // pending → running, running → running (reclaim of an expired lease)
  | "complete" // running → terminal:completed
  | "retry_later" // running → waiting (backoff)
  | "sleep" // running → waiting (ctx.sleep)
  | "fail" // running → terminal:failed | faulted
  | "abort" // pending | waiting → terminal:aborted; running → terminal:aborted (holder or claim saw the mark)
  | "upstream" // waiting → terminal:upstream_failed (cascade)
  | "release" // running → pending (graceful shutdown)
  | "retry" // terminal:(failed|aborted|faulted|upstream_failed) → pending | waiting
  // Task trees (spec §12):
  | "hold" // running | pending | waiting → completing: an outcome decided while owned work is live
  | "finalize" // completing → terminal: the held outcome, once owned work drained
  | "suspend" // running → waiting: waitFor, waitForEvent, drain before the abort handler, blocked code
  | "wake" // waiting → pending: members terminal, signal arrived, owned work drained, code registered
  | "orphan" // pending | waiting → terminal:orphaned: aborted while no code can take it
  // Flow control (spec §14.9–§14.10):
  | "gate"; // pending | running → waiting: a claim found the seat full or the bucket empty (running: claimed in bulk, parked before commit)

const T = (from: readonly StateKey[] | "new", to: readonly StateKey[]) => ({ from, to });
const FAILED_ENDS = ["terminal:failed", "terminal:aborted", "terminal:faulted", "terminal:orphaned"] as const;

/**
 * The transition table. spec §1.2.
 * Invariant: a store applies only transitions listed here; `assertTransition`
 * is checked by tests against every decision the engine emits.
 */
export const TRANSITIONS: Record<
  TransitionCause,
  { from: readonly StateKey[] | "new"; to: readonly StateKey[] }
> = {
  enqueue: T("new", ["pending", "waiting", "terminal:upstream_failed"]),
  promote: T(["waiting"], ["pending"]),
  claim: T(["pending", "running"], ["running"]),
  complete: T(["running"], ["terminal:completed"]),
  retry_later: T(["running"], ["waiting"]),
  sleep: T(["running"], ["waiting"]),
  fail: T(["running"], ["terminal:failed", "terminal:faulted"]),
  abort: T(["pending", "waiting", "running"], ["terminal:aborted"]),
  upstream: T(["waiting"], ["terminal:upstream_failed"]),
  release: T(["running"], ["pending"]),
  retry: T([...FAILED_ENDS, "terminal:upstream_failed"], ["pending", "waiting"]),
  hold: T(["running", "pending", "waiting"], ["completing"]),
  finalize: T(
    ["completing"],
    ["terminal:completed", "terminal:failed", "terminal:aborted", "terminal:faulted"],
  ),
  suspend: T(["running"], ["waiting"]),
  wake: T(["waiting"], ["pending"]),
  orphan: T(["pending", "waiting"], ["terminal:orphaned"]),
  gate: T(["pending", "running"], ["waiting"]),
};

export function isAllowed(cause: TransitionCause, from: State | "new", to: State): boolean {
  const rule = TRANSITIONS[cause];
  const fromOk = rule.from === "new" ? from === "new" : from !== "new" && rule.from.includes(stateKey(from));
  return fromOk && rule.to.includes(stateKey(to));
}

/** Outcomes that release a dedupe key (spec §2.3) and cascade to dependents (spec §6.1). */
export function isFailureOutcome(outcome: Outcome): boolean {
  return outcome !== "completed";
}

/** Outcomes `retry(id)` accepts directly (spec §6.3). */
export function isRetryableOutcome(outcome: Outcome): boolean {
  return outcome === "failed" || outcome === "aborted" || outcome === "faulted" || outcome === "orphaned";
}

export function isLive(status: Status): boolean {
  return status !== "terminal";
}
