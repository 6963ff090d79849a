/**
 * Scenario 9: SIGTERM to a worker under load (chaos/scenarios/shutdown.ts).
 */
import { describe, expect, it } from "vitest";
import { shutdown } from "../../chaos/scenarios/shutdown.js";
import { shortRun } from "./seed.js";

describe("chaos: graceful shutdown", () => {
  it("spec §8.2, P1: SIGTERM exits 0, in-flight work finishes or is released without using an attempt, and nothing waits for a lease", async () => {
    const c = shortRun();
    const r = await shutdown(c);
    expect(
      r.violations.map((v) => `${v.promise}: ${v.detail}`),
      `seed ${c.seed}`,
    ).toEqual([]);
  }, 120_000);
});
