/**
 * Scenario 1 at small size: workers on one SQLite file SIGKILLed every
 * 0.5–1.5 s and replaced while they run 10-step tasks (chaos/scenarios/storm.ts).
 */
import { describe, expect, it } from "vitest";
import { storm } from "../../chaos/scenarios/storm.js";
import { shortRun } from "./seed.js";

describe("chaos: SIGKILL storm on SQLite", () => {
  it("P1–P5 (spec §3.3, §3.7, §4.2): nothing lost, steps commit once, reruns only after a lost claim, fenced, reclaimed within lease + poll + slack; integrity_check ok", async () => {
    const c = shortRun();
    const r = await storm(c);
    expect(
      r.violations.map((v) => `${v.promise}: ${v.detail}`),
      `seed ${c.seed}`,
    ).toEqual([]);
    expect(r.stats.kills, `seed ${c.seed}`).toBeGreaterThan(0);
    expect(r.stats.integrity).toBe("ok");
  }, 150_000);
});
