/**
 * Scenario 3: a step blocks its worker's event loop past the lease; another
 * worker takes over (chaos/scenarios/stall.ts).
 */
import { describe, expect, it } from "vitest";
import { stall } from "../../chaos/scenarios/stall.js";
import { shortRun } from "./seed.js";

describe("chaos: event-loop stall", () => {
  it("P4 (spec §3.7): every later write of the stalled holder is refused and its ctx.signal fired; P5: the takeover follows the lease end", async () => {
    const c = shortRun();
    const r = await stall(c);
    expect(
      r.violations.map((v) => `${v.promise}: ${v.detail}`),
      `seed ${c.seed}`,
    ).toEqual([]);
    // The engine's own step commit and settlement, and nine direct store writes, per round.
    expect(Number(r.stats["stale writes refused"]), `seed ${c.seed}`).toBeGreaterThanOrEqual(2 * 10);
  }, 120_000);
});
