/**
 * The dispatch model (spec §20.1–§20.2): attempt states, modes, closing
 * causes, forced failures and session readings, declared once as data.
 *
 * Terminology (used the same everywhere in src/dispatch and src/core/dispatch):
 * - item: a unit of work (an issue, a ticket) that moves through a pipeline.
 * - pipeline: named steps, each run by a worker kind, joined by edges on outcomes.
 * - attempt: one try of one step of one item, in an external session.
 * - session: what a worker adapter hosts (a process, a tmux session); the
 *   attempt's `session` is null until the runner saw it and bound it.
 * - reading: one observation of a session, taken by the runner each pass.
 * - runner: the loop that lists live attempts, reads their sessions and
 *   applies the action the reconcile table picks (src/core/dispatch/table.ts).
 */

export const LIVE_ATTEMPT_STATES = [
  "starting",
  "reconciling",
  "running",
  "sleeping",
  "waking",
  "closing",
] as const;
export type LiveAttemptState = (typeof LIVE_ATTEMPT_STATES)[number];

export const TERMINAL_ATTEMPT_STATES = ["succeeded", "failed"] as const;
export type TerminalAttemptState = (typeof TERMINAL_ATTEMPT_STATES)[number];

export type AttemptState = LiveAttemptState | TerminalAttemptState;

/** spec §20.1: the runner reads only live attempts. */
export function isLiveState(state: AttemptState): state is LiveAttemptState {
  return (LIVE_ATTEMPT_STATES as readonly string[]).includes(state);
}

/** `agent`: unattended (step timeout, turn end, stall apply); `attended`: an owner works in the session. */
export const ATTEMPT_MODES = ["agent", "attended"] as const;
export type AttemptMode = (typeof ATTEMPT_MODES)[number];

/** Why an attempt is closing (spec §20.7). */
export const CLOSING_CAUSES = [
  "closed-out",
  "turn-ended",
  "timed-out",
  "item-closed",
  "stalled",
  "skill-missing",
  "usage-limit",
] as const;
export type ClosingCause = (typeof CLOSING_CAUSES)[number];

/** A failure the runner imposes, as opposed to one the session reported (spec §20.7). */
export const FORCED_FAILURES = [
  "timed-out",
  "item-closed",
  "stalled",
  "skill-missing",
  "usage-limit",
  "session-lost",
  "spawn-lost",
  "resume-lost",
] as const;
export type ForcedFailure = (typeof FORCED_FAILURES)[number];

/**
 * The forced failure each closing cause settles with. A close-out settles by
 * what it reports, and a turn that ended without one is left to settlement.
 * spec §20.7.
 * Invariant: total over ClosingCause (the Record type proves it).
 */
export const CLOSING_FAILURE: Readonly<Record<ClosingCause, ForcedFailure | null>> = Object.freeze({
  "closed-out": null,
  "turn-ended": null,
  "timed-out": "timed-out",
  "item-closed": "item-closed",
  stalled: "stalled",
  "skill-missing": "skill-missing",
  "usage-limit": "usage-limit",
});

/** Milliseconds since the epoch. */
export type Instant = number;

/**
 * The fields of an attempt the pure rules read (spec §20.1). Times are
 * instants from the store's clock.
 */
export interface AttemptView {
  readonly id: string;
  readonly state: AttemptState;
  readonly mode: AttemptMode;
  /** The pipeline step this attempt runs. */
  readonly phase: string;
  readonly claimedAt: Instant;
  readonly startedAt: Instant | null;
  readonly wokenAt: Instant | null;
  readonly wakeRequestedAt: Instant | null;
  /** Our suspend mark: set before we ask the worker to suspend, cleared when it happened or did not. */
  readonly suspendRequestedAt: Instant | null;
  readonly closingAt: Instant | null;
  readonly closing: ClosingCause | null;
  /** The worker's session id, null until the session was seen and bound. */
  readonly session: string | null;
  readonly endedAt: Instant | null;
}

/** What the agent in a session is doing, as far as the worker can tell. */
export const ATTENTIONS = ["working", "turn-ended", "waiting"] as const;
/**
 * `working`: producing output or thinking; `turn-ended`: its turn is over
 * and it expects a message; `waiting`: it asks its owner something (a
 * permission prompt, a question) and cannot go on without an answer.
 */
export type Attention = (typeof ATTENTIONS)[number];

/** One reading of a session (spec §20.2). */
export type SessionReading =
  | {
      readonly kind: "running";
      readonly attention: Attention;
      readonly lastActivityAt: Instant;
      /** The last time an owner was attached or typed; null when never. */
      readonly lastOwnerAt: Instant | null;
      /** Set when the agent hit its provider's usage limit. */
      readonly usageLimitResetsAt: Instant | null;
      /** The agent's own session id; null until captured (without it the session cannot be revived). */
      readonly agentSession: string | null;
    }
  | {
      readonly kind: "suspended";
      /** Whether we asked for the suspend (our mark was seen by the worker). */
      readonly asked: boolean;
    }
  | { readonly kind: "ended"; readonly exitCode: number | null }
  | { readonly kind: "absent" };

export type ReadingKind = SessionReading["kind"];
export const READING_KINDS: readonly ReadingKind[] = ["running", "suspended", "ended", "absent"];

export type ReadingOf<K extends ReadingKind> = Extract<SessionReading, { kind: K }>;

/** The later of two instants, ignoring a missing second. */
export function later(first: Instant, second: Instant | null): Instant {
  return second !== null && second > first ? second : first;
}

/**
 * Stretch start (spec §20.5): a stretch of running begins at the start (or
 * the claim, before a start was seen) or at the latest wake.
 * Invariant: never earlier than `claimedAt`'s stand-in, never earlier than `wokenAt`.
 */
export function stretchStart(a: AttemptView): Instant {
  return later(a.startedAt ?? a.claimedAt, a.wokenAt);
}
