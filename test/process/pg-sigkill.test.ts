/**
 * spec 3.3 / 3.7 / 4.2 / 5.4 on PostgreSQL: one of four worker processes is
 * SIGKILLed in the middle of a 10,000-task run. Everything still completes;
 * the tasks the dead process held are reclaimed only once their leases have
 * expired; bodies and step bodies run again only for those tasks.
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
const ROUNDS = 40;
const PER_ROUND = { noop: 150, steps: 50, chains: 10 };
const TOTAL = ROUNDS * (PER_ROUND.noop + PER_ROUND.steps + PER_ROUND.chains * 5);
const KILL_AFTER = 2_000;
/** Lease = MAX_MS + GRACE_MS: short, so the dead holder's tasks come back within the test. */
const MAX_MS = 5_000;
const GRACE_MS = 1_000;

describe("SIGKILL of one of four PostgreSQL worker processes mid-run", () => {
  if (!pgGate(it)) return;
  let sb: PgSandbox;
  let r: Ratchet;

  beforeEach(async () => {
    sb = new PgSandbox();
    r = await sb.open(MAX_MS);
  });

  afterEach(async () => {
    await sb.cleanup();
  });

  it("spec 3.3: all tasks complete; only the dead holder's tasks are reclaimed, after their leases, and only they rerun", async () => {
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
    const victim = workers[1]!;
    const survivors = workers.filter((w) => w !== victim);

    const mix = await enqueueMix(r, { rounds: ROUNDS, ...PER_ROUND });
    expect(new Set(mix.all).size).toBe(TOTAL);
    for (const w of workers) w.send("go");
    await Promise.all(workers.map((w) => w.waitFor("started")));

    const before = await waitUntil(
      `${KILL_AFTER} completions`,
      async () => {
        const n = await completedCount(r);
        return n >= KILL_AFTER && n;
      },
      30_000,
    );
    const sessions = async () =>
      Number(
        (
          await sb.sql<{ n: string }>(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1",
            [victim.appName],
          )
        )[0]!.n,
      );
    expect(await sessions()).toBeGreaterThan(0);
    victim.kill("SIGKILL");
    expect((await victim.exited).signal).toBe("SIGKILL");
    // The server may still be executing what the victim sent before it died (even a COMMIT):
    // wait until its sessions are gone, then the set of tasks it held can no longer change.
    await waitUntil("the victim's sessions to end", async () => (await sessions()) === 0);
    const held = await sb.sql<{ id: string; lease_until: string }>(
      "SELECT id, lease_until FROM {s}.ratchet_tasks WHERE status = 'running' AND locked_by = $1 ORDER BY id",
      [victim.workerId],
    );
    const heldLease = new Map(held.map((h) => [Number(h.id), Number(h.lease_until)]));
    expect(heldLease.size).toBeGreaterThan(0);
    expect(before).toBeLessThan(TOTAL);

    await waitUntil(
      `${TOTAL} completed`,
      async () => {
        for (const w of survivors)
          if (!w.alive) throw new Error(`worker ${w.pid} died; stderr:\n${w.stderr}`);
        return (await completedCount(r)) === TOTAL;
      },
      40_000,
      100,
    );
    expect(await Promise.all(survivors.map((w) => w.stop()))).toEqual(survivors.map(() => 0));
    for (const w of survivors) expect(w.stderr).toBe("");
    expect(await r.stats()).toEqual([
      { queue: "default", byStatus: { terminal: TOTAL }, byOutcome: { completed: TOTAL } },
    ]);

    // Reclaims: exactly the tasks the victim held, each once, from the victim, never before its lease ended.
    const reclaims = await sb.sql<{ task_id: string; at: string; attempt: number; detail: string }>(
      "SELECT task_id, at, attempt, detail FROM {s}.ratchet_events WHERE kind = 'reclaimed' ORDER BY task_id",
    );
    const reclaimed = new Set(reclaims.map((e) => Number(e.task_id)));
    expect([...reclaimed].sort((a, b) => a - b)).toEqual([...heldLease.keys()]);
    expect(reclaims.length).toBe(heldLease.size);
    for (const e of reclaims) {
      const id = Number(e.task_id);
      const detail = JSON.parse(e.detail) as { previousHolder: string; leaseUntil: number };
      expect(detail.previousHolder).toBe(victim.workerId);
      expect(detail.leaseUntil).toBe(heldLease.get(id));
      expect(Number(e.at)).toBeGreaterThanOrEqual(detail.leaseUntil);
      expect(e.attempt).toBe(2);
    }
    // The public API agrees for one of them.
    const sample = (await r.details(Number(reclaims[0]!.task_id))).events.filter(
      (e) => e.kind === "reclaimed",
    );
    expect(sample.length).toBe(1);
    expect(sample[0]!.at).toBeGreaterThanOrEqual(heldLease.get(Number(reclaims[0]!.task_id))!);
    // No other kind of rerun happened (no timeout, failure or release).
    expect(
      await sb.sql("SELECT kind FROM {s}.ratchet_events WHERE kind <> 'reclaimed' GROUP BY kind"),
    ).toEqual([]);
    const attempts = await sb.sql<{ id: string; attempts: number }>(
      "SELECT id, attempts FROM {s}.ratchet_tasks WHERE attempts <> 1",
    );
    expect(new Set(attempts.map((a) => Number(a.id)))).toEqual(reclaimed);

    // Task bodies: every task ran; a body ran twice only for a reclaimed task.
    const bodies = countLines(ledgers.flatMap((l) => ledgerLines(l)));
    expect([...bodies.keys()].map(Number).sort((a, b) => a - b)).toEqual([...mix.all].sort((a, b) => a - b));
    const rerun = [...bodies].filter(([, n]) => n > 1).map(([id]) => Number(id));
    for (const id of rerun) expect(reclaimed.has(id), `body of task ${id} reran`).toBe(true);
    for (const id of rerun) expect(bodies.get(String(id))).toBe(2);

    // Step bodies: every step ran; a duplicated step line belongs to a reclaimed task.
    const stepLines = countLines(stepFiles.flatMap((f) => ledgerLines(f)));
    const expected = mix.steps.flatMap((id) => PG_STEPS.map((s) => `${id}:${s}`));
    expect([...stepLines.keys()].sort()).toEqual([...expected].sort());
    const dupSteps = [...stepLines].filter(([, n]) => n > 1).map(([line]) => line);
    for (const line of dupSteps) {
      expect(reclaimed.has(Number(line.split(":")[0])), `step ${line} reran`).toBe(true);
      expect(stepLines.get(line)).toBe(2);
    }
    // Step records: exactly once each, however often the bodies ran.
    expect(
      await sb.sql("SELECT task_id FROM {s}.ratchet_steps GROUP BY task_id HAVING count(*) <> 3"),
    ).toEqual([]);

    // Chains still ran in order.
    expect(chainOrderViolations(ledgerLines(order), mix.chains.length)).toEqual([]);

    process.stderr.write(
      `[pg-sigkill] killed after ${before} completions; victim held ${heldLease.size} tasks; ` +
        `${rerun.length} bodies and ${dupSteps.length} step bodies ran twice (all reclaimed tasks)\n`,
    );
  });
});
