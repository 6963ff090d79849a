/**
 * Scenario 5: a store wrapper commits and then throws, or throws before
 * committing, for 1 % of the writes each (chaos/scenarios/ambiguous.ts): on
 * one SQLite file, and on one fresh PostgreSQL schema with the same checks.
 */
import { describe, expect, it } from "vitest";
import type { Scenario } from "../../chaos/scenario.js";
import { ambiguous, pgambiguous } from "../../chaos/scenarios/ambiguous.js";
import { pgGate } from "../pg-available.js";
import { shortRun } from "./seed.js";

async function expectHolds(scenario: Scenario): Promise<void> {
  const c = shortRun();
  const r = await scenario(c);
  expect(
    r.violations.map((v) => `${v.promise}: ${v.detail}`),
    `seed ${c.seed}`,
  ).toEqual([]);
  expect(Number(r.stats["faults after commit"]), `seed ${c.seed}`).toBeGreaterThan(0);
  expect(Number(r.stats["faults before commit"]), `seed ${c.seed}`).toBeGreaterThan(0);
}

describe("chaos: ambiguous commits", () => {
  it("P1 (spec §2.3), P2–P4, P7: with writes that land and then throw or throw before landing, nothing is lost, a retried enqueue with the same dedupe key yields one task, steps commit once", async () => {
    await expectHolds(ambiguous);
  }, 150_000);
});

describe("chaos: ambiguous commits on PostgreSQL", () => {
  if (!pgGate(it)) return;
  it("P1 (spec §2.3, §13), P2–P4, P7: the same faults on one PostgreSQL schema, the same checks: nothing is lost, one task per dedupe key, steps commit once", async () => {
    await expectHolds(pgambiguous);
  }, 150_000);
});
