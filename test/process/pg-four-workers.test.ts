/**
 * spec 8.5 / 3.2 / 4.2 / 6.2 on PostgreSQL: four worker processes share one
 * schema and drain 10,000 tasks (no-ops, three-step tasks, and enqueueJob
 * chains of 5 linked by needs). With no crash, the claim alone gives
 * exclusivity: every task body and every step body runs exactly once, and
 * chain links run in order.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Ratchet } from "../../src/index.js";
import { PG_STEPS } from "../fixtures/pg-tasks.js";
import {
  chainOrderViolations,
  completedCount,
  countLines,
  enqueueMix,
  ledgerLines,
  PgSandbox,
  pgGate,
  waitUntil,
} from "./pg-harness.js";

const WORKERS = 4;
// 40 rounds of 150 no-ops + 50 three-step tasks + 10 chains of 5 = 10,000 tasks.
const ROUNDS = 40;
const PER_ROUND = { noop: 150, steps: 50, chains: 10 };
const TOTAL = ROUNDS * (PER_ROUND.noop + PER_ROUND.steps + PER_ROUND.chains * 5);

describe("four worker processes on one PostgreSQL schema", () => {
  if (!pgGate(it)) return;
  let sb: PgSandbox;
  let r: Ratchet;

  beforeEach(async () => {
    sb = new PgSandbox();
    r = await sb.open();
  });

  afterEach(async () => {
    await sb.cleanup();
  });

  it("spec 8.5: drain 10,000 tasks; every task body and every step body runs exactly once", async () => {
    const ledgers = Array.from({ length: WORKERS }, (_, i) => sb.path(`ledger-${i}.txt`));
    const stepFiles = Array.from({ length: WORKERS }, (_, i) => sb.path(`steps-${i}.txt`));
    const order = sb.path("order.txt");
    const workers = ledgers.map((ledger, i) =>
      sb.spawn({ ledger, steps: stepFiles[i]!, order, concurrency: 8, pollMs: 50 }),
    );
    await Promise.all(workers.map((w) => w.waitFor("ready")));

    const mix = await enqueueMix(r, { rounds: ROUNDS, ...PER_ROUND });
    expect(new Set(mix.all).size).toBe(TOTAL);

    for (const w of workers) w.send("go");
    await Promise.all(workers.map((w) => w.waitFor("started")));
    await waitUntil(
      `${TOTAL} completed`,
      async () => {
        for (const w of workers) if (!w.alive) throw new Error(`worker ${w.pid} died; stderr:\n${w.stderr}`);
        return (await completedCount(r)) === TOTAL;
      },
      45_000,
      100,
    );

    // Graceful stop: every process exits 0 and logged no error.
    expect(await Promise.all(workers.map((w) => w.stop()))).toEqual(workers.map(() => 0));
    for (const w of workers) expect(w.stderr).toBe("");

    // Store: all completed, each after a single claim, no reclaim, retry or release.
    expect(await r.stats()).toEqual([
      { queue: "default", byStatus: { terminal: TOTAL }, byOutcome: { completed: TOTAL } },
    ]);
    const attempts = await sb.sql<{ attempts: number; n: string }>(
      "SELECT attempts, count(*) AS n FROM {s}.ratchet_tasks GROUP BY attempts",
    );
    expect(attempts.map((a) => [a.attempts, Number(a.n)])).toEqual([[1, TOTAL]]);
    expect(await sb.sql("SELECT kind, count(*) FROM {s}.ratchet_events GROUP BY kind")).toEqual([]);

    // Task bodies: each id in exactly one ledger line, and every process did work.
    const perProcess = ledgers.map((l) => ledgerLines(l));
    for (const lines of perProcess) expect(lines.length).toBeGreaterThan(0);
    const bodies = countLines(perProcess.flat());
    expect(bodies.size).toBe(TOTAL);
    expect([...bodies.values()].every((n) => n === 1)).toBe(true);
    expect([...bodies.keys()].map(Number).sort((a, b) => a - b)).toEqual([...mix.all].sort((a, b) => a - b));

    // Step bodies: each `id:step` exactly once; each step record written exactly once.
    const stepLines = countLines(stepFiles.flatMap((f) => ledgerLines(f)));
    const expected = mix.steps.flatMap((id) => PG_STEPS.map((s) => `${id}:${s}`));
    expect(stepLines.size).toBe(expected.length);
    for (const line of expected) expect(stepLines.get(line), line).toBe(1);
    const records = await sb.sql<{ n: string }>(
      "SELECT count(*) AS n FROM {s}.ratchet_steps GROUP BY task_id HAVING count(*) <> 3",
    );
    expect(records).toEqual([]);
    const stepTasks = await sb.sql<{ n: string }>(
      "SELECT count(DISTINCT task_id) AS n FROM {s}.ratchet_steps",
    );
    expect(Number(stepTasks[0]!.n)).toBe(mix.steps.length);

    // Chains: every link ran once, after its predecessor.
    const orderLines = ledgerLines(order);
    expect(orderLines.length).toBe(mix.chains.length * 5);
    expect(chainOrderViolations(orderLines, mix.chains.length)).toEqual([]);
  });
});
