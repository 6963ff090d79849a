/** Builders for the pure dispatch tests: an attempt, readings and a table input, all at fixed instants. */
import type { AttemptView, LiveAttemptState, SessionReading } from "../../src/core/dispatch/model.js";
import type { ReadingInput } from "../../src/core/dispatch/table.js";
import { DEFAULT_SLEEP, DEFAULT_TIMEOUTS } from "../../src/core/dispatch/timeouts.js";

/** The claim instant every attempt starts from. */
export const T0 = 1_000_000_000;
export const MIN = 60_000;

export function attempt(state: LiveAttemptState, over: Partial<AttemptView> = {}): AttemptView {
  return {
    id: "a1",
    state,
    mode: "agent",
    phase: "build",
    claimedAt: T0,
    startedAt: T0,
    wokenAt: state === "waking" ? T0 : null,
    wakeRequestedAt: null,
    suspendRequestedAt: null,
    closingAt: state === "closing" ? T0 : null,
    closing: state === "closing" ? "timed-out" : null,
    session: "s1",
    endedAt: null,
    ...over,
  };
}

export function running(over: Partial<Extract<SessionReading, { kind: "running" }>> = {}): SessionReading {
  return {
    kind: "running",
    attention: "working",
    lastActivityAt: T0,
    lastOwnerAt: null,
    usageLimitResetsAt: null,
    agentSession: "agent-1",
    ...over,
  };
}

export const suspended = (asked = false): SessionReading => ({ kind: "suspended", asked });
export const ended: SessionReading = { kind: "ended", exitCode: 0 };
export const absent: SessionReading = { kind: "absent" };

export function input(
  a: AttemptView,
  reading: SessionReading,
  now = T0,
  over: Partial<ReadingInput> = {},
): ReadingInput {
  return {
    attempt: a,
    reading,
    step: { timeoutMinutes: 120 },
    sleep: DEFAULT_SLEEP,
    timeouts: DEFAULT_TIMEOUTS,
    now,
    ...over,
  };
}
