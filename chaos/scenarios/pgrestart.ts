/**
 * Scenario 4, PostgreSQL restart and killed connections: worker processes
 * drain "chain" tasks of 10 steps on one fresh schema while the harness, every
 * 0.8–2 s, disrupts the database: mostly `pg_terminate_backend` of every
 * connection of the workers (pool clients and LISTEN connection, mid-query or
 * idle); every `restartEvery`-th time it takes the server down instead,
 * alternately `pg_ctlcluster … restart` (fast shutdown, ~2.5 s down) and an
 * outage held past the workers' lease (stop, wait, start), so leases lapse
 * while holders are cut off and other workers take their tasks over once the
 * server is back. Enqueues go on during every outage (a refused one is a typed
 * error and never acknowledged).
 *
 * After each disruption every worker must still be alive and claim again
 * within `reconnectBound` of the database being back (the backlog is topped
 * up to six times the slots just before, so there is always work to claim).
 * At the end the workers stop gracefully (exit 0) and the checker judges P1
 * (every acknowledged task completed), P2–P4 (steps commit once and never
 * change; reruns only in claims that ended before the commit; records and
 * results from the claim that ran them; no reclaim before a lease ended) and
 * that no worker printed an unhandled rejection or uncaught exception. The
 * engine's logged store errors ("claim failed; retrying") are expected here
 * and counted; each must carry a Ratchet error (StoreError), never a raw
 * driver error (P7).
 *
 * This scenario restarts the local cluster: every other client of the server
 * loses its connections too. The server is running again on every path.
 */
import * as errors from "../../src/errors.js";
import { checkNoLostTask, checkRecovery, checkSteps, readAcks, readStepRuns } from "../checker.js";
import { Enqueuer } from "../enqueuer.js";
import {
  CHAOS_PG_URL,
  dropChaosSchema,
  ensurePgRunning,
  newChaosSchema,
  pgCtl,
  pgStartedAt,
  readPgStore,
  terminateSessions,
  withAppName,
} from "../pgstore.js";
import { WorkerPool } from "../pool.js";
import { type ChaosProcess, fileLines, Sandbox, waitUntil } from "../process.js";
import {
  pause,
  percentile,
  Rng,
  type ScenarioConfig,
  type ScenarioResult,
  type Violation,
} from "../scenario.js";

export const STEPS = 10;

interface PgRestartSize {
  workers: number;
  concurrency: number;
  pool: number;
  /**
   * How many disruptions; every `restartEvery`-th one takes the server down (alternately a
   * restart and an outage held past the lease), the others terminate the workers' connections.
   */
  disruptions: number;
  restartEvery: number;
  /** Each step waits a uniform [lo, hi] ms. */
  stepMs: [number, number];
  /** Pause before each disruption, so it lands on work in flight. */
  gapMs: [number, number];
  maxMs: number;
  graceMs: number;
  pollMs: number;
  deadlineMs: number;
}

const FULL: PgRestartSize = {
  workers: 3,
  concurrency: 4,
  pool: 3,
  disruptions: 16,
  restartEvery: 4,
  stepMs: [40, 120],
  gapMs: [800, 2_000],
  maxMs: 4_000,
  graceMs: 1_000,
  pollMs: 50,
  deadlineMs: 10 * 60_000,
};

const SHORT: PgRestartSize = { ...FULL, disruptions: 4, restartEvery: 2, deadlineMs: 120_000 };

/**
 * How soon after the database is back every worker must claim again: the
 * engine's store-retry backoff ceiling (5 s, src/engine/store-retry.ts: a slot
 * whose step commit is sleeping in it frees no sooner) + the rest of a task
 * holding every slot (10 steps at the longest step) + the poll interval + 3 s
 * slack for a loaded 2-core machine.
 */
export function reconnectBound(s: PgRestartSize): number {
  return 5_000 + STEPS * s.stepMs[1] + s.pollMs + 3_000;
}

type Disruption = "terminate" | "restart" | "outage";

/** An outage holds the server down this long past the workers' lease, so leases lapse while it is down. */
const OUTAGE_PAST_LEASE_MS = 1_000;

/**
 * Takes the server down — `restart`: pg_ctlcluster restart; `outage`: stop,
 * hold it down for `outageMs`, start — while `enqueue` runs every 100 ms
 * (refused enqueues are typed errors and never acknowledged). Resolves when
 * it accepts connections again, with the downtime and whether the server the
 * workers use really restarted.
 */
async function serverDown(
  kind: "restart" | "outage",
  outageMs: number,
  enqueue: () => Promise<unknown>,
): Promise<{ backAt: number; ms: number; restarted: boolean }> {
  const before = await pgStartedAt(CHAOS_PG_URL);
  let down = true;
  const enqueuing = (async () => {
    while (down) {
      await enqueue();
      await pause(100);
    }
  })();
  const downAt = Date.now();
  try {
    if (kind === "restart") await pgCtl("restart");
    else {
      await pgCtl("stop");
      await pause(outageMs);
      await pgCtl("start");
    }
    await ensurePgRunning(CHAOS_PG_URL);
  } finally {
    down = false;
    await enqueuing;
  }
  const backAt = Date.now();
  return { backAt, ms: backAt - downAt, restarted: (await pgStartedAt(CHAOS_PG_URL)) > before };
}

/** What a process prints when it dies of (or reports) an unhandled rejection or uncaught exception. */
const CRASH_RE = /unhandled|uncaught|triggerUncaughtException|^Node\.js v\d/im;

export async function pgrestart(c: ScenarioConfig): Promise<ScenarioResult> {
  const t0 = Date.now();
  const size = { ...(c.full ? FULL : SHORT) };
  if (c.rounds !== undefined) size.disruptions = c.rounds;
  const rng = new Rng(c.seed);
  const sb = new Sandbox();
  const schema = newChaosSchema();
  const appName = `${schema}-w`;
  const pool = new WorkerPool(sb, {
    concurrency: size.concurrency,
    maxMs: size.maxMs,
    graceMs: size.graceMs,
    pollMs: size.pollMs,
    logWrites: true,
    reportClaims: true,
    pg: { url: withAppName(CHAOS_PG_URL, appName), schema, pool: size.pool },
  });
  const violations: Violation[] = [];
  const bound = reconnectBound(size);
  const reconnects: { kind: string; ms: number }[] = [];
  const downtimes: number[] = [];
  let terminated = 0;
  let restarts = 0;
  let enq: Enqueuer | undefined;
  try {
    enq = await Enqueuer.openPg(CHAOS_PG_URL, schema, sb.acks, size.maxMs);
    const e = enq;
    const input = () => ({
      steps: STEPS,
      ms: Array.from({ length: STEPS }, () => rng.int(size.stepMs[0], size.stepMs[1])),
    });
    const backlog = 6 * size.workers * size.concurrency;
    const topUp = async () => {
      const done = (await e.terminalOrNull()) ?? 0;
      for (let i = e.acked - done; i < backlog; i++) await e.enqueue("chain", input());
    };
    await topUp();
    await pool.start(size.workers);
    const workers = pool.running;
    c.log(
      `pgrestart: ${size.workers} workers, ${size.disruptions} disruptions, schema ${schema}, dir ${sb.dir}`,
    );

    for (let d = 1; d <= size.disruptions; d++) {
      await pause(rng.int(size.gapMs[0], size.gapMs[1]));
      // Work in flight when the disruption lands, and a backlog to claim once the database is back.
      await topUp();
      await pause(rng.int(100, 400));
      const kind: Disruption =
        d % size.restartEvery !== 0 ? "terminate" : (d / size.restartEvery) % 2 === 1 ? "restart" : "outage";
      let backAt: number;
      if (kind === "terminate") {
        const n = await terminateSessions(CHAOS_PG_URL, appName);
        backAt = Date.now();
        terminated += n;
        if (n === 0)
          violations.push({ promise: "harness", detail: `disruption ${d}: no worker session found` });
      } else {
        const down = await serverDown(kind, size.maxMs + size.graceMs + OUTAGE_PAST_LEASE_MS, () =>
          e.enqueue("chain", input()),
        );
        backAt = down.backAt;
        downtimes.push(down.ms);
        restarts++;
        if (!down.restarted)
          violations.push({ promise: "harness", detail: `${kind} ${d} did not restart the workers' server` });
      }
      for (const w of workers) reconnects.push({ kind, ms: await claimedAgain(w, backAt, bound + 15_000) });
      const dead = workers.filter((w) => !w.alive);
      if (dead.length > 0) {
        for (const w of dead)
          violations.push({
            promise: "P7",
            detail: `worker ${w.pid} died after ${kind} ${d}: ${w.stderr.slice(-600)}`,
          });
        break;
      }
      const last = reconnects.slice(-workers.length).map((r) => r.ms);
      c.log(`pgrestart: ${kind} ${d}/${size.disruptions}: workers claimed again after ${last.join(", ")} ms`);
    }
    for (const r of reconnects) {
      if (r.ms < 0 || r.ms > bound)
        violations.push({
          promise: "P5",
          detail: `a worker claimed again ${r.ms < 0 ? "never" : `only ${r.ms} ms`} after a ${r.kind} (bound ${bound})`,
        });
    }

    // Drain: every acknowledged task completes.
    const deadline = t0 + size.deadlineMs;
    await waitUntil(
      "every acknowledged task terminal",
      async () => (await e.terminalOrNull()) === e.acked || Date.now() > deadline,
      size.deadlineMs,
      200,
    );
    const codes = await pool.stopAll();
    if (codes.some((x) => x !== 0))
      violations.push({ promise: "P7", detail: `graceful stop exit codes ${codes.join(",")}` });
    for (const f of pool.failures) violations.push({ promise: "harness", detail: f });
    for (const w of pool.all)
      if (CRASH_RE.test(w.stderr))
        violations.push({
          promise: "P7",
          detail: `worker ${w.pid} printed a crash: ${w.stderr.slice(0, 800)}`,
        });
    violations.push(...rawLoggedErrors(pool.all));
    violations.push(...enq.violations);
    const refused = enq.refused;
    await enq.close();
    enq = undefined;

    const judged = await judge(sb, schema, violations);
    const ms = (k: string) => reconnects.filter((r) => r.kind === k).map((r) => r.ms);
    return {
      name: "pgrestart",
      seed: c.seed,
      ms: Date.now() - t0,
      violations: judged.violations,
      stats: {
        ...judged.stats,
        "server restarts": restarts,
        "terminate rounds": size.disruptions - restarts,
        "sessions terminated": terminated,
        "server downtime max ms": downtimes.length ? Math.max(...downtimes) : 0,
        "claimed again after terminate p50/max ms": `${percentile(ms("terminate"), 50)}/${Math.max(0, ...ms("terminate"))}`,
        "claimed again after restart p50/max ms": `${percentile(ms("restart"), 50)}/${Math.max(0, ...ms("restart"))}`,
        "claimed again after outage p50/max ms": `${percentile(ms("outage"), 50)}/${Math.max(0, ...ms("outage"))}`,
        "reconnect bound ms": bound,
        "enqueues refused": refused,
        "logged errors": countLogged(pool.all),
      },
    };
  } finally {
    await enq?.close().catch(() => {});
    await sb.cleanup(c.keep);
    // Also starts the server if a restart failed half-way.
    await dropChaosSchema(CHAOS_PG_URL, schema);
  }
}

/** Ms from `since` to the worker's first claim that took tasks at or after it; -1 if none within timeoutMs. */
async function claimedAgain(w: ChaosProcess, since: number, timeoutMs: number): Promise<number> {
  const first = () => w.messages.find((m) => m.type === "claim" && (m.at as number) >= since);
  try {
    const m = await waitUntil(`worker ${w.pid} to claim`, () => first() ?? (!w.alive && null), timeoutMs, 20);
    return m === null ? -1 : (m.at as number) - since;
  } catch {
    return -1;
  }
}

/** Names of the Ratchet error classes: a logged error must be one of them, never a raw driver error. */
const RATCHET_ERROR_NAMES = Object.entries(errors)
  .filter(
    ([, v]) =>
      v === errors.RatchetError || (v as { prototype?: unknown }).prototype instanceof errors.RatchetError,
  )
  .map(([k]) => `${k}: `);

/** P7: lines the workers' logger wrote ("error: MESSAGE META") whose error is not a RatchetError. */
export function rawLoggedErrors(procs: readonly ChaosProcess[]): Violation[] {
  const out: Violation[] = [];
  for (const p of procs)
    for (const l of p.stderr.split("\n"))
      if (/ (error|warning): /.test(l) && !RATCHET_ERROR_NAMES.some((n) => l.includes(n)))
        out.push({ promise: "P7", detail: `worker ${p.pid} logged a raw error: ${l.slice(0, 300)}` });
  return out;
}

/** The engine's logged errors, by message (the workers' logger writes "error: MESSAGE META"). */
function countLogged(procs: readonly ChaosProcess[]): string {
  const kinds = new Map<string, number>();
  for (const p of procs)
    for (const l of p.stderr.split("\n")) {
      const m = / (error|warning): (.*)$/.exec(l);
      if (!m) continue;
      const k = `${m[1]}: ${m[2]!.slice(0, 70)}`;
      kinds.set(k, (kinds.get(k) ?? 0) + 1);
    }
  return [...kinds].map(([k, n]) => `${n}× ${k}`).join("; ") || "none";
}

async function judge(
  sb: Sandbox,
  schema: string,
  violations: Violation[],
): Promise<Pick<ScenarioResult, "violations" | "stats">> {
  const acks = readAcks(sb.acks);
  const store = await readPgStore(CHAOS_PG_URL, schema);
  violations.push(...checkNoLostTask(acks, store));
  const steps = checkSteps(store, readStepRuns(sb.effects), (t) => (t.name === "chain" ? STEPS : null));
  violations.push(...steps.violations);
  // No worker was killed: every reclaim here is of a live holder whose lease lapsed during an
  // outage; checkRecovery still judges that none happened before the lease ended (P4).
  const rec = checkRecovery(store, [], Number.POSITIVE_INFINITY);
  violations.push(...rec.violations);
  const writes = fileLines(sb.effects).filter((l) => l.startsWith("write "));
  const refusedWrites = writes.filter((l) => / lease_lost$| RATCHET_LEASE_LOST$/.test(l)).length;
  return {
    violations,
    stats: {
      tasks: acks.length,
      "step bodies": steps.stats.bodyRuns,
      "steps committed": steps.stats.committedSteps,
      reruns: steps.stats.reruns,
      "reclaims after a lapsed lease": rec.liveHolderReclaims,
      "fenced writes": writes.length,
      "fenced writes refused": refusedWrites,
    },
  };
}
