/**
 * Scenario 1, SIGKILL storm on SQLite: workers on one file run "chain" tasks
 * of 10 steps while a random worker is SIGKILLed every 0.5–3 s and replaced.
 * Half the tasks are enqueued before the storm, the rest during it. When every
 * acknowledged task is terminal the workers are stopped gracefully and the
 * checker judges P1–P5 and P7, and `PRAGMA integrity_check`.
 */
import {
  checkNoLostTask,
  checkRecovery,
  checkStderr,
  checkSteps,
  integrityCheck,
  type Kill,
  readAcks,
  readStepRuns,
  readStore,
  recoveryStats,
} from "../checker.js";
import { Enqueuer } from "../enqueuer.js";
import { WorkerPool } from "../pool.js";
import { Sandbox } from "../process.js";
import { pause, Rng, type ScenarioConfig, type ScenarioResult, type Violation } from "../scenario.js";

export const STEPS = 10;

interface StormSize {
  workers: number;
  concurrency: number;
  tasks: number;
  /** Each step waits a uniform [lo, hi] ms, so the run lasts long enough for its kills. */
  stepMs: [number, number];
  killEveryMs: [number, number];
  maxMs: number;
  graceMs: number;
  pollMs: number;
  deadlineMs: number;
}

const FULL: StormSize = {
  workers: 8,
  concurrency: 4,
  tasks: 2_000,
  stepMs: [400, 800],
  killEveryMs: [500, 3_000],
  maxMs: 20_000,
  graceMs: 1_000,
  pollMs: 100,
  deadlineMs: 20 * 60_000,
};

const SHORT: StormSize = {
  workers: 4,
  concurrency: 4,
  tasks: 60,
  stepMs: [30, 90],
  killEveryMs: [500, 1_500],
  maxMs: 3_000,
  graceMs: 500,
  pollMs: 50,
  deadlineMs: 120_000,
};

/** P5 slack over lease + poll interval: a free slot and a claim transaction on a loaded 2-core machine. */
export const RECOVERY_SLACK_MS = 3_000;

export async function storm(c: ScenarioConfig): Promise<ScenarioResult> {
  const t0 = Date.now();
  const size = { ...(c.full ? FULL : SHORT) };
  if (c.rounds !== undefined) size.tasks = c.rounds;
  const rng = new Rng(c.seed);
  const sb = new Sandbox();
  const pool = new WorkerPool(sb, {
    concurrency: size.concurrency,
    maxMs: size.maxMs,
    graceMs: size.graceMs,
    pollMs: size.pollMs,
  });
  const violations: Violation[] = [];
  let enq: Enqueuer | undefined;
  try {
    enq = await Enqueuer.open(sb.db, sb.acks, size.maxMs);
    const inputs = Array.from({ length: size.tasks }, () => ({
      steps: STEPS,
      ms: Array.from({ length: STEPS }, () => rng.int(size.stepMs[0], size.stepMs[1])),
    }));
    const early = Math.ceil(inputs.length / 2);
    for (const input of inputs.slice(0, early)) await enq.enqueue("chain", input);
    await pool.start(size.workers);
    c.log(`storm: ${size.workers} workers, ${size.tasks} tasks × ${STEPS} steps, dir ${sb.dir}`);

    const late = inputs.slice(early);
    const seen = new Map<string, string>();
    const deadline = t0 + size.deadlineMs;
    for (;;) {
      await pause(rng.int(size.killEveryMs[0], size.killEveryMs[1]));
      // The rest of the tasks arrive during the storm, a slice per kill.
      for (const input of late.splice(0, Math.ceil(size.tasks / 20))) await enq.enqueue("chain", input);
      await snapshotSteps(enq, rng, seen);
      const done = await enq.terminal();
      if (late.length === 0 && done >= enq.acked) break;
      if (Date.now() > deadline) {
        violations.push({
          promise: "P1",
          detail: `only ${done} of ${enq.acked} tasks terminal at the deadline`,
        });
        break;
      }
      pool.killOne(rng);
      if (pool.kills.length % 20 === 0)
        c.log(`storm: ${pool.kills.length} kills, ${done}/${enq.acked} terminal`);
    }
    const codes = await pool.stopAll();
    if (codes.some((x) => x !== 0))
      violations.push({ promise: "P7", detail: `graceful stop exit codes ${codes.join(",")}` });
    for (const f of pool.failures) violations.push({ promise: "harness", detail: f });
    violations.push(...enq.violations);
    await enq.close();
    enq = undefined;
    return {
      name: "storm",
      seed: c.seed,
      ms: Date.now() - t0,
      ...(await judge(sb, pool.kills, seen, size, pool.all, violations)),
    };
  } finally {
    await enq?.close().catch(() => {});
    await sb.cleanup(c.keep);
  }
}

/** Samples committed step results during the storm, to check later that none changed (P2). */
export async function snapshotSteps(enq: Enqueuer, rng: Rng, seen: Map<string, string>): Promise<void> {
  if (enq.acked === 0) return;
  for (let i = 0; i < 10; i++) {
    const id = rng.int(1, enq.acked);
    for (const s of await enq.r.store.steps(id)) {
      const k = `${id}/${s.name}`;
      if (!seen.has(k)) seen.set(k, JSON.stringify(s.result));
    }
  }
}

async function judge(
  sb: Sandbox,
  kills: readonly Kill[],
  seen: ReadonlyMap<string, string>,
  size: StormSize,
  procs: readonly { pid: number; stderr: string }[],
  violations: Violation[],
): Promise<Pick<ScenarioResult, "violations" | "stats">> {
  const integrity = integrityCheck(sb.db);
  if (integrity !== "ok") violations.push({ promise: "P1", detail: `integrity_check: ${integrity}` });
  const judged = judgeStorm(await readStore(sb.db), sb, kills, seen, size, procs, violations);
  return { ...judged, stats: { ...judged.stats, integrity } };
}

/**
 * P1–P5 and P7 of a storm, from the stored tasks, the ack log and the effects ledger (shared with
 * the PostgreSQL storm, which reads its store otherwise).
 */
export function judgeStorm(
  store: Parameters<typeof checkNoLostTask>[1],
  sb: Sandbox,
  kills: readonly Kill[],
  seen: ReadonlyMap<string, string>,
  size: { maxMs: number; graceMs: number; pollMs: number },
  procs: readonly { pid: number; stderr: string }[],
  violations: Violation[],
): Pick<ScenarioResult, "violations" | "stats"> {
  const acks = readAcks(sb.acks);
  violations.push(...checkNoLostTask(acks, store));
  const steps = checkSteps(store, readStepRuns(sb.effects), (t) => (t.name === "chain" ? STEPS : null), seen);
  violations.push(...steps.violations);
  const bound = size.maxMs + size.graceMs + size.pollMs + RECOVERY_SLACK_MS;
  const rec = checkRecovery(store, kills, bound);
  violations.push(...rec.violations);
  violations.push(...checkStderr(procs));
  return {
    violations,
    stats: {
      tasks: acks.length,
      kills: kills.length,
      "step bodies": steps.stats.bodyRuns,
      "steps committed": steps.stats.committedSteps,
      reruns: steps.stats.reruns,
      ...recoveryStats(rec.recoveries),
      "recovery bound ms": bound,
      "reclaims of live holders": rec.liveHolderReclaims,
    },
  };
}
