/** Explaining an attempt's state (spec §20.28). */
import { describe, expect, it } from "vitest";
import { explainAttempt } from "../../src/core/dispatch/explain.js";
import { DEFAULT_TIMEOUTS } from "../../src/core/dispatch/timeouts.js";
import { attempt, MIN, T0 } from "./kit.js";

const explain = (a: Parameters<typeof explainAttempt>[0]["attempt"], step: number | null = 120) =>
  explainAttempt({ attempt: a, stepTimeoutMinutes: step, timeouts: DEFAULT_TIMEOUTS });

describe("explain an attempt (spec §20.28)", () => {
  it("§20.28 names the next threshold of each live state, as the table measures it", () => {
    expect(explain(attempt("starting", { session: null })).reason).toEqual({
      kind: "spawning",
      spawnLostAt: T0 + 10 * MIN,
    });
    expect(explain(attempt("running")).reason).toEqual({
      kind: "running",
      since: T0,
      timeoutAt: T0 + 120 * MIN,
    });
    expect(explain(attempt("running", { mode: "attended" })).reason).toMatchObject({ timeoutAt: null });
    expect(explain(attempt("sleeping", { wakeRequestedAt: T0 })).reason).toEqual({
      kind: "sleeping",
      wakeRequestedAt: T0,
      overCapAt: T0 + 300_000,
    });
    expect(explain(attempt("waking")).reason).toEqual({ kind: "waking", resumeLostAt: T0 + 10 * MIN });
    expect(explain(attempt("closing")).reason).toEqual({
      kind: "closing",
      cause: "timed-out",
      stopAt: T0 + 120_000,
      giveUpAt: T0 + 30 * MIN,
    });
    expect(explain(attempt("closing", { closing: "item-closed" })).reason).toMatchObject({ stopAt: T0 });
  });

  it("§20.28 an ended attempt says its outcome, and whether its session is a stray", () => {
    const ended = {
      ...attempt("running"),
      state: "failed" as const,
      endedAt: T0,
      forced: "stalled",
      sessionStopped: false,
    };
    const e = explain(ended);
    expect(e.reason).toEqual({ kind: "ended", state: "failed", forced: "stalled", at: T0, stray: true });
    expect(e.sentence).toContain("looks for it and stops it");
    expect(explain(attempt("sleeping")).sentence).toContain("no wake requested");
  });
});
