/**
 * Scenario 5: a store wrapper commits and then throws, or throws before
 * committing, for 1 % of the writes each (chaos/scenarios/ambiguous.ts).
 */
import { describe, expect, it } from "vitest";
import { ambiguous } from "../../chaos/scenarios/ambiguous.js";
import { shortRun } from "./seed.js";

describe("chaos: ambiguous commits", () => {
  it("P1 (spec §2.3), P2–P4, P7: with writes that land and then throw or throw before landing, nothing is lost, a retried enqueue with the same dedupe key yields one task, steps commit once", async () => {
    const c = shortRun();
    const r = await ambiguous(c);
    expect(
      r.violations.map((v) => `${v.promise}: ${v.detail}`),
      `seed ${c.seed}`,
    ).toEqual([]);
    expect(Number(r.stats["faults after commit"]), `seed ${c.seed}`).toBeGreaterThan(0);
    expect(Number(r.stats["faults before commit"]), `seed ${c.seed}`).toBeGreaterThan(0);
  }, 150_000);
});
