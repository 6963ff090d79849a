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
    // The probe kills a hung worker exactly when the endless loop ran: never for another reason.
    const hung = Number(r.stats["hung workers killed"]);
    expect(hung > 0, `seed ${c.seed}`).toBe(Number(r.stats["loop poison runs"]) > 0);
  }, 150_000);
});
