/**
 * The running bounds (spec §20.5): what to do when a running attempt's
 * session is read running. Checked in order; the first that gives an action
 * wins, and a session within every bound is only bound (`bind-only`).
 */
import type { BoundName, Decision, ReadingAction } from "./actions.js";
import { type AttemptView, type Instant, later, type ReadingOf, stretchStart } from "./model.js";
import type { ReadingInput } from "./table.js";
import { thresholdMs, toMs } from "./timeouts.js";

type Running = ReadingInput<ReadingOf<"running">>;

interface Bound {
  readonly name: BoundName;
  /** An action ends the search; null passes to the next bound. */
  readonly pick: (input: Running) => ReadingAction | null;
}

/**
 * Since when the session waits for its owner, or null when it does not
 * (spec §20.5 rule 5): it asks something (`waiting`), or, attended, its turn
 * ended or it has been quiet for `afterQuietMinutes`. Measured from the later
 * of its last activity and the stretch start (attended: and the owner's last
 * visit), so a fresh wake, or an owner who attaches, restarts it.
 * An agent-mode session that is merely quiet is not waiting: it may stall.
 */
export function findWaitingSince(input: Running): Instant | null {
  const { attempt, reading, now } = input;
  const base = later(reading.lastActivityAt, stretchStart(attempt));
  // Attended: an owner who is attached (or was, lately) is the one the session waits for; it has not waited yet.
  const since = attempt.mode === "attended" ? later(base, reading.lastOwnerAt) : base;
  if (reading.attention === "waiting") return since;
  if (attempt.mode !== "attended") return null;
  if (reading.attention === "turn-ended") return since;
  return now - reading.lastActivityAt >= toMs(input.sleep.afterQuietMinutes, "min") ? since : null;
}

const isAgent = (a: AttemptView) => a.mode === "agent";

/**
 * The bounds in order. Why idle sleep comes before stall: for a session that
 * waits for its owner both fall due about 30 minutes after its last
 * activity, and checking stall first would leave idle sleep no case in agent
 * mode; a waiting session is therefore never stall-closed.
 * Invariant: the order is BOUND_NAMES' order (a test checks it).
 */
export const RUNNING_BOUNDS: readonly Bound[] = [
  {
    name: "unhappened-suspend",
    pick: (i) => (i.attempt.suspendRequestedAt !== null ? { kind: "clear-mark" } : null),
  },
  {
    name: "usage-limit",
    pick: (i) => {
      const resetsAt = i.reading.usageLimitResetsAt;
      return resetsAt !== null ? { kind: "close", cause: "usage-limit", resetsAt } : null;
    },
  },
  {
    name: "step-timeout",
    pick: (i) => {
      if (!isAgent(i.attempt) || i.step === null) return null;
      const limit = i.step.timeoutMinutes;
      return i.now - stretchStart(i.attempt) >= toMs(limit, "min")
        ? { kind: "close", cause: "timed-out", afterMinutes: limit }
        : null;
    },
  },
  {
    name: "turn-ended",
    pick: (i) =>
      isAgent(i.attempt) && i.reading.attention === "turn-ended"
        ? { kind: "close", cause: "turn-ended" }
        : null,
  },
  {
    name: "waiting-for-owner",
    pick: (i) => {
      const waitingSince = findWaitingSince(i);
      // A session stopped before its agent-session id was captured could not be revived: keep it awake.
      if (waitingSince === null || i.reading.agentSession === null) return null;
      return i.now - waitingSince >= toMs(i.sleep.afterIdleMinutes, "min")
        ? { kind: "sleep-if-idle", waitingSince }
        : { kind: "bind-only" };
    },
  },
  {
    name: "stall",
    pick: (i) =>
      isAgent(i.attempt) && i.now - i.reading.lastActivityAt >= thresholdMs(i.timeouts, "stallMinutes")
        ? { kind: "close", cause: "stalled" }
        : null,
  },
  {
    name: "unattended",
    pick: (i) => {
      if (i.attempt.mode !== "attended" || i.reading.agentSession === null) return null;
      const since = later(stretchStart(i.attempt), i.reading.lastOwnerAt);
      return i.now - since >= toMs(i.sleep.afterUnattendedMinutes, "min")
        ? { kind: "sleep-unattended", since }
        : null;
    },
  },
];

/**
 * The running×running cell: the first bound with an action, else `bind-only`.
 * spec §20.5.
 * Invariant: exactly one decision, named after the bound that gave it.
 */
export function pickRunningBound(input: Running): Decision {
  for (const bound of RUNNING_BOUNDS) {
    const action = bound.pick(input);
    if (action !== null) return { action, rule: `bound:${bound.name}` };
  }
  return { action: { kind: "bind-only" }, rule: "bound:default" };
}
