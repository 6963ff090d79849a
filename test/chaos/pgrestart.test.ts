/**
 * Scenario 4 at small size: worker processes drain 10-step tasks while the
 * harness terminates their PostgreSQL connections, restarts the server, and
 * holds it down past their leases (chaos/scenarios/pgrestart.ts).
 *
 * This test restarts the local cluster: every other client of the server
 * loses its connections too.
 */
import { describe, expect, it } from "vitest";
import { pgrestart } from "../../chaos/scenarios/pgrestart.js";
import { pgGate } from "../pg-available.js";
import { shortRun } from "./seed.js";

describe("chaos: PostgreSQL restart and killed connections", () => {
  if (!pgGate(it)) return;
  it("P1, P2, P4 (spec §3.3, §3.7, §4.2, F.10): nothing lost, steps commit once, fenced; workers survive every disruption and claim again within the reconnect bound", async () => {
    const c = shortRun();
    const r = await pgrestart(c);
    expect(
      r.violations.map((v) => `${v.promise}: ${v.detail}`),
      `seed ${c.seed}`,
    ).toEqual([]);
    expect(r.stats["server restarts"], `seed ${c.seed}`).toBe(2);
    expect(r.stats["sessions terminated"], `seed ${c.seed}`).toBeGreaterThan(0);
  }, 150_000);
});
