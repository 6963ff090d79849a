/** Kept sessions, forgetting and resume fallback (spec §20.13–§20.15), capacity backoff (spec §20.6). */
import { describe, expect, it } from "vitest";
import { definePipeline } from "../../src/core/dispatch/pipeline.js";
import {
  CAPACITY_BACKOFF,
  capacityDelayMs,
  isKeptDue,
  resumeFallback,
  shouldKeep,
} from "../../src/core/dispatch/sessions.js";
import { DEFAULT_TIMEOUTS } from "../../src/core/dispatch/timeouts.js";
import { seededRandom } from "../../src/testing/fake-clock.js";
import { attempt, T0 } from "./kit.js";

const spawn = { command: ["x"] };
const pipeline = definePipeline({
  name: "p",
  steps: [
    { name: "build", worker: "w", spawn, on: { succeeded: { to: "review" } } },
    { name: "review", worker: "w", spawn, on: { failed: { to: "build", resume: true, max: 2 } } },
  ],
});

describe("kept sessions (spec §20.13–§20.15)", () => {
  it("§20.13 only a succeeded, session-stopped, bound attempt whose phase a resume edge targets is kept", () => {
    const build = attempt("running", { phase: "build" });
    expect(shouldKeep(pipeline, build, true, true)).toBe(true);
    expect(shouldKeep(pipeline, build, false, true)).toBe(false);
    expect(shouldKeep(pipeline, build, true, false)).toBe(false);
    expect(shouldKeep(pipeline, { ...build, session: null }, true, true)).toBe(false);
    expect(shouldKeep(pipeline, attempt("running", { phase: "review" }), true, true)).toBe(false);
  });

  it("§20.14 a session a different live attempt carries is never due, whatever the item or age", () => {
    const kept = { session: "s1", worker: "w", attempt: "a1", keptAt: T0 };
    const other = { ...attempt("running"), id: "a2", endedAt: null };
    for (const state of ["closed", "done", "archived", "open"] as const)
      expect(isKeptDue(kept, { state }, other, T0 + 1e12, DEFAULT_TIMEOUTS)).toBe(false);
    expect(isKeptDue(kept, null, other, T0 + 1e12, DEFAULT_TIMEOUTS)).toBe(false);
  });

  it("§20.14 otherwise a kept session is due when its item is gone, closed, done or archived", () => {
    const kept = { session: "s1", worker: "w", attempt: "a1", keptAt: T0 };
    const self = { ...attempt("running"), id: "a1" };
    const endedOther = { ...attempt("running"), id: "a2", endedAt: T0 };
    expect(isKeptDue(kept, null, null, T0, DEFAULT_TIMEOUTS)).toBe(true);
    for (const state of ["closed", "done", "archived"] as const)
      expect(isKeptDue(kept, { state }, endedOther, T0, DEFAULT_TIMEOUTS)).toBe(true);
    expect(isKeptDue(kept, { state: "open" }, self, T0, DEFAULT_TIMEOUTS)).toBe(false);
    expect(isKeptDue(kept, { state: "running" }, self, T0, DEFAULT_TIMEOUTS)).toBe(false);
  });

  it("§20.15 only a refusal for cause other falls back to a fresh spawn", () => {
    expect(resumeFallback({ kind: "refused", cause: "other", message: "gone" })).toBe(true);
    expect(resumeFallback({ kind: "refused", cause: "capacity", message: "full" })).toBe(false);
    expect(resumeFallback({ kind: "unanswered", message: "timeout" })).toBe(false);
    expect(resumeFallback({ kind: "started", session: "s" })).toBe(false);
  });

  it("§20.6 capacity backoff is full jitter in [1 s, min(10 min, 5 s·2^(n−1)))", () => {
    const random = seededRandom(7);
    for (let n = 1; n <= 12; n++) {
      const ceiling = Math.min(CAPACITY_BACKOFF.capMs, 5_000 * 2 ** (n - 1));
      let lo = Number.POSITIVE_INFINITY;
      let hi = 0;
      for (let i = 0; i < 500; i++) {
        const d = capacityDelayMs(n, random);
        lo = Math.min(lo, d);
        hi = Math.max(hi, d);
        expect(d).toBeGreaterThanOrEqual(1_000);
        expect(d).toBeLessThan(ceiling);
      }
      expect(hi - lo).toBeGreaterThan(ceiling / 2);
    }
  });
});
