/**
 * Scenario 2 at small size: two groups of worker processes on one PostgreSQL
 * schema, a random worker SIGKILLed every 0.5–1.5 s and replaced, and every
 * fourth kill a whole group at once (chaos/scenarios/pgstorm.ts).
 */
import { describe, expect, it } from "vitest";
import { pgstorm } from "../../chaos/scenarios/pgstorm.js";
import { pgGate } from "../pg-available.js";
import { shortRun } from "./seed.js";

describe("chaos: SIGKILL storm on PostgreSQL", () => {
  if (!pgGate(it)) return;
  it("P1–P5 (spec §3.3, §3.7, §4.2, §13): two groups of workers, single and whole-group SIGKILLs: nothing lost, steps commit once, reruns only after a lost claim, fenced, reclaimed within lease + poll + slack", async () => {
    const c = shortRun();
    const r = await pgstorm(c);
    expect(
      r.violations.map((v) => `${v.promise}: ${v.detail}`),
      `seed ${c.seed}`,
    ).toEqual([]);
    expect(r.stats["group kills"], `seed ${c.seed}`).toBeGreaterThan(0);
    expect(r.stats.kills, `seed ${c.seed}`).toBeGreaterThan(r.stats["group kills"] as number);
  }, 150_000);
});
