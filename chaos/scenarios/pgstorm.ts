/**
 * Scenario 2, SIGKILL storm on PostgreSQL: two groups of worker processes —
 * two "machines", each process with its own pool and connections — run
 * "chain" tasks of 10 steps on one fresh schema while a random worker is
 * SIGKILLed every 0.5–3 s and replaced; every `groupKillEvery`-th kill takes a
 * whole group down at once (a machine lost) and brings it back. Half the tasks
 * are enqueued before the storm, the rest during it. When every acknowledged
 * task is terminal the workers are stopped gracefully, the store is read back
 * and the checker judges P1–P5 and P7. The schema is dropped on every path.
 */
import type { Kill } from "../checker.js";
import { Enqueuer } from "../enqueuer.js";
import { CHAOS_PG_URL, dropChaosSchema, newChaosSchema, readPgStore, withAppName } from "../pgstore.js";
import { WorkerPool } from "../pool.js";
import { Sandbox } from "../process.js";
import { pause, Rng, type ScenarioConfig, type ScenarioResult, type Violation } from "../scenario.js";
import { judgeStorm, snapshotSteps } from "./storm.js";

export const STEPS = 10;

interface PgStormSize {
  /** Workers per group; there are two groups. */
  perGroup: number;
  concurrency: number;
  /** Pool size of each worker process. */
  pool: number;
  tasks: number;
  /** Each step waits a uniform [lo, hi] ms, so the run lasts long enough for its kills. */
  stepMs: [number, number];
  killEveryMs: [number, number];
  /** Every n-th kill takes a whole group down (alternating groups). */
  groupKillEvery: number;
  maxMs: number;
  graceMs: number;
  pollMs: number;
  deadlineMs: number;
}

const FULL: PgStormSize = {
  perGroup: 3,
  concurrency: 4,
  pool: 3,
  tasks: 2_000,
  stepMs: [400, 800],
  killEveryMs: [500, 3_000],
  groupKillEvery: 50,
  maxMs: 20_000,
  graceMs: 1_000,
  pollMs: 100,
  deadlineMs: 25 * 60_000,
};

const SHORT: PgStormSize = {
  perGroup: 2,
  concurrency: 4,
  pool: 3,
  tasks: 60,
  stepMs: [30, 90],
  killEveryMs: [500, 1_500],
  groupKillEvery: 4,
  maxMs: 3_000,
  graceMs: 500,
  pollMs: 50,
  deadlineMs: 120_000,
};

export async function pgstorm(c: ScenarioConfig): Promise<ScenarioResult> {
  const t0 = Date.now();
  const size = { ...(c.full ? FULL : SHORT) };
  if (c.rounds !== undefined) size.tasks = c.rounds;
  const rng = new Rng(c.seed);
  const sb = new Sandbox();
  const schema = newChaosSchema();
  const groups = [0, 1].map(
    (g) =>
      new WorkerPool(sb, {
        concurrency: size.concurrency,
        maxMs: size.maxMs,
        graceMs: size.graceMs,
        pollMs: size.pollMs,
        pg: { url: withAppName(CHAOS_PG_URL, `${schema}-g${g}`), schema, pool: size.pool },
      }),
  );
  const violations: Violation[] = [];
  let enq: Enqueuer | undefined;
  try {
    enq = await Enqueuer.openPg(CHAOS_PG_URL, schema, sb.acks, size.maxMs);
    const inputs = Array.from({ length: size.tasks }, () => ({
      steps: STEPS,
      ms: Array.from({ length: STEPS }, () => rng.int(size.stepMs[0], size.stepMs[1])),
    }));
    const early = Math.ceil(inputs.length / 2);
    for (const input of inputs.slice(0, early)) await enq.enqueue("chain", input);
    await Promise.all(groups.map((g) => g.start(size.perGroup)));
    c.log(
      `pgstorm: 2 groups × ${size.perGroup} workers, ${size.tasks} tasks × ${STEPS} steps, schema ${schema}, dir ${sb.dir}`,
    );

    const late = inputs.slice(early);
    const seen = new Map<string, string>();
    const deadline = t0 + size.deadlineMs;
    let events = 0;
    let groupKills = 0;
    const kills = () => groups.reduce((n, g) => n + g.kills.length, 0);
    for (;;) {
      await pause(rng.int(size.killEveryMs[0], size.killEveryMs[1]));
      // The rest of the tasks arrive during the storm, a slice per kill.
      for (const input of late.splice(0, Math.ceil(size.tasks / 20))) await enq.enqueue("chain", input);
      await snapshotSteps(enq, rng, seen);
      const done = (await enq.terminalOrNull()) ?? 0;
      if (late.length === 0 && done >= enq.acked) break;
      if (Date.now() > deadline) {
        violations.push({
          promise: "P1",
          detail: `only ${done} of ${enq.acked} tasks terminal at the deadline`,
        });
        break;
      }
      events++;
      if (events % size.groupKillEvery === 0) {
        // A machine goes down: every process of one group at once, then it comes back.
        const g = groups[groupKills++ % 2]!;
        const victims = g.killAll();
        c.log(
          `pgstorm: group ${groups.indexOf(g)} down (${victims.length} workers), ${done}/${enq.acked} terminal`,
        );
      } else {
        const live = groups.filter((g) => g.running.length > 0);
        if (live.length > 0) rng.pick(live).killOne(rng);
      }
      if (events % 20 === 0) c.log(`pgstorm: ${kills()} kills, ${done}/${enq.acked} terminal`);
    }
    const codes = (await Promise.all(groups.map((g) => g.stopAll()))).flat();
    if (codes.some((x) => x !== 0))
      violations.push({ promise: "P7", detail: `graceful stop exit codes ${codes.join(",")}` });
    for (const g of groups) for (const f of g.failures) violations.push({ promise: "harness", detail: f });
    violations.push(...enq.violations);
    await enq.close();
    enq = undefined;

    const allKills = groups.flatMap((g) => g.kills);
    const procs = groups.flatMap((g) => g.all);
    const judged = await judge(sb, schema, allKills, seen, size, procs, violations);
    return {
      name: "pgstorm",
      seed: c.seed,
      ms: Date.now() - t0,
      violations: judged.violations,
      stats: { ...judged.stats, "group kills": groupKills },
    };
  } finally {
    await enq?.close().catch(() => {});
    await sb.cleanup(c.keep);
    await dropChaosSchema(CHAOS_PG_URL, schema);
  }
}

async function judge(
  sb: Sandbox,
  schema: string,
  kills: readonly Kill[],
  seen: ReadonlyMap<string, string>,
  size: PgStormSize,
  procs: readonly { pid: number; stderr: string }[],
  violations: Violation[],
): Promise<Pick<ScenarioResult, "violations" | "stats">> {
  return judgeStorm(await readPgStore(CHAOS_PG_URL, schema), sb, kills, seen, size, procs, violations);
}
