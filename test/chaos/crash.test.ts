/**
 * Scenario 6: a child looping over engine transactions is SIGKILLed at random
 * moments (chaos/scenarios/crash.ts).
 */
import { describe, expect, it } from "vitest";
import { crash } from "../../chaos/scenarios/crash.js";
import { shortRun } from "./seed.js";

describe("chaos: SQLite process-crash consistency", () => {
  it("P1, P2 (spec §10.2): every acknowledged enqueue, claim, step and settlement survives SIGKILL; integrity_check ok", async () => {
    const c = shortRun();
    const r = await crash(c);
    expect(
      r.violations.map((v) => `${v.promise}: ${v.detail}`),
      `seed ${c.seed}`,
    ).toEqual([]);
    expect(Number(r.stats["acked steps"])).toBeGreaterThan(0);
  }, 120_000);
});
