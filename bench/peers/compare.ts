/**
 * Side-by-side driver (issue 6): Ratchet and its peers through one interface (adapter.ts), on the
 * same machine, in one run. See docs/benchmarks-peers.md.
 *
 *   cd bench && npm install                                   # the peers, into bench/node_modules
 *   cd bench && node --import tsx peers/compare.ts --quick    # 2,000-job smoke run
 *   cd bench && node --import tsx peers/compare.ts            # 20,000 jobs, 3 runs
 *
 * Workloads (no-op handlers; the payload carries a sequence number and the enqueue time):
 *   W1 enqueue N: one at a time (awaited), and in batches of 1,000 (100 with --quick).
 *   W2 drain N queued (enqueued untimed in batches): the clock runs from starting the worker (in
 *      this process) until every job has run and the engine reports none remaining; concurrency
 *      1 and 16. Every drain checks that each sequence number ran exactly once and nothing is left.
 *   W3 latency: an idle worker (concurrency 16, in this process); single enqueues at 200/s for 10 s
 *      (--quick: 2 s), fired on schedule without waiting for the previous one; each job records
 *      Date.now() − payload.enqueuedAt; p50/p95/p99 in ms.
 *   W4 durable steps: T tasks (workflows) × 10 checkpointed steps, 16 in flight; steps/s; each
 *      step body must run exactly once.
 *   W5 depth: 2,000 due jobs drained at concurrency 16 while 200,000 (--quick: 20,000) wait for a
 *      time an hour ahead (each engine's delay / run-at option), against the same 2,000 with nothing
 *      waiting; the ratio is taken within each run. The future jobs must not run.
 *   W6 memory: peak RSS of this process (it runs the worker) during W2 c16 and W5, sampled every
 *      50 ms by a timer and, at most every 50 ms, from the job handler (plainjob's loop starves timers).
 * Each figure runs --runs times (default 3) on a fresh database/schema/file/keyspace; the tables
 * show medians, and the JSON (bench/peers/results/) every sample. Runs are interleaved (run 1 of
 * every engine, then run 2, ...) so that drift on a noisy machine hits every engine alike.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { fmt, fmtInt, median, percentile, progress } from "../stats.js";
import {
  type Adapter,
  loadPeer,
  type Payload,
  pgClient,
  type StepsAdapter,
  type Targets,
} from "./adapter.js";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    runs: { type: "string" },
    only: { type: "string" },
    skip: { type: "string" },
    figures: { type: "string" },
    "pg-url": { type: "string" },
    "redis-url": { type: "string" },
    dir: { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (args.help) {
  process.stdout.write(
    "usage: node --import tsx peers/compare.ts [--quick] [--runs N] [--only a,b] [--skip a,b]\n" +
      "         [--pg-url URL] [--redis-url URL] [--dir PATH]\n" +
      "  engines: ratchet-sqlite, plainjob, ratchet-pg, graphile-worker, pg-boss, bullmq, dbos\n" +
      "  --quick      2,000 jobs (batches of 100), 100 × 10 steps; a smoke run\n" +
      "  --runs N     measurements per figure (default 3)\n" +
      "  --only/--skip  engines to run / leave out\n" +
      "  --figures    w1-single,w1-batch,w2-c1,w2-c16,w3,w4-steps,w5,w6 (a prefix selects a group: w1, w2;\n" +
      "               case-insensitive; w6 runs w2-c16 and w5, whose RSS it reports)\n" +
      "  --pg-url     default: env RATCHET_PG_URL, else postgres://postgres@127.0.0.1:5432/test\n" +
      "  --redis-url  default: env REDIS_URL, else redis://127.0.0.1:6379\n" +
      "  --dir        where the temporary SQLite files go (default: the OS temp dir)\n" +
      "  env BENCH_PGBOSS_BATCH  pg-boss batchSize (default 500)\n",
  );
  process.exit(0);
}

const QUICK = args.quick;
const RUNS = args.runs === undefined ? 3 : Number(args.runs);
if (!Number.isInteger(RUNS) || RUNS < 1) {
  process.stderr.write("--runs must be a positive integer\n");
  process.exit(2);
}
const targets: Targets = {
  pgUrl: args["pg-url"] ?? process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
  redisUrl: args["redis-url"] ?? process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
  tmpDir: resolve(args.dir ?? tmpdir()),
};
const SIZE = {
  jobs: QUICK ? 2_000 : 20_000,
  w3Rate: 200,
  w3Seconds: QUICK ? 2 : 10,
  w5Due: 2_000,
  w5Waiting: QUICK ? 20_000 : 200_000,
  w5DelayMs: 3_600_000,
  concurrency: 16,
  batch: QUICK ? 100 : 1_000,
  stepTasks: QUICK ? 100 : 1_000,
  steps: 10,
  inFlight: 16,
};
const FIGURE_TIMEOUT_MS = 300_000;

// ------------------------------------------------------------------ engines

interface Entry<A> {
  key: string;
  make: () => Promise<A> | A;
  needs: "sqlite" | "postgres" | "redis";
}

const queueEngines: Entry<Adapter>[] = [
  {
    key: "ratchet-sqlite",
    needs: "sqlite",
    make: async () => (await import("./ratchet.js")).ratchet("sqlite", targets),
  },
  { key: "plainjob", needs: "sqlite", make: async () => (await import("./plainjob.js")).plainjob(targets) },
  {
    key: "ratchet-pg",
    needs: "postgres",
    make: async () => (await import("./ratchet.js")).ratchet("postgres", targets),
  },
  {
    key: "graphile-worker",
    needs: "postgres",
    make: async () => (await import("./graphile-worker.js")).graphileWorker(targets),
  },
  { key: "pg-boss", needs: "postgres", make: async () => (await import("./pg-boss.js")).pgBoss(targets) },
  { key: "bullmq", needs: "redis", make: async () => (await import("./bullmq.js")).bullmq(targets) },
];
const stepsEngines: Entry<StepsAdapter>[] = [
  {
    key: "ratchet-sqlite",
    needs: "sqlite",
    make: async () => (await import("./ratchet.js")).ratchetSteps("sqlite", targets),
  },
  {
    key: "ratchet-pg",
    needs: "postgres",
    make: async () => (await import("./ratchet.js")).ratchetSteps("postgres", targets),
  },
  { key: "dbos", needs: "postgres", make: async () => (await import("./dbos.js")).dbosSteps(targets) },
];

const only = args.only?.split(",").map((s) => s.trim());
const skip = args.skip?.split(",").map((s) => s.trim()) ?? [];
const wanted = (key: string) => (!only || only.includes(key)) && !skip.includes(key);
const figureList = args.figures?.split(",").map((s) => s.trim().toLowerCase());
const tokenMatches = (t: string, id: string) => id === t || id.startsWith(`${t}-`);
const figureWanted = (id: string) => !figureList || figureList.some((t) => tokenMatches(t, id));

// ------------------------------------------------------------------ helpers

const fmtRatio = (v: number) => (v >= 10 ? `${fmtInt.format(v)}×` : `${v.toFixed(2)}×`);
const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));

function errMsg(e: unknown): string {
  const m = e instanceof Error ? e.message : String(e);
  return m.split("\n")[0]!.slice(0, 300);
}

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<T>((_, rej) => {
        timer = setTimeout(() => rej(new Error(`${what} did not finish within ${ms / 1000} s`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function until(cond: () => Promise<boolean>, what: string, ms = FIGURE_TIMEOUT_MS): Promise<void> {
  const limit = performance.now() + ms;
  while (!(await cond())) {
    if (performance.now() > limit) throw new Error(`${what} did not finish within ${ms / 1000} s`);
    await sleep(5);
  }
}

const payload = (seq: number): Payload => ({ seq, enqueuedAt: Date.now() });

async function enqueueAll(a: Adapter, n: number, batch: number): Promise<void> {
  for (let i = 0; i < n; i += batch) {
    const size = Math.min(batch, n - i);
    await a.enqueueBatch(Array.from({ length: size }, (_, k) => payload(i + k)));
  }
}

// ------------------------------------------------------------------ figures

interface Figure {
  id: string;
  label: string;
  unit: string;
  detail: string;
  /** Latency and memory: the pair ratio is then peer / Ratchet, so > 1 still favours Ratchet. */
  lowerIsBetter?: boolean;
}

const QUEUE_FIGURES: Figure[] = [
  {
    id: "w1-single",
    label: `W1 enqueue ${fmtInt.format(SIZE.jobs)}, one at a time`,
    unit: "jobs/s",
    detail: `${SIZE.jobs} awaited single enqueues`,
  },
  {
    id: "w1-batch",
    label: `W1 enqueue ${fmtInt.format(SIZE.jobs)}, batches of ${fmtInt.format(SIZE.batch)}`,
    unit: "jobs/s",
    detail: `${SIZE.jobs} jobs, ${SIZE.batch} per batch call`,
  },
  {
    id: "w2-c1",
    label: `W2 drain ${fmtInt.format(SIZE.jobs)}, concurrency 1`,
    unit: "jobs/s",
    detail: `${SIZE.jobs} queued no-op jobs drained by a worker in this process at concurrency 1`,
  },
  {
    id: "w2-c16",
    label: `W2 drain ${fmtInt.format(SIZE.jobs)}, concurrency 16`,
    unit: "jobs/s",
    detail: `${SIZE.jobs} queued no-op jobs drained by a worker in this process at concurrency 16`,
  },
];
const STEPS_FIGURE: Figure = {
  id: "w4-steps",
  label: `W4 ${fmtInt.format(SIZE.stepTasks)} tasks × ${SIZE.steps} steps, ${SIZE.inFlight} in flight`,
  unit: "steps/s",
  detail: `${SIZE.stepTasks} tasks/workflows of ${SIZE.steps} checkpointed steps, ${SIZE.inFlight} in flight; steps / wall time`,
};
const W3_FIGURES: Figure[] = (["p50", "p95", "p99"] as const).map((p) => ({
  id: `w3-${p}`,
  label: `W3 ${p} (ms)`,
  unit: "ms",
  detail: `enqueue-to-start, ${SIZE.w3Rate}/s single enqueues for ${SIZE.w3Seconds} s to an idle worker (concurrency ${SIZE.concurrency}) in this process; Date.now() resolution (1 ms)`,
  lowerIsBetter: true,
}));
const waitingLabel = fmtInt.format(SIZE.w5Waiting);
const W5_FIGURES: Figure[] = [
  {
    id: "w5-base",
    label: `W5 ${fmtInt.format(SIZE.w5Due)} due, none waiting (jobs/s)`,
    unit: "jobs/s",
    detail: `${SIZE.w5Due} due jobs drained at concurrency ${SIZE.concurrency}; clock from worker start to the last handler call`,
  },
  {
    id: "w5-depth",
    label: `W5 ${fmtInt.format(SIZE.w5Due)} due, ${waitingLabel} waiting (jobs/s)`,
    unit: "jobs/s",
    detail: `the same, with ${SIZE.w5Waiting} jobs enqueued first for an hour ahead (delay / run-at)`,
  },
  {
    id: "w5-ratio",
    label: `W5 ${waitingLabel} waiting / none`,
    unit: "×",
    detail: "w5-depth / w5-base, taken within each run; 1.00 means the waiting jobs cost nothing",
  },
];
const W6_FIGURES: Figure[] = [
  {
    id: "w6-w2c16-start",
    label: "W6 RSS at worker start, W2 c16 (MB)",
    unit: "MB",
    detail: "process RSS just before the worker starts (what the process held already)",
    lowerIsBetter: true,
  },
  {
    id: "w6-w2c16",
    label: "W6 peak RSS, W2 c16 (MB)",
    unit: "MB",
    detail: `peak RSS of this process (driver + worker) while draining ${SIZE.jobs} at concurrency 16`,
    lowerIsBetter: true,
  },
  {
    id: "w6-w5-start",
    label: "W6 RSS at worker start, W5 (MB)",
    unit: "MB",
    detail: "process RSS just before the W5 worker starts",
    lowerIsBetter: true,
  },
  {
    id: "w6-w5",
    label: "W6 peak RSS, W5 (MB)",
    unit: "MB",
    detail: `peak RSS of this process while draining the W5 due jobs with ${SIZE.w5Waiting} waiting`,
    lowerIsBetter: true,
  },
];
const ALL_FIGURES: Figure[] = [...QUEUE_FIGURES, STEPS_FIGURE, ...W3_FIGURES, ...W5_FIGURES, ...W6_FIGURES];
const figure = (id: string): Figure => ALL_FIGURES.find((f) => f.id === id)!;

/** One measurement on a fresh store gives one or more figures. */
interface Measurement {
  id: string;
  figures: Figure[];
  label: string;
}
const MEASUREMENTS: Measurement[] = [
  ...QUEUE_FIGURES.map((f) => ({
    id: f.id,
    label: f.label,
    figures: f.id === "w2-c16" ? [f, figure("w6-w2c16-start"), figure("w6-w2c16")] : [f],
  })),
  { id: "w3", label: "W3 latency", figures: W3_FIGURES },
  {
    id: "w5",
    label: `W5 depth (${waitingLabel} waiting)`,
    figures: [...W5_FIGURES, figure("w6-w5-start"), figure("w6-w5")],
  },
];
const measurementWanted = (m: Measurement) =>
  !figureList ||
  figureList.some((t) => tokenMatches(t, m.id) || m.figures.some((f) => tokenMatches(t, f.id)));

/**
 * W6: RSS of this process, sampled every 50 ms by a timer and, at most every 50 ms, from the job
 * handler (`poke`): plainjob's worker loop does not yield to timers while jobs remain.
 */
function rssMeter() {
  const start = process.memoryUsage.rss();
  let peak = start;
  let last = performance.now();
  const sample = () => {
    const v = process.memoryUsage.rss();
    if (v > peak) peak = v;
  };
  const timer = setInterval(sample, 50);
  return {
    poke() {
      const now = performance.now();
      if (now - last >= 50) {
        last = now;
        sample();
      }
    },
    stop() {
      clearInterval(timer);
      sample();
      return { startMB: start / 2 ** 20, peakMB: peak / 2 ** 20 };
    },
  };
}

/**
 * Starts a worker and waits until sequence numbers 0..n-1 have each reached the handler; any other
 * sequence number (a W5 job that is not due) or a second arrival is an error. With `untilLeft`, the
 * clock also waits for remaining() to reach it (W2: the completions are part of the drain); without,
 * it stops at the last handler call and remaining() is checked afterwards, untimed (W5: counting
 * 200,000 waiting rows every 5 ms would be measuring the count).
 */
async function drain(
  a: Adapter,
  n: number,
  concurrency: number,
  left: number,
  timedUntilLeft: boolean,
): Promise<{ ms: number; startMB: number; peakMB: number }> {
  const seen = new Uint16Array(n);
  let distinct = 0;
  let dupes = 0;
  let early = 0;
  let allSeen!: () => void;
  const seenAll = new Promise<void>((res) => {
    allSeen = res;
  });
  const meter = rssMeter();
  const onJob = (p: Payload) => {
    meter.poke();
    const s = p.seq;
    if (s >= n) early++;
    else if (seen[s]!++ === 0) {
      if (++distinct === n) allSeen();
    } else dupes++;
  };
  const t0 = performance.now();
  let ms: number;
  let mem: { startMB: number; peakMB: number };
  const w = await a.startWorker({ concurrency, onJob });
  try {
    try {
      await withTimeout(seenAll, FIGURE_TIMEOUT_MS, `drain (${distinct} of ${n} seen)`);
      if (timedUntilLeft)
        await until(async () => (await a.remaining()) === left, `remaining() reaching ${left}`);
      ms = performance.now() - t0;
      if (!timedUntilLeft)
        await until(async () => (await a.remaining()) === left, `remaining() reaching ${left}`);
    } finally {
      mem = meter.stop();
    }
  } finally {
    await w.stop();
  }
  if (dupes > 0) throw new Error(`${dupes} jobs ran more than once`);
  if (early > 0) throw new Error(`${early} jobs ran before they were due`);
  const rest = await a.remaining();
  if (rest !== left) throw new Error(`${rest} jobs remain after the drain (expected ${left})`);
  return { ms, ...mem };
}

async function measureW3(a: Adapter): Promise<Record<string, number>> {
  const n = SIZE.w3Rate * SIZE.w3Seconds;
  await a.setup();
  try {
    const lat: number[] = [];
    const seen = new Uint16Array(n);
    let distinct = 0;
    let dupes = 0;
    let allSeen!: () => void;
    const seenAll = new Promise<void>((res) => {
      allSeen = res;
    });
    const onJob = (p: Payload) => {
      lat.push(Date.now() - p.enqueuedAt);
      if (seen[p.seq]!++ === 0) {
        if (++distinct === n) allSeen();
      } else dupes++;
    };
    const w = await a.startWorker({ concurrency: SIZE.concurrency, onJob });
    try {
      await sleep(250); // let the worker go idle
      // Open loop: job i is fired at t0 + i / rate whether or not the previous enqueue returned.
      const pending: Promise<void>[] = [];
      const t0 = performance.now();
      for (let i = 0; i < n; i++) {
        const wait = t0 + (i * 1000) / SIZE.w3Rate - performance.now();
        if (wait >= 1) await sleep(wait);
        pending.push(a.enqueueOne(payload(i)));
      }
      await Promise.all(pending);
      await withTimeout(seenAll, FIGURE_TIMEOUT_MS, `W3 (${distinct} of ${n} seen)`);
      await until(async () => (await a.remaining()) === 0, "remaining() reaching 0");
    } finally {
      await w.stop();
    }
    if (dupes > 0) throw new Error(`${dupes} jobs ran more than once`);
    const left = await a.remaining();
    if (left !== 0) throw new Error(`${left} jobs remain after W3`);
    lat.sort((x, y) => x - y);
    return {
      "w3-p50": percentile(lat, 50),
      "w3-p95": percentile(lat, 95),
      "w3-p99": percentile(lat, 99),
    };
  } finally {
    await a.teardown();
  }
}

async function measureW5(a: Adapter): Promise<Record<string, number>> {
  const enqueueDelayed = a.enqueueDelayed?.bind(a);
  if (!enqueueDelayed) throw new Error("no delay / run-at option");
  const due = SIZE.w5Due;
  const waiting = SIZE.w5Waiting;
  let base: number;
  await a.setup();
  try {
    await enqueueAll(a, due, 1_000);
    const q = await a.remaining();
    if (q !== due) throw new Error(`after enqueueing ${due}, remaining() says ${q}`);
    base = (due / (await drain(a, due, SIZE.concurrency, 0, false)).ms) * 1000;
  } finally {
    await a.teardown();
  }
  await a.setup();
  try {
    // The waiting jobs first, so that the due ones are the newest rows.
    for (let i = 0; i < waiting; i += 1_000) {
      const size = Math.min(1_000, waiting - i);
      await enqueueDelayed(
        Array.from({ length: size }, (_, k) => payload(due + i + k)),
        SIZE.w5DelayMs,
      );
    }
    await enqueueAll(a, due, 1_000);
    const q = await a.remaining();
    if (q !== due + waiting) throw new Error(`after enqueueing ${due + waiting}, remaining() says ${q}`);
    const d = await drain(a, due, SIZE.concurrency, waiting, false);
    const depth = (due / d.ms) * 1000;
    return {
      "w5-base": base,
      "w5-depth": depth,
      "w5-ratio": depth / base,
      "w6-w5-start": d.startMB,
      "w6-w5": d.peakMB,
    };
  } finally {
    await a.teardown();
  }
}

async function measureQueue(a: Adapter, m: Measurement): Promise<Record<string, number>> {
  if (m.id === "w3") return measureW3(a);
  if (m.id === "w5") return measureW5(a);
  const N = SIZE.jobs;
  await a.setup();
  try {
    if (m.id === "w1-single" || m.id === "w1-batch") {
      const t0 = performance.now();
      if (m.id === "w1-single") for (let i = 0; i < N; i++) await a.enqueueOne(payload(i));
      else await enqueueAll(a, N, SIZE.batch);
      const ms = performance.now() - t0;
      const left = await a.remaining();
      if (left !== N) throw new Error(`after enqueueing ${N}, remaining() says ${left}`);
      return { [m.id]: (N / ms) * 1000 };
    }
    const concurrency = m.id === "w2-c1" ? 1 : 16;
    await enqueueAll(a, N, 1_000);
    const queued = await a.remaining();
    if (queued !== N) throw new Error(`after enqueueing ${N}, remaining() says ${queued}`);
    const d = await drain(a, N, concurrency, 0, true);
    const out: Record<string, number> = { [m.id]: (N / d.ms) * 1000 };
    if (m.id === "w2-c16") {
      out["w6-w2c16-start"] = d.startMB;
      out["w6-w2c16"] = d.peakMB;
    }
    return out;
  } finally {
    await a.teardown();
  }
}

async function measureSteps(a: StepsAdapter): Promise<number> {
  const { stepTasks: tasks, steps, inFlight } = SIZE;
  await a.setup();
  try {
    const ran = new Uint16Array(tasks * steps);
    const ms = await withTimeout(
      a.runSteps({
        tasks,
        steps,
        inFlight,
        onStep: (task, step) => {
          ran[task * steps + step]!++;
        },
      }),
      FIGURE_TIMEOUT_MS,
      "W4",
    );
    let missing = 0;
    let dupes = 0;
    for (const c of ran) {
      if (c === 0) missing++;
      else if (c > 1) dupes++;
    }
    if (missing || dupes) throw new Error(`W4: ${missing} steps never ran, ${dupes} ran more than once`);
    return ((tasks * steps) / ms) * 1000;
  } finally {
    await a.teardown();
  }
}

// ------------------------------------------------------------------ environment

interface Env {
  postgres?: string;
  redis?: string;
  problems: Partial<Record<"postgres" | "redis", string>>;
}

async function probe(): Promise<Env> {
  const env: Env = { problems: {} };
  try {
    const c = await pgClient(targets.pgUrl);
    try {
      const v = await c.query("SHOW server_version");
      const s = await c.query(
        "SELECT name, setting FROM pg_settings WHERE name IN ('synchronous_commit','fsync','shared_buffers','wal_level') ORDER BY name",
      );
      env.postgres = `PostgreSQL ${v.rows[0].server_version} (${s.rows.map((r: any) => `${r.name}=${r.setting}`).join(", ")})`;
    } finally {
      await c.end();
    }
  } catch (e) {
    env.problems.postgres = `PostgreSQL at ${targets.pgUrl} unreachable: ${errMsg(e)}`;
  }
  try {
    const ioredis = await loadPeer("ioredis");
    const Redis = ioredis.default ?? ioredis.Redis;
    const r = new Redis(targets.redisUrl, {
      lazyConnect: true,
      maxRetriesPerRequest: 1,
      retryStrategy: () => null,
    });
    r.on("error", () => {});
    try {
      await r.connect();
      const info: string = await r.info("server");
      const version = /redis_version:(\S+)/.exec(info)?.[1] ?? "?";
      const aof = ((await r.config("GET", "appendonly")) as string[])[1];
      const save = ((await r.config("GET", "save")) as string[])[1];
      env.redis = `Redis ${version} (appendonly=${aof}, save="${save}")`;
    } finally {
      r.disconnect();
    }
  } catch (e) {
    env.problems.redis = `Redis at ${targets.redisUrl} unreachable (or ioredis missing): ${errMsg(e)}`;
  }
  return env;
}

function versionOf(pkg: string): string {
  // Read the file directly: some packages (DBOS) do not export their package.json.
  try {
    const here = dirname(fileURLToPath(import.meta.url));
    return JSON.parse(readFileSync(join(here, "..", "node_modules", pkg, "package.json"), "utf8")).version;
  } catch {
    return "not installed";
  }
}

// ------------------------------------------------------------------ main

interface Result {
  engine: string;
  figure: string;
  samples: number[];
  errors: string[];
  /** Failures that a second attempt in the same run recovered from. */
  retried: string[];
  /** Why the engine cannot run this figure (W5 without a delay option). */
  skipped?: string;
}

/**
 * One retry, after waiting for PostgreSQL to answer again: on a shared machine another process
 * (a test that restarts the server, say) can break a single measurement. The first error is kept
 * in the JSON.
 */
async function retryOnce<T>(fn: () => Promise<T>, what: string, r: Result): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    r.retried.push(errMsg(e));
    progress(`  ${what}: ${errMsg(e)}; retrying once`);
    const limit = performance.now() + 60_000;
    while (performance.now() < limit) {
      try {
        const c = await pgClient(targets.pgUrl);
        await c.end();
        break;
      } catch {
        await sleep(1_000);
      }
    }
    return await fn();
  }
}

async function main(): Promise<void> {
  const env = await probe();
  const versions: Record<string, string> = {};
  for (const p of [
    "graphile-worker",
    "pg-boss",
    "bullmq",
    "ioredis",
    "plainjob",
    "better-sqlite3",
    "@dbos-inc/dbos-sdk",
    "pg",
  ])
    versions[p] = versionOf(p);
  progress(
    `node ${process.version}, ${cpus().length} cores; ${env.postgres ?? env.problems.postgres}; ${env.redis ?? env.problems.redis}`,
  );
  progress(
    `versions: ${Object.entries(versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}`,
  );

  const failures: { engine: string; reason: string }[] = [];
  const ready = async <A extends { name: string; notes: string; backend: string; durable: boolean }>(
    list: Entry<A>[],
  ): Promise<{ key: string; a: A }[]> => {
    const out: { key: string; a: A }[] = [];
    for (const e of list) {
      if (!wanted(e.key)) continue;
      const problem = e.needs === "postgres" || e.needs === "redis" ? env.problems[e.needs] : undefined;
      if (problem) {
        failures.push({ engine: e.key, reason: problem });
        continue;
      }
      try {
        out.push({ key: e.key, a: await e.make() });
      } catch (err) {
        failures.push({ engine: e.key, reason: `could not load: ${errMsg(err)}` });
      }
    }
    return out;
  };
  const queues = await ready(queueEngines);
  const stepsers = await ready(stepsEngines);

  const results = new Map<string, Result>();
  const result = (engine: string, figure: string): Result => {
    const k = `${engine}\u0000${figure}`;
    let r = results.get(k);
    if (!r) {
      r = { engine, figure, samples: [], errors: [], retried: [] };
      results.set(k, r);
    }
    return r;
  };
  // A figure that failed is tried again in the next run (a server restart by another process
  // should not cost the whole figure), but not after two failures (a broken adapter would
  // otherwise burn a timeout every run).
  const broken = new Set<string>();
  const failed = (key: string, id: string, r: Result) => {
    if (r.errors.length >= 2) broken.add(`${key}/${id}`);
  };

  const t0 = performance.now();
  for (let run = 1; run <= RUNS; run++) {
    for (const { key, a } of queues) {
      for (const m of MEASUREMENTS) {
        if (!measurementWanted(m)) continue;
        const rs = m.figures.map((f) => result(key, f.id));
        const r = rs[0]!;
        if (m.id === "w5" && !a.enqueueDelayed) {
          for (const x of rs) x.skipped = "no delay / run-at option";
          continue;
        }
        if (broken.has(`${key}/${m.id}`)) continue;
        const s0 = performance.now();
        try {
          const v = await retryOnce(() => measureQueue(a, m), `${key} ${m.label}`, r);
          for (const f of m.figures) if (v[f.id] !== undefined) result(key, f.id).samples.push(v[f.id]!);
          const shown = m.figures.map((f) => `${f.id} ${fmt(v[f.id] ?? Number.NaN)} ${f.unit}`).join(", ");
          progress(
            `run ${run}/${RUNS} ${key.padEnd(16)} ${m.label}: ${shown} (${((performance.now() - s0) / 1000).toFixed(1)} s)`,
          );
        } catch (e) {
          for (const x of rs) x.errors.push(errMsg(e));
          if (r.errors.length >= 2) broken.add(`${key}/${m.id}`);
          progress(`run ${run}/${RUNS} ${key.padEnd(16)} ${m.label}: FAILED ${errMsg(e)}`);
        }
      }
    }
    for (const { key, a } of figureWanted(STEPS_FIGURE.id) ? stepsers : []) {
      const r = result(key, STEPS_FIGURE.id);
      if (broken.has(`${key}/${STEPS_FIGURE.id}`)) continue;
      const s0 = performance.now();
      try {
        const v = await retryOnce(() => measureSteps(a), `${key} ${STEPS_FIGURE.label}`, r);
        r.samples.push(v);
        progress(
          `run ${run}/${RUNS} ${key.padEnd(16)} ${STEPS_FIGURE.label}: ${fmt(v)} ${STEPS_FIGURE.unit} (${((performance.now() - s0) / 1000).toFixed(1)} s)`,
        );
      } catch (e) {
        r.errors.push(errMsg(e));
        failed(key, STEPS_FIGURE.id, r);
        progress(`run ${run}/${RUNS} ${key.padEnd(16)} ${STEPS_FIGURE.label}: FAILED ${errMsg(e)}`);
      }
    }
  }
  const totalS = (performance.now() - t0) / 1000;

  // ---------------------------------------------------------------- report
  const cell = (engine: string, figure: string): string => {
    const r = results.get(`${engine}\u0000${figure}`);
    if (!r) return "–";
    if (r.skipped) return `skipped: ${r.skipped}`;
    if (r.errors.length && !r.samples.length) return "failed";
    if (!r.samples.length) return "–";
    const m = figure === "w5-ratio" ? `${median(r.samples).toFixed(2)}×` : fmt(median(r.samples));
    return r.errors.length ? `${m} (${r.errors.length} failed)` : m;
  };
  const med = (engine: string, figure: string): number | undefined => {
    const r = results.get(`${engine}\u0000${figure}`);
    return r?.samples.length ? median(r.samples) : undefined;
  };
  const has = (figure: string) => [...results.values()].some((r) => r.figure === figure);

  const lines: string[] = [];
  const mode = QUICK ? "quick" : "full";
  lines.push(
    `Side-by-side, ${mode} run: ${fmtInt.format(SIZE.jobs)} jobs (W3 ${SIZE.w3Rate}/s for ${SIZE.w3Seconds} s; W5 ${fmtInt.format(SIZE.w5Due)} due, ${waitingLabel} waiting), medians of ${RUNS} run(s).`,
  );
  lines.push(
    `Machine (shared, noisy): ${cpus().length} × ${cpus()[0]?.model ?? "?"}, ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}; ` +
      `${env.postgres ?? "no PostgreSQL"}; ${env.redis ?? "no Redis"}. Took ${totalS.toFixed(0)} s.`,
  );
  const rows = new Map<string, { backend: string; durable: boolean }>();
  for (const { key, a } of [...queues, ...stepsers])
    rows.set(key, { backend: a.backend, durable: a.durable });
  const tables: { title: string; figures: Figure[] }[] = [
    {
      title: "Throughput (jobs/s; W4 steps/s); higher is better.",
      figures: [...QUEUE_FIGURES, STEPS_FIGURE],
    },
    { title: "W3 latency, enqueue to handler start (ms); lower is better.", figures: W3_FIGURES },
    {
      title:
        "W5 depth: drain rate of the due jobs at concurrency 16 (jobs/s), and with / without the waiting jobs.",
      figures: W5_FIGURES,
    },
    { title: "W6 memory: RSS of the process running the worker (MB); lower is better.", figures: W6_FIGURES },
  ];
  for (const t of tables) {
    const cols = t.figures.filter((f) => has(f.id));
    if (!cols.length) continue;
    const engines = [...rows.keys()].filter((k) => cols.some((f) => results.has(`${k}\u0000${f.id}`)));
    lines.push("");
    lines.push(t.title);
    lines.push("");
    lines.push(`| engine | store | durable | ${cols.map((f) => f.label).join(" | ")} |`);
    lines.push(`| --- | --- | --- | ${cols.map(() => "---:").join(" | ")} |`);
    for (const key of engines) {
      const info = rows.get(key)!;
      lines.push(
        `| ${key} | ${info.backend} | ${info.durable ? "yes" : "no"} | ${cols.map((f) => cell(key, f.id)).join(" | ")} |`,
      );
    }
  }

  // Ratios, pair by pair, from this run only.
  const pairs: [string, string][] = [
    ["ratchet-sqlite", "plainjob"],
    ["ratchet-pg", "graphile-worker"],
    ["ratchet-pg", "pg-boss"],
    ["ratchet-pg", "bullmq"],
    ["ratchet-pg", "dbos"],
    ["ratchet-sqlite", "dbos"],
  ];
  const ratioFigures = [
    ...QUEUE_FIGURES,
    STEPS_FIGURE,
    figure("w3-p50"),
    figure("w3-p99"),
    figure("w5-depth"),
    figure("w6-w2c16"),
    figure("w6-w5"),
  ].filter((f) => has(f.id));
  const ratioRows: string[] = [];
  for (const [ours, peer] of pairs) {
    if (!rows.has(ours) || !rows.has(peer)) continue;
    const cells = ratioFigures.map((f) => {
      const x = med(ours, f.id);
      const y = med(peer, f.id);
      if (x === undefined || y === undefined || x <= 0 || y <= 0) return "–";
      return fmtRatio(f.lowerIsBetter ? y / x : x / y);
    });
    if (cells.every((c) => c === "–")) continue;
    ratioRows.push(`| ${ours} / ${peer} | ${cells.join(" | ")} |`);
  }
  if (ratioRows.length) {
    lines.push("");
    lines.push(
      "Ratchet / peer (ratio of the medians above; > 1 means Ratchet is better: faster, or for ms and MB, peer / Ratchet):",
    );
    lines.push("");
    lines.push(`| pair | ${ratioFigures.map((f) => f.label).join(" | ")} |`);
    lines.push(`| --- | ${ratioFigures.map(() => "---:").join(" | ")} |`);
    lines.push(...ratioRows);
  }
  lines.push("");
  lines.push("Settings:");
  lines.push("");
  const noted = new Set<string>();
  for (const { key, a } of [...queues, ...stepsers]) {
    const k = `${key}: ${a.notes}`;
    if (noted.has(k)) continue;
    noted.add(k);
    lines.push(`- ${k}`);
  }
  const problems = [
    ...failures.map((f) => `- ${f.engine}: ${f.reason}`),
    ...new Set(
      [...results.values()]
        .filter((r) => r.errors.length || r.skipped)
        .map(
          (r) =>
            `- ${r.engine}, ${MEASUREMENTS.find((m) => m.figures.some((f) => f.id === r.figure))?.label ?? r.figure}: ${r.skipped ? `skipped, ${r.skipped}` : r.errors.join("; ")}`,
        ),
    ),
  ];
  if (problems.length) {
    lines.push("");
    lines.push("Failed or skipped:");
    lines.push("");
    lines.push(...problems);
  }
  process.stdout.write(`${lines.join("\n")}\n`);

  const here = dirname(fileURLToPath(import.meta.url));
  const outDir = join(here, "results");
  mkdirSync(outDir, { recursive: true });
  const file = join(outDir, QUICK ? "latest-quick.json" : "latest.json");
  writeFileSync(
    file,
    `${JSON.stringify(
      {
        when: new Date().toISOString(),
        mode,
        runs: RUNS,
        sizes: SIZE,
        machine: {
          cores: cpus().length,
          cpu: cpus()[0]?.model,
          memGiB: Math.round(totalmem() / 2 ** 30),
          node: process.version,
        },
        postgres: env.postgres ?? env.problems.postgres,
        redis: env.redis ?? env.problems.redis,
        versions,
        figures: ALL_FIGURES,
        engines: [...queues, ...stepsers].map(({ key, a }) => ({
          key,
          name: a.name,
          backend: a.backend,
          durable: a.durable,
          notes: a.notes,
        })),
        results: [...results.values()].map((r) => ({
          ...r,
          median: r.samples.length ? median(r.samples) : null,
        })),
        failures,
      },
      null,
      2,
    )}\n`,
  );
  progress(`wrote ${file}`);
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
