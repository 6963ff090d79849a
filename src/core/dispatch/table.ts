/**
 * The reconcile table (spec §20.4): for every reading kind and every live
 * attempt state, the one rule that picks the runner's action. Pure: the
 * attempt as listed, the reading, the step, the rules and `now` in; a
 * decision out.
 *
 * Read the table as "reading, then state". Its type gives every reading kind
 * a record over every live state, so a missing cell does not compile.
 */
import { InvalidStateError } from "../../errors.js";
import type { CellRuleName, Decision, ReadingAction } from "./actions.js";
import { pickRunningBound } from "./bounds.js";
import {
  type AttemptView,
  CLOSING_FAILURE,
  type ForcedFailure,
  isLiveState,
  type LiveAttemptState,
  type ReadingKind,
  type ReadingOf,
  type SessionReading,
} from "./model.js";
import type { DispatchTimeouts, SleepRules } from "./timeouts.js";
import { thresholdMs } from "./timeouts.js";

export interface ReadingInput<R extends SessionReading = SessionReading> {
  /** The attempt as the runner listed it, before the reading. */
  readonly attempt: AttemptView;
  readonly reading: R;
  /** The attempt's step in its pipeline; null when the pipeline no longer has the phase. */
  readonly step: { readonly timeoutMinutes: number } | null;
  readonly sleep: SleepRules;
  readonly timeouts: DispatchTimeouts;
  readonly now: number;
}

interface CellRule<K extends ReadingKind> {
  readonly name: CellRuleName;
  readonly pick: (input: ReadingInput<ReadingOf<K>>) => Decision;
}

/** One rule per reading kind × live state; the compiler proves totality. */
export type ReconcileTable = {
  readonly [K in ReadingKind]: { readonly [S in LiveAttemptState]: CellRule<K> };
};

const decide = (action: ReadingAction, rule: Decision["rule"]): Decision => ({ action, rule });
const settle = (forced: ForcedFailure | null, sessionStopped: boolean): ReadingAction => ({
  kind: "settle",
  forced,
  sessionStopped,
});

function closingFailure(a: AttemptView): ForcedFailure | null {
  if (a.closing === null) throw new InvalidStateError(`attempt ${a.id} is closing with no cause`);
  return CLOSING_FAILURE[a.closing];
}

const moveToRunning: CellRule<"running"> = {
  name: "move-to-running",
  pick: () => decide({ kind: "move-to-running", via: "reconcile" }, "move-to-running"),
};

const resumed: CellRule<"running"> = {
  name: "move-to-running",
  pick: () => decide({ kind: "move-to-running", via: "resume" }, "move-to-running"),
};

const runningBounds: CellRule<"running"> = { name: "running-bounds", pick: pickRunningBound };

/** spec §20.6: the owner revived a session we think sleeps; wake it, over the cap once no seat came in time. */
const sessionRan: CellRule<"running"> = {
  name: "session-ran",
  pick: (i) => {
    const requestedAt = i.attempt.wakeRequestedAt;
    if (requestedAt === null) return decide({ kind: "request-wake", by: "session-ran" }, "session-ran");
    return i.now - requestedAt >= thresholdMs(i.timeouts, "seatlessSeconds")
      ? decide({ kind: "wake-over-cap" }, "session-ran")
      : decide({ kind: "nothing" }, "session-ran");
  },
};

/** spec §20.7: closing and still running: give up, let it finish its close-out, or stop it. */
const closingStop: CellRule<"running"> = {
  name: "closing-stop",
  pick: (i) => {
    const { attempt } = i;
    if (attempt.closingAt === null)
      throw new InvalidStateError(`attempt ${attempt.id} is closing with no closingAt`);
    const closingMs = i.now - attempt.closingAt;
    if (closingMs >= thresholdMs(i.timeouts, "closingGiveUpMinutes"))
      return decide(settle(closingFailure(attempt), false), "closing-stop");
    const inGrace =
      attempt.closing !== "item-closed" &&
      i.reading.attention === "working" &&
      closingMs < thresholdMs(i.timeouts, "stopGraceSeconds");
    return decide(inGrace ? { kind: "nothing" } : { kind: "stop" }, "closing-stop");
  },
};

/** The session stopped with no request of ours: the host slept it and it wakes by itself. */
const sleepUnasked: CellRule<"suspended"> = {
  name: "sleep-unasked",
  pick: (i) =>
    decide(
      { kind: "sleep", requestWake: !i.reading.asked && i.attempt.suspendRequestedAt === null },
      "sleep-unasked",
    ),
};

function nothing<K extends ReadingKind>(): CellRule<K> {
  return { name: "nothing", pick: () => decide({ kind: "nothing" }, "nothing") };
}

function resumeOrLost<K extends ReadingKind>(): CellRule<K> {
  return {
    name: "resume-or-lost",
    pick: (i) => {
      const wokenAt = i.attempt.wokenAt;
      if (wokenAt === null) throw new InvalidStateError(`attempt ${i.attempt.id} is waking with no wokenAt`);
      return i.now - wokenAt >= thresholdMs(i.timeouts, "resumeLostMinutes")
        ? decide(settle("resume-lost", true), "resume-or-lost")
        : decide({ kind: "resume" }, "resume-or-lost");
    },
  };
}

function settleClosing<K extends ReadingKind>(): CellRule<K> {
  return {
    name: "settle-closing",
    pick: (i) => decide(settle(closingFailure(i.attempt), true), "settle-closing"),
  };
}

function settleEnded<K extends ReadingKind>(): CellRule<K> {
  return { name: "settle-ended", pick: () => decide(settle(null, true), "settle-ended") };
}

function sessionLost<K extends ReadingKind>(): CellRule<K> {
  return { name: "session-lost", pick: () => decide(settle("session-lost", true), "session-lost") };
}

/** Ended while running: the sleep we asked for when we had marked one, else a genuine end. */
const sleepOrSettle: CellRule<"ended"> = {
  name: "sleep-or-settle",
  pick: (i) =>
    i.attempt.suspendRequestedAt === null
      ? decide(settle(null, true), "sleep-or-settle")
      : decide({ kind: "sleep", requestWake: false }, "sleep-or-settle"),
};

const respawnOrLost: CellRule<"absent"> = {
  name: "respawn-or-lost",
  pick: (i) =>
    i.now - i.attempt.claimedAt >= thresholdMs(i.timeouts, "spawnLostMinutes")
      ? decide(settle("spawn-lost", true), "respawn-or-lost")
      : decide({ kind: "respawn" }, "respawn-or-lost"),
};

/** Closing with no session: settle like closing if one was ever seen; else the spawn may still land, until it is a stray. */
const awaitSpawnOrSettle: CellRule<"absent"> = {
  name: "await-spawn-or-settle",
  pick: (i) => {
    if (i.attempt.session !== null)
      return decide(settle(closingFailure(i.attempt), true), "await-spawn-or-settle");
    return i.now - i.attempt.claimedAt >= thresholdMs(i.timeouts, "spawnLostMinutes")
      ? decide(settle(closingFailure(i.attempt), false), "await-spawn-or-settle")
      : decide({ kind: "await-spawn" }, "await-spawn-or-settle");
  },
};

/**
 * The table. spec §20.4.
 * Invariant: one rule per (reading kind, live state); `ReconcileTable`'s type
 * makes a missing or extra cell a compile error.
 */
export const RECONCILE_TABLE: ReconcileTable = {
  running: {
    starting: moveToRunning,
    reconciling: moveToRunning,
    running: runningBounds,
    sleeping: sessionRan,
    waking: resumed,
    closing: closingStop,
  },
  suspended: {
    starting: sleepUnasked,
    reconciling: sleepUnasked,
    running: sleepUnasked,
    sleeping: nothing(),
    waking: resumeOrLost(),
    closing: settleClosing(),
  },
  ended: {
    starting: settleEnded(),
    reconciling: settleEnded(),
    running: sleepOrSettle,
    sleeping: nothing(),
    waking: resumeOrLost(),
    closing: settleClosing(),
  },
  absent: {
    starting: respawnOrLost,
    reconciling: respawnOrLost,
    running: sessionLost(),
    sleeping: sessionLost(),
    waking: sessionLost(),
    closing: awaitSpawnOrSettle,
  },
};

/**
 * The action for one reading of a live attempt's session. spec §20.4.
 * Invariant: total over live states and reading kinds; a terminal attempt is
 * refused (InvalidStateError), since the runner lists only live ones.
 */
export function pickReadingAction(input: ReadingInput): Decision {
  const state = input.attempt.state;
  if (!isLiveState(state))
    throw new InvalidStateError(`attempt ${input.attempt.id} is ${state}; only live attempts are read`);
  const r = input.reading;
  // Each branch narrows the reading to its row's type.
  switch (r.kind) {
    case "running":
      return RECONCILE_TABLE.running[state].pick({ ...input, reading: r });
    case "suspended":
      return RECONCILE_TABLE.suspended[state].pick({ ...input, reading: r });
    case "ended":
      return RECONCILE_TABLE.ended[state].pick({ ...input, reading: r });
    case "absent":
      return RECONCILE_TABLE.absent[state].pick({ ...input, reading: r });
  }
}
