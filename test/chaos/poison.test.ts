/**
 * Scenario 7: tasks that exit their process, loop for ever, or exhaust the
 * heap, among normal tasks (chaos/scenarios/poison.ts).
 */
import { describe, expect, it } from "vitest";
import { poison } from "../../chaos/scenarios/poison.js";
import { shortRun } from "./seed.js";

describe("chaos: poison tasks", () => {
  it("P6 (spec §5.4): each poison task ends failed after maxAttempts claims; P1: every normal task completes", async () => {
    const c = shortRun();
    const r = await poison(c);
    expect(
      r.violations.map((v) => `${v.promise}: ${v.detail}`),
      `seed ${c.seed}`,
    ).toEqual([]);
    expect(r.stats["hung workers killed"]).toBeGreaterThan(0);
  }, 150_000);
});
