/** The running bounds in their order (spec §20.5). */
import { describe, expect, it } from "vitest";
import { BOUND_NAMES } from "../../src/core/dispatch/actions.js";
import { RUNNING_BOUNDS } from "../../src/core/dispatch/bounds.js";
import { pickReadingAction } from "../../src/core/dispatch/table.js";
import { attempt, input, MIN, running, T0 } from "./kit.js";

const pick = (...args: Parameters<typeof input>) => pickReadingAction(input(...args));
/** Far enough for every bound of the defaults to be due (step timeout 120 min). */
const LATE = T0 + 300 * MIN;

describe("the running bounds (spec §20.5)", () => {
  it("§20.5 are checked in the documented order", () => {
    expect(RUNNING_BOUNDS.map((b) => b.name)).toEqual([...BOUND_NAMES]);
  });

  it("§20.5 a suspend that did not happen beats the usage limit", () => {
    const d = pick(
      attempt("running", { suspendRequestedAt: T0 }),
      running({ usageLimitResetsAt: LATE }),
      LATE,
    );
    expect(d).toEqual({ action: { kind: "clear-mark" }, rule: "bound:unhappened-suspend" });
  });

  it("§20.5 the usage limit beats the step timeout", () => {
    const d = pick(attempt("running"), running({ usageLimitResetsAt: LATE + MIN }), LATE);
    expect(d.action).toEqual({ kind: "close", cause: "usage-limit", resetsAt: LATE + MIN });
  });

  it("§20.5 the step timeout beats a turn that ended", () => {
    const d = pick(attempt("running"), running({ attention: "turn-ended" }), LATE);
    expect(d.action).toEqual({ kind: "close", cause: "timed-out", afterMinutes: 120 });
  });

  it("§20.5 a turn that ended (agent mode) beats the stall", () => {
    const d = pick(attempt("running"), running({ attention: "turn-ended" }), T0 + 60 * MIN);
    expect(d).toEqual({ action: { kind: "close", cause: "turn-ended" }, rule: "bound:turn-ended" });
  });

  it("§20.5 a session waiting for its owner sleeps instead of being stall-closed", () => {
    const d = pick(attempt("running"), running({ attention: "waiting" }), T0 + 60 * MIN);
    expect(d.action).toEqual({ kind: "sleep-if-idle", waitingSince: T0 });
  });

  it("§20.5 a waiting session is never stall-closed: before the idle time it is only bound", () => {
    const timeouts = { stallMinutes: 10 };
    const d = pick(attempt("running"), running({ attention: "waiting" }), T0 + 20 * MIN, {
      timeouts: { ...input(attempt("running"), running()).timeouts, ...timeouts },
    });
    expect(d).toEqual({ action: { kind: "bind-only" }, rule: "bound:waiting-for-owner" });
  });

  it("§20.5 a waiting session whose agent session is unknown cannot be revived: the stall applies", () => {
    const d = pick(attempt("running"), running({ attention: "waiting", agentSession: null }), T0 + 60 * MIN);
    expect(d.action).toEqual({ kind: "close", cause: "stalled" });
  });

  it("§20.5 the stall (agent mode) closes a quiet working session", () => {
    const d = pick(attempt("running"), running(), T0 + 60 * MIN);
    expect(d).toEqual({ action: { kind: "close", cause: "stalled" }, rule: "bound:stall" });
  });

  it("§20.5 attended mode: no step timeout, no turn-end close, no stall; an unattended session sleeps", () => {
    const a = attempt("running", { mode: "attended" });
    const d = pick(a, running({ attention: "working", lastActivityAt: LATE - MIN }), LATE);
    expect(d).toEqual({ action: { kind: "sleep-unattended", since: T0 }, rule: "bound:unattended" });
  });

  it("§20.5 attended mode: a turn that ended is waiting for the owner, and sleeps once idle", () => {
    const a = attempt("running", { mode: "attended" });
    const d = pick(a, running({ attention: "turn-ended", lastActivityAt: T0 }), T0 + 30 * MIN);
    expect(d.action).toEqual({ kind: "sleep-if-idle", waitingSince: T0 });
  });

  it("§20.5 the step timeout does not apply when the pipeline lost the step", () => {
    const d = pick(attempt("running"), running({ lastActivityAt: LATE }), LATE, { step: null });
    expect(d.rule).toBe("bound:default");
  });

  it("§20.5 the stretch starts at the latest wake: a woken attempt's step timeout counts from the wake", () => {
    const a = attempt("running", { wokenAt: T0 + 200 * MIN });
    const d = pick(a, running({ lastActivityAt: LATE }), LATE);
    expect(d.rule).toBe("bound:default");
  });

  it("§20.5 the unattended sleep needs the agent session, and counts from the owner's last visit", () => {
    const a = attempt("running", { mode: "attended" });
    const r = { attention: "working" as const, lastActivityAt: LATE - MIN };
    expect(pick(a, running({ ...r, agentSession: null }), LATE).rule).toBe("bound:default");
    expect(pick(a, running({ ...r, lastOwnerAt: LATE - 30 * MIN }), LATE).rule).toBe("bound:default");
  });

  it("§20.5 attended mode: an owner who is attached keeps a quiet session from counting as waiting", async () => {
    const a = attempt("running", { mode: "attended" });
    const r = { attention: "working" as const, lastActivityAt: T0 };
    expect(pick(a, running({ ...r, lastOwnerAt: T0 + 60 * MIN }), T0 + 60 * MIN)).toEqual({
      action: { kind: "bind-only" },
      rule: "bound:waiting-for-owner",
    });
    expect(pick(a, running({ ...r, lastOwnerAt: T0 + 10 * MIN }), T0 + 40 * MIN).action).toEqual({
      kind: "sleep-if-idle",
      waitingSince: T0 + 10 * MIN,
    });
  });
});
