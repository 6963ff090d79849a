/**
 * Side-by-side driver (issue 6): Ratchet and its peers through one interface (adapter.ts), on the
 * same machine, in one run. See docs/benchmarks-peers.md.
 *
 *   cd bench && npm install                                   # the peers, into bench/node_modules
 *   cd bench && node --import tsx peers/compare.ts --quick    # 2,000-job smoke run
 *   cd bench && node --import tsx peers/compare.ts            # 20,000 jobs, 3 runs
 *
 * Workloads (no-op handlers; the payload carries a sequence number and the enqueue time). Workers
 * run in worker processes (worker-proc.ts, forked per measurement, each with its own connection);
 * the driver (this process) enqueues, counts what remains, and checks what the workers report.
 *   W1 enqueue N: one at a time (awaited), and in batches of 1,000 (100 with --quick).
 *   W2 drain N queued (enqueued untimed in batches): the clock runs from starting the loaded
 *      worker processes until every job has run and the engine reports none remaining;
 *      concurrency 1 and 16, one and two worker processes. Every drain checks that each sequence
 *      number ran exactly once and nothing is left.
 *   W3 latency: an idle worker (concurrency 16) in another process, and (w3local) in this one;
 *      single enqueues at 200/s for 10 s (--quick: 2 s), fired on schedule without waiting for the
 *      previous one; each job records its start − payload.enqueuedAt (sub-ms wall clock);
 *      p50/p95/p99 in ms.
 *   W4 durable steps: T tasks (workflows) × 10 checkpointed steps, 16 in flight, in this process
 *      (DBOS runs workflows in the process that calls them); steps/s; each step body must run
 *      exactly once.
 *   W5 depth: 2,000 due jobs drained at concurrency 16 by one worker process while 200,000
 *      (--quick: 20,000) wait for a time an hour ahead (each engine's delay / run-at option), while
 *      1,000,000 (--quick: 100,000) do, and while 200,000 wait on an unfinished dependency
 *      (engines with dependencies; these two in the first run only unless --all-runs); each against the same 2,000 in
 *      a second store with nothing waiting, the two stores' drains alternating, the ratio taken per
 *      adjacent pair (median of 7 pairs). The waiting jobs must not run.
 *   W6 memory: peak RSS of the worker process during W2 c16 and W5, sampled every 50 ms by a timer
 *      and from the job handler (plainjob's loop starves timers).
 *   CPU of W2 c16: the worker process's and the server's (postgres or redis-server processes of
 *      this machine) CPU time over the timed drain, per job, read from /proc: where a drain's time
 *      goes on two cores shared by both.
 * Each figure runs --runs times (default 3) on a fresh database/schema/file/keyspace; the tables
 * show medians, and the JSON (bench/peers/results/) every sample. Runs are interleaved (run 1 of
 * every engine, then run 2, ...) so that drift on a noisy machine hits every engine alike.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import {
  fmt,
  fmtInt,
  machineTicks,
  median,
  percentile,
  processCpuMs,
  progress,
  serverCpuMs,
} from "../stats.js";
import {
  type Adapter,
  loadPeer,
  type Payload,
  pgClient,
  type QueueEngine,
  type StepsAdapter,
  type Targets,
} from "./adapter.js";
import { type Needs, QUEUE_ENGINES, STEPS_ENGINES } from "./engines.js";
import { type GroupResult, WorkerGroup } from "./procs.js";

/** bench/, where the peers (and their better-sqlite3) are installed. */
const BENCH_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");

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
    "all-runs": { type: "boolean", default: false },
    "no-warmup": { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (args.help) {
  process.stdout.write(
    "usage: node --import tsx peers/compare.ts [--quick] [--runs N] [--only a,b] [--skip a,b]\n" +
      "         [--pg-url URL] [--redis-url URL] [--dir PATH]\n" +
      "  engines: ratchet-sqlite, plainjob, ratchet-pg, graphile-worker, pg-boss, bullmq, dbos,\n" +
      "           ratchet-sqlite-p0, ratchet-pg-p0 (Ratchet at its default prefetch 0),\n" +
      "           graphile-worker-defaults (graphile-worker without its performance preset),\n" +
      "           floor-sqlite, floor-pg (the least each store allows for W2: peers/floor.ts),\n" +
      "           floor-lease-pg (floor-pg with Ratchet's rules for a claim and a completion)\n" +
      "  --quick      2,000 jobs (batches of 100), 100 × 10 steps; a smoke run\n" +
      "  --runs N     measurements per figure (default 3)\n" +
      "  --only/--skip  engines to run / leave out\n" +
      "  --figures    w1-single,w1-batch,w2-c1,w2-c16,w2-2p-c1,w2-2p-c16,w3,w3local,w4-steps,w5,w5m,w5b,w6\n" +
      "               (a prefix selects a group: w1, w2; case-insensitive; w6 runs w2-c16, w5 and w5m,\n" +
      "               whose RSS it reports)\n" +
      "  --all-runs   W5m and W5b in every run (default: the first run only)\n" +
      "  --no-warmup  leave out the untimed warm-up of the driver's engines before run 1 (see WARMUP)\n" +
      "  the JSON goes to peers/results/latest.json, or latest-partial.json with --only/--skip/--figures\n" +
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
  /**
   * Pairs of drains (one without, one with the waiting jobs) per W5 measurement, median taken. One
   * drain of 2,000 lasts 0.1–0.4 s, most of it the worker process warming up, so a single one swung
   * the ratio from 0.6× to 1.6× between variants of one run on the same code path (2026-11-30); the
   * target is 10 %.
   */
  w5Rounds: QUICK ? 2 : 7,
  w5Waiting: QUICK ? 20_000 : 200_000,
  w5Million: QUICK ? 100_000 : 1_000_000,
  w5DelayMs: 3_600_000,
  concurrency: 16,
  batch: QUICK ? 100 : 1_000,
  stepTasks: QUICK ? 100 : 1_000,
  steps: 10,
  inFlight: 16,
};
const FIGURE_TIMEOUT_MS = 300_000;

// ------------------------------------------------------------------ engines

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

/**
 * The enqueue time is wall-clock ms with sub-millisecond precision (the process's time origin plus
 * its monotonic clock), comparable across processes on one machine: W3's 0.5 ms target needs finer
 * than Date.now().
 */
const payload = (seq: number): Payload => ({ seq, enqueuedAt: performance.timeOrigin + performance.now() });

async function enqueueAll(a: Adapter, n: number, batch: number, first = 0): Promise<void> {
  for (let i = 0; i < n; i += batch) {
    const size = Math.min(batch, n - i);
    await a.enqueueBatch(Array.from({ length: size }, (_, k) => payload(first + i + k)));
  }
}

/**
 * Before run 1, every engine that runs in this (the driver's) process does the driver's work once,
 * untimed: WARMUP.batches batches of W1's size, WARMUP.singles single enqueues and (with W4) a few
 * tasks of steps. Without it, the process's first measurement paid what its process pays once (V8's
 * young generation growing to its working size, the allocator's and SQLite's first pages, the
 * harness's own code and better-sqlite3's JavaScript compiled), and the engine listed first always
 * took that measurement: W1 batch on SQLite, five runs each, plainjob first 243k and 247k in its run
 * 1 against 317–388k in runs 2–5, and second (after Ratchet) 317–370k in every run (2026-12-07,
 * issue 43). Worker processes (W2, W3, W5) are fresh per measurement and are not warmed: a worker's
 * start-up is part of what those figures time. `--no-warmup` measures the cold first runs.
 */
const WARMUP = { batches: 20, singles: 200, stepTasks: 20 };

async function warmUp(adapters: Adapter[], steppers: StepsAdapter[]): Promise<void> {
  const s0 = performance.now();
  for (const a of adapters) {
    await a.setup();
    try {
      await enqueueAll(a, WARMUP.batches * SIZE.batch, SIZE.batch);
      for (let i = 0; i < WARMUP.singles; i++) await a.enqueueOne(payload(i));
    } finally {
      await a.teardown();
    }
  }
  for (const a of steppers) {
    await a.setup();
    try {
      await a.runSteps({
        tasks: WARMUP.stepTasks,
        steps: SIZE.steps,
        inFlight: SIZE.inFlight,
        onStep: () => {},
      });
    } finally {
      await a.teardown();
    }
  }
  progress(`warm-up of the driver's engines (untimed): ${((performance.now() - s0) / 1000).toFixed(1)} s`);
}

// ------------------------------------------------------------------ figures

interface Figure {
  id: string;
  label: string;
  unit: string;
  detail: string;
  /** Latency and memory: the pair ratio is then peer / Ratchet, so > 1 still favours Ratchet. */
  lowerIsBetter?: boolean;
  /** Neither direction is better (a share of the machine): shown, but not in the ratio table. */
  unordered?: boolean;
  /** Decimals of the table's cell (default: whole numbers from 100, one decimal below). */
  decimals?: number;
}

/** W2 drains: concurrency × worker processes. */
const W2_SHAPES = [
  { id: "w2-c1", concurrency: 1, procs: 1 },
  { id: "w2-c16", concurrency: 16, procs: 1 },
  { id: "w2-2p-c1", concurrency: 1, procs: 2 },
  { id: "w2-2p-c16", concurrency: 16, procs: 2 },
] as const;

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
  ...W2_SHAPES.map((w) => ({
    id: w.id,
    label: `W2 drain ${fmtInt.format(SIZE.jobs)}, ${w.procs === 1 ? "1 process" : `${w.procs} processes`} × c${w.concurrency}`,
    unit: "jobs/s",
    detail: `${SIZE.jobs} queued no-op jobs drained by ${w.procs} worker process(es) at concurrency ${w.concurrency} each`,
  })),
];
const STEPS_FIGURE: Figure = {
  id: "w4-steps",
  label: `W4 ${fmtInt.format(SIZE.stepTasks)} tasks × ${SIZE.steps} steps, ${SIZE.inFlight} in flight`,
  unit: "steps/s",
  detail: `${SIZE.stepTasks} tasks/workflows of ${SIZE.steps} checkpointed steps, ${SIZE.inFlight} in flight; steps / wall time`,
};
const w3Figures = (id: "w3" | "w3local", where: string): Figure[] =>
  (["p50", "p95", "p99"] as const).map((p) => ({
    id: `${id}-${p}`,
    label: `W3 ${where} ${p} (ms)`,
    unit: "ms",
    detail: `enqueue-to-start, ${SIZE.w3Rate}/s single enqueues for ${SIZE.w3Seconds} s to an idle worker (concurrency ${SIZE.concurrency}) ${where === "remote" ? "in another process" : "in the enqueuer's process"}`,
    lowerIsBetter: true,
  }));
const W3_FIGURES = w3Figures("w3", "remote");
const W3_LOCAL_FIGURES = w3Figures("w3local", "same process");

/** W5 variants: what waits beside the due jobs. */
const W5_VARIANTS = [
  { id: "w5", waiting: SIZE.w5Waiting, kind: "future" },
  { id: "w5m", waiting: SIZE.w5Million, kind: "future" },
  { id: "w5b", waiting: SIZE.w5Waiting, kind: "blocked" },
] as const;
type W5Variant = (typeof W5_VARIANTS)[number];
const w5Label = (v: W5Variant) => `${fmtInt.format(v.waiting)} ${v.kind === "future" ? "future" : "blocked"}`;
const w5Figures = (v: W5Variant): Figure[] => [
  {
    id: `${v.id}-base`,
    label: `W5 ${fmtInt.format(SIZE.w5Due)} due, none waiting (jobs/s)`,
    unit: "jobs/s",
    detail: `${SIZE.w5Due} due jobs drained at concurrency ${SIZE.concurrency} by one worker process; clock from worker start to the last handler call`,
  },
  {
    id: `${v.id}-depth`,
    label: `W5 ${fmtInt.format(SIZE.w5Due)} due, ${w5Label(v)} (jobs/s)`,
    unit: "jobs/s",
    detail:
      v.kind === "future"
        ? `the same, with ${v.waiting} jobs enqueued first for an hour ahead (delay / run-at)`
        : `the same, with ${v.waiting} jobs enqueued first that depend on one job due in a day`,
  },
  {
    id: `${v.id}-ratio`,
    label: `W5 ${w5Label(v)} / none`,
    unit: "×",
    detail: "depth / base, taken within each run; 1.00 means the waiting jobs cost nothing",
  },
];
const W5_FIGURES = W5_VARIANTS.flatMap(w5Figures);
const W6_FIGURES: Figure[] = [
  {
    id: "w6-w2c16-start",
    label: "W6 worker RSS at start, W2 c16 (MB)",
    unit: "MB",
    detail: "RSS of the worker process just before its worker starts (engine loaded, nothing claimed)",
    lowerIsBetter: true,
  },
  {
    id: "w6-w2c16",
    label: "W6 worker peak RSS, W2 c16 (MB)",
    unit: "MB",
    detail: `peak RSS of the worker process while draining ${SIZE.jobs} at concurrency 16`,
    lowerIsBetter: true,
  },
  {
    id: "w6-w5",
    label: `W6 worker peak RSS, W5 ${fmtInt.format(SIZE.w5Waiting)} future (MB)`,
    unit: "MB",
    detail: `peak RSS of the worker process while draining the W5 due jobs with ${SIZE.w5Waiting} waiting`,
    lowerIsBetter: true,
  },
  {
    id: "w6-w5m",
    label: `W6 worker peak RSS, W5 ${fmtInt.format(SIZE.w5Million)} future (MB)`,
    unit: "MB",
    detail: `the same with ${SIZE.w5Million} waiting`,
    lowerIsBetter: true,
  },
];
/** Which processes of this machine are the store's server, by backend (SQLite has none). */
const SERVER_COMM: Record<string, string | undefined> = { postgres: "postgres", redis: "redis-server" };
const CPU_W2C16: Figure[] = [
  {
    id: "cpu-w2c16-worker",
    label: "CPU of the worker process, W2 c16 (µs/job)",
    unit: "µs",
    detail:
      "user + system CPU time of the worker process over the timed drain (its start-up included), per job",
    lowerIsBetter: true,
  },
  {
    id: "cpu-w2c16-server",
    label: "CPU of the server, W2 c16 (µs/job)",
    unit: "µs",
    detail:
      "user + system CPU time of every postgres (or redis-server) process of this machine over the timed drain, per job; none for SQLite",
    lowerIsBetter: true,
  },
  {
    id: "first-w2c16",
    label: "First job after the start, W2 c16 (ms)",
    unit: "ms",
    detail:
      "from telling the loaded worker process to start (its engine's connection and start-up included) to its first report of a job that reached the handler (reports come every 256 jobs or 5 ms)",
    lowerIsBetter: true,
  },
  {
    id: "cores-w2c16",
    label: "Cores in use, W2 c16 (worker + server CPU / drain time)",
    unit: "cores",
    detail:
      "the worker's and the server's CPU time over the timed drain divided by its wall time: how much of the machine's two cores the engine kept busy (the driver's own polling not counted)",
    unordered: true,
    decimals: 2,
  },
];
// The same with two worker processes: whether a second process costs more per job, or finds
// cores the first left idle (graphile-worker's rate grows with it, Ratchet's did not).
const CPU_W2_2P: Figure[] = [
  {
    id: "cpu-w2-2p-c16-worker",
    label: "CPU of the worker processes, W2 2 processes × c16 (µs/job)",
    unit: "µs",
    detail: "the same for W2 with two worker processes: both processes' CPU time together, per job",
    lowerIsBetter: true,
  },
  {
    id: "cpu-w2-2p-c16-server",
    label: "CPU of the server, W2 2 processes × c16 (µs/job)",
    unit: "µs",
    detail: "the server's CPU time over the two-process drain, per job; none for SQLite",
    lowerIsBetter: true,
  },
];
// W1's wall clock on two shared cores spread by ±30 % run to run for every engine (issue 43); the
// CPU the enqueuing process spent is what the engine decides.
const CPU_W1: Figure[] = [
  {
    id: "cpu-w1-batch",
    label: "CPU of the enqueuing process, W1 batches (µs/job)",
    unit: "µs",
    detail:
      "user + system CPU time of the driver's process (all its threads) over the timed batch enqueues, per job; a server's CPU not counted",
    lowerIsBetter: true,
  },
];
const CPU_FIGURES: Figure[] = [...CPU_W1, ...CPU_W2C16, ...CPU_W2_2P];
const ALL_FIGURES: Figure[] = [
  ...QUEUE_FIGURES,
  STEPS_FIGURE,
  ...W3_FIGURES,
  ...W3_LOCAL_FIGURES,
  ...W5_FIGURES,
  ...W6_FIGURES,
  ...CPU_FIGURES,
];
const figure = (id: string): Figure => ALL_FIGURES.find((f) => f.id === id)!;

/** One measurement on a fresh store gives one or more figures. */
interface Measurement {
  id: string;
  figures: Figure[];
  label: string;
  /** Measured in the first run only (W5m, W5b: minutes of enqueueing per engine). */
  firstRunOnly?: boolean;
}
const MEASUREMENTS: Measurement[] = [
  ...QUEUE_FIGURES.map((f) => ({
    id: f.id,
    label: f.label,
    figures:
      f.id === "w1-batch"
        ? [f, ...CPU_W1]
        : f.id === "w2-c16"
          ? [f, figure("w6-w2c16-start"), figure("w6-w2c16"), ...CPU_W2C16]
          : f.id === "w2-2p-c16"
            ? [f, ...CPU_W2_2P]
            : [f],
  })),
  { id: "w3", label: "W3 latency, worker in another process", figures: W3_FIGURES },
  { id: "w3local", label: "W3 latency, worker in the enqueuer's process", figures: W3_LOCAL_FIGURES },
  ...W5_VARIANTS.map((v) => ({
    id: v.id,
    label: `W5 depth (${w5Label(v)})`,
    figures: [...w5Figures(v), ...(v.kind === "future" ? [figure(`w6-${v.id}`)] : [])],
    // W5m enqueues 1,000,000 per engine, W5b's 200,000 dependent tasks take minutes on PostgreSQL.
    firstRunOnly: v.id !== "w5" && !args["all-runs"],
  })),
];
const measurementWanted = (m: Measurement) =>
  !figureList ||
  figureList.some((t) => tokenMatches(t, m.id) || m.figures.some((f) => tokenMatches(t, f.id)));

/**
 * Spawns `procs` worker processes for `key` on the adapter's store and waits until sequence numbers
 * 0..n-1 have each reached a handler; any other sequence number (a W5 job that is not due) or a
 * second arrival is an error. The clock runs from the start message to the loaded workers (process
 * boot and module loading are not timed; each worker's connection and start-up are). With
 * `timedUntilLeft`, it also waits for remaining() to reach `left` (W2: the completions are part of the
 * drain); without, it stops at the last handler call and remaining() is checked afterwards, untimed
 * (W5: counting 1,000,000 waiting rows every 5 ms would be measuring the count).
 */
async function drain(
  key: string,
  a: Adapter,
  n: number,
  opts: { concurrency: number; procs: number; left: number; timedUntilLeft: boolean },
): Promise<{
  ms: number;
  startMB: number;
  peakMB: number;
  workerCpuMs: number;
  serverCpuMs: number | null;
  firstJobMs: number | undefined;
}> {
  const g = await WorkerGroup.spawn(key, targets, a.ref(), opts.procs);
  const comm = SERVER_COMM[a.backend];
  let ms: number;
  let res: GroupResult;
  let workerCpuMs: number;
  let serverMs: number | null;
  try {
    const w0 = processCpuMs(g.pids());
    const s0 = comm ? serverCpuMs(comm) : 0;
    const t0 = performance.now();
    await g.start(opts.concurrency, n, false);
    const started = performance.now() - t0;
    await g.waitDistinct(n, FIGURE_TIMEOUT_MS);
    const handled = performance.now() - t0;
    if (opts.timedUntilLeft) {
      // The engine's cheaper count of jobs without an outcome, where it has one (Adapter.unfinished);
      // remaining() is checked below either way.
      const left = a.unfinished ? () => a.unfinished!() : () => a.remaining();
      await until(async () => (await left()) === opts.left, `unfinished jobs reaching ${opts.left}`);
    }
    ms = performance.now() - t0;
    // Where the clock went: the workers' start-up (open and start; an engine may already be running
    // jobs when it reports started), the handlers, and the tail until the engine reports the jobs done.
    progress(
      `  ${key} drain of ${n}: workers started at ${fmt(started)} ms, first job at ${fmt(g.firstJobMs ?? Number.NaN)} ms, last handler at ${fmt(handled)} ms, done at ${fmt(ms)} ms`,
    );
    workerCpuMs = processCpuMs(g.pids()) - w0;
    serverMs = comm ? serverCpuMs(comm) - s0 : null;
    if (!opts.timedUntilLeft)
      await until(async () => (await a.remaining()) === opts.left, `remaining() reaching ${opts.left}`);
    res = await g.stop();
  } finally {
    g.kill();
  }
  checkSeen(res.seen, res.early);
  const rest = await a.remaining();
  if (rest !== opts.left) throw new Error(`${rest} jobs remain after the drain (expected ${opts.left})`);
  return {
    ms,
    startMB: res.rssStartMB,
    peakMB: res.rssPeakMB,
    workerCpuMs,
    serverCpuMs: serverMs,
    firstJobMs: g.firstJobMs,
  };
}

function checkSeen(seen: Uint16Array, early: number): void {
  let missing = 0;
  let dupes = 0;
  for (const c of seen) {
    if (c === 0) missing++;
    else if (c > 1) dupes++;
  }
  if (dupes > 0) throw new Error(`${dupes} jobs ran more than once`);
  if (missing > 0) throw new Error(`${missing} jobs never ran`);
  if (early > 0) throw new Error(`${early} jobs ran that were not due`);
}

/**
 * Single enqueues at `w3Rate`/s, open loop (job i is fired at t0 + i / rate whether or not earlier
 * enqueues returned), to an idle worker: in worker processes (`w3`) or in this process (`w3local`,
 * the engine's own same-process worker when it has one, else its worker on a second connection).
 */
async function measureW3(key: string, engine: QueueEngine, a: Adapter, local: boolean) {
  const n = SIZE.w3Rate * SIZE.w3Seconds;
  const prefix = local ? "w3local" : "w3";
  await a.setup();
  try {
    let lat: number[];
    const fire = async () => {
      await sleep(250); // let the worker go idle
      const pending: Promise<void>[] = [];
      const t0 = performance.now();
      for (let i = 0; i < n; i++) {
        const wait = t0 + (i * 1000) / SIZE.w3Rate - performance.now();
        if (wait >= 1) await sleep(wait);
        pending.push(a.enqueueOne(payload(i)));
      }
      await Promise.all(pending);
    };
    if (local) {
      const seen = new Uint16Array(n);
      let distinct = 0;
      let early = 0;
      lat = [];
      const onJob = (p: Payload) => {
        lat.push(performance.timeOrigin + performance.now() - p.enqueuedAt);
        if (p.seq < 0 || p.seq >= n) early++;
        else if (seen[p.seq]!++ === 0) distinct++;
      };
      const opts = { concurrency: SIZE.concurrency, onJob };
      const w = a.startLocalWorker
        ? await a.startLocalWorker(opts)
        : await engine.startWorker(targets, a.ref(), opts);
      try {
        await fire();
        await until(async () => distinct === n, `W3 (${distinct} of ${n} seen)`);
        await until(async () => (await a.remaining()) === 0, "remaining() reaching 0");
      } finally {
        await w.stop();
      }
      checkSeen(seen, early);
    } else {
      const g = await WorkerGroup.spawn(key, targets, a.ref(), 1);
      try {
        await g.start(SIZE.concurrency, n, true);
        await fire();
        await g.waitDistinct(n, FIGURE_TIMEOUT_MS);
        await until(async () => (await a.remaining()) === 0, "remaining() reaching 0");
        const res = await g.stop();
        checkSeen(res.seen, res.early);
        lat = res.latencies;
      } finally {
        g.kill();
      }
    }
    const left = await a.remaining();
    if (left !== 0) throw new Error(`${left} jobs remain after W3`);
    lat.sort((x, y) => x - y);
    return {
      [`${prefix}-p50`]: percentile(lat, 50),
      [`${prefix}-p95`]: percentile(lat, 95),
      [`${prefix}-p99`]: percentile(lat, 99),
    };
  } finally {
    await a.teardown();
  }
}

/**
 * W5: the housekeeping a database does after a bulk insert, done before the clock starts, for every
 * engine alike: `VACUUM (ANALYZE)` of the run's PostgreSQL schema, a `wal_checkpoint(TRUNCATE)` of a
 * SQLite file. Without it the 200,000-row insert's autovacuum and analyze, or SQLite's checkpoint of
 * the WAL the insert grew, land in whichever drain happens to run next (one run measured Ratchet on
 * PostgreSQL at 0.2× with 200,000 waiting and 0.8× with 1,000,000, whose longer insert gave autovacuum
 * time to finish first). W5 asks what waiting tasks cost a drain, not what their insert's aftermath
 * costs.
 *
 * The SQLite checkpoint runs in a child process on purpose. This process already holds the file open
 * through Ratchet's copy of SQLite (the root node_modules' better-sqlite3), and `import
 * "better-sqlite3"` from bench/ is a second copy. Closing a connection of the second copy drops every
 * POSIX lock this process holds on the file, the first copy's included (sqlite.org/howtocorrupt.html,
 * section 2.2.1); the next worker to close then believed itself the last connection and deleted the
 * -wal and -shm, and the driver's connection read its mapping of the deleted -shm, a frozen view, for
 * the rest of the run (reproduced in one run of this harness and in a 30-line script).
 */
async function quiesce(a: Adapter): Promise<void> {
  const ref = a.ref();
  if (a.backend === "postgres" && ref.schema) {
    const c = await pgClient(targets.pgUrl);
    try {
      const tables = await c.query("SELECT tablename FROM pg_tables WHERE schemaname = $1", [ref.schema]);
      for (const t of tables.rows) await c.query(`VACUUM (ANALYZE) "${ref.schema}"."${t.tablename}"`);
    } finally {
      await c.end();
    }
  } else if (a.backend === "sqlite" && ref.file) {
    const script =
      'const D = require("better-sqlite3"); const db = new D(process.argv[1]);' +
      'db.pragma("busy_timeout = 10000"); db.pragma("wal_checkpoint(TRUNCATE)"); db.close();';
    execFileSync(process.execPath, ["-e", script, ref.file], { cwd: BENCH_DIR, stdio: "inherit" });
  }
}

/** How idle the machine must have been over one window before a figure starts, and the most it waits. */
const CALM_IDLE = 0.9;
const CALM_WINDOW_MS = 250;
const CALM_MAX_MS = 10_000;

/**
 * Before every figure of every engine: PostgreSQL writes out what earlier figures left dirty
 * (CHECKPOINT; its own writes and fsyncs then do not land in the next figure's clock), the driver's
 * heap is collected when node runs with --expose-gc (npm run bench:peers does; the W3 local and W4
 * figures run in this process), and the driver waits until the machine's cores were at least 90 %
 * idle over 250 ms (worker processes of the last figure exiting, the server's background writers),
 * for at most 10 s. The full run of 7b564ba had W4 of ratchet-sqlite, whose runs last 0.1–0.3 s and
 * came right after floor-lease-pg's two-process drains, at 37,857–61,302 steps/s, where the figure
 * alone gave 60,015–100,734. Returns how long it waited, and whether the machine never calmed.
 *
 * Before the CHECKPOINT, a VACUUM of the catalog tables that a schema's creation and drop leave dead
 * rows in (CATALOGS): every PostgreSQL figure run creates and drops a schema (Ratchet's has ~36
 * objects), and on a server with autovacuum off (this machine's, set in its configuration file) the
 * dead rows stay: after a session of runs, 490k dead rows in pg_attribute, 220k in pg_depend, 90k in
 * pg_class, and every engine's drains ~15 % slower (W2 c16, three runs before and after one VACUUM
 * of them, 2026-12-07: ratchet-pg 21.7k → 24.8k jobs/s, graphile-worker 13.4k → 15.7k). Each engine's
 * figures drifted down across a run as a result.
 */
const CATALOGS = [
  "pg_attribute",
  "pg_depend",
  "pg_class",
  "pg_index",
  "pg_type",
  "pg_constraint",
  "pg_attrdef",
  "pg_sequence",
  "pg_proc",
  "pg_trigger",
  "pg_namespace",
];

async function calm(postgres: boolean): Promise<{ ms: number; timedOut: boolean }> {
  const t0 = performance.now();
  if (postgres) {
    try {
      const c = await pgClient(targets.pgUrl);
      try {
        for (const t of CATALOGS) await c.query(`VACUUM pg_catalog.${t}`);
        await c.query("CHECKPOINT");
      } finally {
        await c.end();
      }
    } catch {
      // Not a superuser, or the server is away: the figure's own retry deals with the latter.
    }
  }
  (globalThis as { gc?: () => void }).gc?.();
  for (;;) {
    const a = machineTicks();
    await sleep(CALM_WINDOW_MS);
    const b = machineTicks();
    const total = b.total - a.total;
    if (total > 0 && (b.idle - a.idle) / total >= CALM_IDLE)
      return { ms: performance.now() - t0, timedOut: false };
    if (performance.now() - t0 > CALM_MAX_MS) return { ms: performance.now() - t0, timedOut: true };
  }
}

/**
 * W5: a store with the waiting jobs and a store without, both set up at once, their drains of the
 * same due jobs alternating (base, depth; then depth, base; …), the ratio taken per pair of adjacent
 * drains and its median reported. Measuring every base drain first and every depth drain after put
 * the machine's drift into the ratio: one 3-run comparison this session saw Ratchet's base rate fall
 * from 16,900 to 12,000 jobs/s across runs, and the ratio swing 0.8–1.1 with it.
 */
async function measureW5(
  key: string,
  engine: QueueEngine,
  a: Adapter,
  v: W5Variant,
): Promise<Record<string, number>> {
  const due = SIZE.w5Due;
  const waiting = v.waiting;
  const add = v.kind === "future" ? a.enqueueDelayed?.bind(a) : a.enqueueBlocked?.bind(a);
  if (!add) throw new Error("unreachable: the driver skips W5 variants without the option");
  // A blocked batch also makes its one blocker (a job due in a day).
  const left = waiting + (v.kind === "blocked" ? 1 : 0);
  // Each drain enqueues the due jobs again (sequence numbers 0 … due − 1: every drain checks its own).
  const drainDue = async (x: Adapter, waitingThere: number) => {
    await enqueueAll(x, due, 1_000);
    const q = await x.remaining();
    if (q !== due + waitingThere)
      throw new Error(`after enqueueing ${due + waitingThere}, remaining() says ${q}`);
    await quiesce(x);
    return drain(key, x, due, {
      concurrency: SIZE.concurrency,
      procs: 1,
      left: waitingThere,
      timedUntilLeft: false,
    });
  };
  const base = await engine.adapter(targets);
  await a.setup();
  try {
    await base.setup();
    try {
      // The waiting jobs first, so that the due ones are the newest rows.
      for (let i = 0; i < waiting; i += 1_000) {
        const size = Math.min(1_000, waiting - i);
        await add(
          Array.from({ length: size }, (_, k) => payload(due + i + k)),
          SIZE.w5DelayMs,
        );
      }
      const baseRates: number[] = [];
      const depthRates: number[] = [];
      const ratios: number[] = [];
      let peakMB = 0;
      for (let r = 0; r < SIZE.w5Rounds; r++) {
        const pair: Record<"base" | "depth", number> = { base: 0, depth: 0 };
        for (const which of r % 2 === 0 ? (["base", "depth"] as const) : (["depth", "base"] as const)) {
          const d = which === "base" ? await drainDue(base, 0) : await drainDue(a, left);
          pair[which] = (due / d.ms) * 1000;
          if (which === "depth") peakMB = Math.max(peakMB, d.peakMB);
        }
        baseRates.push(pair.base);
        depthRates.push(pair.depth);
        ratios.push(pair.depth / pair.base);
      }
      return {
        [`${v.id}-base`]: median(baseRates),
        [`${v.id}-depth`]: median(depthRates),
        [`${v.id}-ratio`]: median(ratios),
        [`w6-${v.id}`]: peakMB,
      };
    } finally {
      await base.teardown();
    }
  } finally {
    await a.teardown();
  }
}

async function measureQueue(
  key: string,
  engine: QueueEngine,
  a: Adapter,
  m: Measurement,
): Promise<Record<string, number>> {
  if (m.id === "w3" || m.id === "w3local") return measureW3(key, engine, a, m.id === "w3local");
  const v = W5_VARIANTS.find((x) => x.id === m.id);
  if (v) return measureW5(key, engine, a, v);
  const N = SIZE.jobs;
  await a.setup();
  try {
    if (m.id === "w1-single" || m.id === "w1-batch") {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      if (m.id === "w1-single") for (let i = 0; i < N; i++) await a.enqueueOne(payload(i));
      else await enqueueAll(a, N, SIZE.batch);
      const ms = performance.now() - t0;
      const cpu = process.cpuUsage(c0);
      const left = await a.remaining();
      if (left !== N) throw new Error(`after enqueueing ${N}, remaining() says ${left}`);
      const out: Record<string, number> = { [m.id]: (N / ms) * 1000 };
      if (m.id === "w1-batch") out["cpu-w1-batch"] = (cpu.user + cpu.system) / N;
      return out;
    }
    const shape = W2_SHAPES.find((w) => w.id === m.id)!;
    await enqueueAll(a, N, 1_000);
    const queued = await a.remaining();
    if (queued !== N) throw new Error(`after enqueueing ${N}, remaining() says ${queued}`);
    const d = await drain(key, a, N, { ...shape, left: 0, timedUntilLeft: true });
    const out: Record<string, number> = { [m.id]: (N / d.ms) * 1000 };
    if (m.id === "w2-c16") {
      out["w6-w2c16-start"] = d.startMB;
      out["w6-w2c16"] = d.peakMB;
      out["cpu-w2c16-worker"] = (d.workerCpuMs * 1_000) / N;
      if (d.serverCpuMs !== null) out["cpu-w2c16-server"] = (d.serverCpuMs * 1_000) / N;
      if (d.firstJobMs !== undefined) out["first-w2c16"] = d.firstJobMs;
      out["cores-w2c16"] = (d.workerCpuMs + (d.serverCpuMs ?? 0)) / d.ms;
    }
    if (m.id === "w2-2p-c16") {
      out["cpu-w2-2p-c16-worker"] = (d.workerCpuMs * 1_000) / N;
      if (d.serverCpuMs !== null) out["cpu-w2-2p-c16-server"] = (d.serverCpuMs * 1_000) / N;
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
    checkSeen(ran, 0);
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
    return JSON.parse(readFileSync(join(BENCH_DIR, "node_modules", pkg, "package.json"), "utf8")).version;
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
  const ready = async <A>(
    list: Record<string, { needs: Needs }>,
    make: (key: string) => Promise<A>,
  ): Promise<{ key: string; a: A }[]> => {
    const out: { key: string; a: A }[] = [];
    for (const [key, e] of Object.entries(list)) {
      if (!wanted(key)) continue;
      const problem = e.needs === "postgres" || e.needs === "redis" ? env.problems[e.needs] : undefined;
      if (problem) {
        failures.push({ engine: key, reason: problem });
        continue;
      }
      try {
        out.push({ key, a: await make(key) });
      } catch (err) {
        failures.push({ engine: key, reason: `could not load: ${errMsg(err)}` });
      }
    }
    return out;
  };
  const queues = await ready(QUEUE_ENGINES, async (key) => {
    const engine = await QUEUE_ENGINES[key]!.load();
    return { engine, adapter: await engine.adapter(targets) };
  });
  const stepsers = await ready(STEPS_ENGINES, (key) => STEPS_ENGINES[key]!.make(targets));

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

  const calmWaits: number[] = [];
  let calmTimeouts = 0;
  const calmBefore = async (what: string) => {
    const c = await calm(!env.problems.postgres);
    calmWaits.push(c.ms);
    if (c.timedOut) {
      calmTimeouts++;
      progress(
        `  ${what}: the machine was not ${CALM_IDLE * 100} % idle within ${CALM_MAX_MS / 1000} s; measuring anyway`,
      );
    }
  };
  if (!args["no-warmup"])
    await warmUp(
      queues.map((q) => q.a.adapter),
      figureWanted(STEPS_FIGURE.id) ? stepsers.map((s) => s.a) : [],
    );
  const t0 = performance.now();
  for (let run = 1; run <= RUNS; run++) {
    for (const { key, a: q } of queues) {
      const a = q.adapter;
      for (const m of MEASUREMENTS) {
        if (!measurementWanted(m)) continue;
        if (m.firstRunOnly && run > 1) continue;
        const rs = m.figures.map((f) => result(key, f.id));
        const r = rs[0]!;
        const v = W5_VARIANTS.find((x) => x.id === m.id);
        const missing = a.skips?.[m.id]
          ? a.skips[m.id]
          : !v
            ? undefined
            : v.kind === "future"
              ? !a.enqueueDelayed && "no delay / run-at option"
              : !a.enqueueBlocked && "no dependencies between jobs";
        if (missing) {
          for (const x of rs) x.skipped = missing;
          continue;
        }
        if (broken.has(`${key}/${m.id}`)) continue;
        await calmBefore(`${key} ${m.label}`);
        const s0 = performance.now();
        try {
          const v = await retryOnce(() => measureQueue(key, q.engine, a, m), `${key} ${m.label}`, r);
          for (const f of m.figures) if (v[f.id] !== undefined) result(key, f.id).samples.push(v[f.id]!);
          const shown = m.figures
            .filter((f) => v[f.id] !== undefined)
            .map((f) => `${f.id} ${fmt(v[f.id]!)} ${f.unit}`)
            .join(", ");
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
      await calmBefore(`${key} ${STEPS_FIGURE.label}`);
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
    const decimals = ALL_FIGURES.find((f) => f.id === figure)?.decimals;
    const m = figure.endsWith("-ratio")
      ? `${median(r.samples).toFixed(2)}×`
      : decimals === undefined
        ? fmt(median(r.samples))
        : median(r.samples).toFixed(decimals);
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
    `Side-by-side, ${mode} run: ${fmtInt.format(SIZE.jobs)} jobs (W3 ${SIZE.w3Rate}/s for ${SIZE.w3Seconds} s; W5 ${fmtInt.format(SIZE.w5Due)} due beside ${fmtInt.format(SIZE.w5Waiting)} / ${fmtInt.format(SIZE.w5Million)} waiting), medians of ${RUNS} run(s).`,
  );
  lines.push(
    `Machine (shared, noisy): ${cpus().length} × ${cpus()[0]?.model ?? "?"}, ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}; ` +
      `${env.postgres ?? "no PostgreSQL"}; ${env.redis ?? "no Redis"}. Took ${totalS.toFixed(0)} s.`,
  );
  if (calmWaits.length)
    lines.push(
      `Before each of the ${calmWaits.length} figure runs: a VACUUM of the catalog tables and a CHECKPOINT, a GC of the driver${(globalThis as { gc?: unknown }).gc ? "" : " (not exposed: run node with --expose-gc)"}, and a wait for ${CALM_IDLE * 100} % idle cores over ${CALM_WINDOW_MS} ms (median ${fmtInt.format(median(calmWaits))} ms, most ${fmtInt.format(Math.max(...calmWaits))} ms; ${calmTimeouts} not idle within ${CALM_MAX_MS / 1000} s).`,
    );
  const described = [...queues.map(({ key, a }) => ({ key, a: a.adapter })), ...stepsers];
  const rows = new Map<string, { backend: string; durable: boolean }>();
  for (const { key, a } of described) rows.set(key, { backend: a.backend, durable: a.durable });
  const tables: { title: string; figures: Figure[] }[] = [
    {
      title: "Throughput (jobs/s; W4 steps/s); higher is better.",
      figures: [...QUEUE_FIGURES, STEPS_FIGURE],
    },
    {
      title: "W3 latency, enqueue to handler start (ms); lower is better.",
      figures: [...W3_FIGURES, ...W3_LOCAL_FIGURES],
    },
    {
      title:
        "W5 depth: drain rate of the due jobs at concurrency 16 (jobs/s), and with / without the waiting jobs.",
      figures: W5_FIGURES,
    },
    { title: "W6 memory: RSS of a worker process (MB); lower is better.", figures: W6_FIGURES },
    {
      title:
        "CPU of W1 batches (the enqueuing process) and of W2 c16, one and two worker processes (µs per job, from /proc; all share the machine's two cores): the worker processes, and the server's processes; W2 c16's first job and the cores it kept busy.",
      figures: CPU_FIGURES,
    },
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
    ["ratchet-sqlite-p0", "plainjob"],
    ["ratchet-pg-p0", "graphile-worker"],
    ["ratchet-pg-p0", "graphile-worker-defaults"],
    ["ratchet-pg-p0", "dbos"],
    ["ratchet-sqlite", "dbos"],
    ["ratchet-sqlite", "floor-sqlite"],
    ["ratchet-pg", "floor-pg"],
    ["ratchet-pg", "floor-lease-pg"],
    ["floor-lease-pg", "graphile-worker"],
  ];
  const ratioFigures = [
    ...QUEUE_FIGURES,
    STEPS_FIGURE,
    figure("w3-p50"),
    figure("w3-p99"),
    figure("w3local-p50"),
    figure("w5-depth"),
    figure("w5m-depth"),
    figure("w6-w2c16"),
    figure("w6-w5"),
    figure("w6-w5m"),
    ...CPU_FIGURES,
  ].filter((f) => has(f.id) && !f.unordered);
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
  for (const { key, a } of described) {
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
  // A run of some engines or figures (--only, --skip, --figures) does not replace the full run's JSON,
  // which docs/benchmarks-peers.md quotes: it goes to latest-partial.json.
  const partial = only !== undefined || args.skip !== undefined || figureList !== undefined;
  const file = join(outDir, QUICK ? "latest-quick.json" : partial ? "latest-partial.json" : "latest.json");
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
        engines: described.map(({ key, a }) => ({
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
        calm: {
          figures: calmWaits.length,
          medianMs: calmWaits.length ? Math.round(median(calmWaits)) : null,
          maxMs: calmWaits.length ? Math.round(Math.max(...calmWaits)) : null,
          timedOut: calmTimeouts,
        },
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
