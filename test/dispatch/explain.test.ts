/** Explaining an attempt's state (spec §20.28). */
import { describe, expect, it } from "vitest";
import { explainAttempt, explainItemStuck } from "../../src/core/dispatch/explain.js";
import { definePipeline } from "../../src/core/dispatch/pipeline.js";
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

describe("stuck items (spec §20.30)", () => {
  const fix = definePipeline({
    name: "fix",
    steps: [
      { name: "build", worker: "w", spawn: { command: ["b"] }, on: { succeeded: { to: "review" } } },
      { name: "review", worker: "w", spawn: { command: ["r"] } },
    ],
  });
  const pipelines = new Map([["fix", fix]]);
  const item = (over: Partial<{ pipeline: string; step: string; state: string }>) => ({
    id: "7",
    pipeline: "fix",
    step: "build",
    state: "open",
    ...over,
  });

  it("§20.30 an open item at a step its pipeline no longer has is stuck, and says how to move it on", () => {
    expect(explainItemStuck(item({ step: "triage" }), pipelines)).toEqual({
      kind: "unknown_step",
      pipeline: "fix",
      step: "triage",
      steps: ["build", "review"],
      sentence:
        'stuck: pipeline "fix" has no step "triage" (its steps: build, review); ratchet item move 7 STEP, or ratchet item close 7',
    });
    expect(explainItemStuck(item({ pipeline: "old" }), pipelines)).toMatchObject({
      kind: "unknown_pipeline",
      pipeline: "old",
    });
  });

  it("§20.30 an item at a step of its pipeline, or not open, is not stuck", () => {
    expect(explainItemStuck(item({}), pipelines)).toBeNull();
    for (const state of ["running", "done", "closed", "archived"])
      expect(explainItemStuck(item({ step: "triage", state }), pipelines)).toBeNull();
  });
});
