/**
 * spec F.10 (store errors are retried) / 3.3 / 3.7 / 4.2 on PostgreSQL: the
 * server restarts (fast shutdown: every session is terminated) in the middle
 * of a run of two worker processes. The run completes, nothing is lost, no
 * worker process crashes, and a body runs more than once only for a task that
 * was reclaimed or whose attempt failed (a step commit that could not land).
 *
 * This test restarts the local cluster: every other client of the server
 * loses its connections too.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Ratchet } from "../../src/index.js";
import { PG_STEPS } from "../fixtures/pg-tasks.js";
import {
  chainOrderViolations,
  completedCount,
  countLines,
  enqueueMix,
  ensurePgRunning,
  ledgerLines,
  PgSandbox,
  pgGate,
  restartPg,
  waitUntil,
} from "./pg-harness.js";

const WORKERS = 2;
// 20 rounds of 75 no-ops + 50 three-step tasks + 5 chains of 5 = 3,000 tasks.
const ROUNDS = 20;
const PER_ROUND = { noop: 75, steps: 50, chains: 5 };
const TOTAL = ROUNDS * (PER_ROUND.noop + PER_ROUND.steps + PER_ROUND.chains * 5);
const RESTART_AFTER = 1_000;
/** Each no-op body and each step "s2" body takes this long, so the run outlasts the restart. */
const WORK_MS = 20;
const MAX_MS = 5_000;
const GRACE_MS = 1_000;

describe("PostgreSQL restart in the middle of a run", () => {
  if (!pgGate(it)) return;
  let sb: PgSandbox;
  let r: Ratchet;

  beforeEach(async () => {
    sb = new PgSandbox();
    r = await sb.open(MAX_MS);
  });

  afterEach(async () => {
    await ensurePgRunning();
    await sb.cleanup();
  });

  it("spec F.10: the run completes, nothing is lost, reruns only after a reclaim or a failed attempt, workers survive", async () => {
    const ledgers = Array.from({ length: WORKERS }, (_, i) => sb.path(`ledger-${i}.txt`));
    const stepFiles = Array.from({ length: WORKERS }, (_, i) => sb.path(`steps-${i}.txt`));
    const order = sb.path("order.txt");
    const workers = ledgers.map((ledger, i) =>
      sb.spawn({
        ledger,
        steps: stepFiles[i]!,
        order,
        concurrency: 8,
        pollMs: 50,
        maxMs: MAX_MS,
        graceMs: GRACE_MS,
      }),
    );
    await Promise.all(workers.map((w) => w.waitFor("ready")));
    const mix = await enqueueMix(r, { rounds: ROUNDS, ...PER_ROUND, workMs: WORK_MS });
    expect(new Set(mix.all).size).toBe(TOTAL);
    for (const w of workers) w.send("go");
    await Promise.all(workers.map((w) => w.waitFor("started")));

    const atRestart = await waitUntil(
      `${RESTART_AFTER} completions`,
      async () => {
        const n = await completedCount(r);
        return n >= RESTART_AFTER && n;
      },
      30_000,
    );
    const startTime = "SELECT (extract(epoch from pg_postmaster_start_time()) * 1000)::bigint AS t";
    const before = Number((await sb.sql<{ t: string }>(startTime))[0]!.t);
    restartPg();
    await ensurePgRunning();
    // The cluster restarted is the server the test uses (RATCHET_PG_URL could point elsewhere).
    expect(Number((await sb.sql<{ t: string }>(startTime))[0]!.t)).toBeGreaterThan(before);
    // The restart really was in the middle of the run.
    expect(atRestart).toBeLessThan(TOTAL);

    await waitUntil(
      `${TOTAL} completed after the restart`,
      async () => {
        for (const w of workers) if (!w.alive) throw new Error(`worker ${w.pid} died; stderr:\n${w.stderr}`);
        return (await completedCount(r)) === TOTAL;
      },
      40_000,
      100,
    );
    for (const w of workers) expect(w.alive).toBe(true);
    expect(await Promise.all(workers.map((w) => w.stop()))).toEqual(workers.map(() => 0));
    expect(await r.stats()).toEqual([
      { queue: "default", byStatus: { terminal: TOTAL }, byOutcome: { completed: TOTAL } },
    ]);

    const events = await sb.sql<{ task_id: string; kind: string }>(
      "SELECT DISTINCT task_id, kind FROM {s}.ratchet_events",
    );
    const reclaimed = new Set(events.filter((e) => e.kind === "reclaimed").map((e) => Number(e.task_id)));
    const failedAttempt = new Set(
      events.filter((e) => e.kind === "attempt_failed").map((e) => Number(e.task_id)),
    );
    // Only these two kinds of rerun may happen here (no release: nobody stopped mid-task).
    expect(
      [...new Set(events.map((e) => e.kind))].filter((k) => k !== "reclaimed" && k !== "attempt_failed"),
    ).toEqual([]);
    const explained = (id: number) => reclaimed.has(id) || failedAttempt.has(id);

    // Task bodies: each ran at least once; more than once only when explained.
    const bodies = countLines(ledgers.flatMap((l) => ledgerLines(l)));
    expect([...bodies.keys()].map(Number).sort((a, b) => a - b)).toEqual([...mix.all].sort((a, b) => a - b));
    const rerun = [...bodies].filter(([, n]) => n > 1).map(([id]) => Number(id));
    for (const id of rerun)
      expect(explained(id), `body of task ${id} reran without reclaim or failure`).toBe(true);
    // The attempts recorded agree with the reruns: a task claimed once ran its body once.
    const multi = await sb.sql<{ id: string }>("SELECT id FROM {s}.ratchet_tasks WHERE attempts > 1");
    for (const { id } of multi) expect(explained(Number(id)), `task ${id} attempts > 1`).toBe(true);

    // Step bodies: each ran at least once; a duplicate only for an explained task; records exactly once.
    const stepLines = countLines(stepFiles.flatMap((f) => ledgerLines(f)));
    const expected = mix.steps.flatMap((id) => PG_STEPS.map((s) => `${id}:${s}`));
    expect([...stepLines.keys()].sort()).toEqual([...expected].sort());
    const dupSteps = [...stepLines].filter(([, n]) => n > 1).map(([line]) => line);
    for (const line of dupSteps)
      expect(explained(Number(line.split(":")[0])), `step ${line} reran without reclaim or failure`).toBe(
        true,
      );
    expect(
      await sb.sql("SELECT task_id FROM {s}.ratchet_steps GROUP BY task_id HAVING count(*) <> 3"),
    ).toEqual([]);
    expect(chainOrderViolations(ledgerLines(order), mix.chains.length)).toEqual([]);

    const errors = workers.flatMap((w) => w.stderr.split("\n").filter((l) => l.includes("error:")));
    const kinds = countLines(errors.map((l) => l.replace(/^\[worker \d+\] /, "").slice(0, 60)));
    process.stderr.write(
      `[pg-restart] restarted after ${atRestart} of ${TOTAL} completions; ` +
        `${rerun.length} bodies ran more than once (${rerun.filter((id) => reclaimed.has(id)).length} reclaimed, ` +
        `${rerun.filter((id) => failedAttempt.has(id)).length} after a failed attempt); ` +
        `${dupSteps.length} step bodies ran more than once; ${reclaimed.size} tasks reclaimed, ` +
        `${failedAttempt.size} with a failed attempt; worker log errors: ${JSON.stringify([...kinds])}\n`,
    );
  });
});
