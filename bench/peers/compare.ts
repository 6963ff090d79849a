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
 *   W4 durable steps: T tasks (workflows) × 10 checkpointed steps, 16 in flight; steps/s; each
 *      step body must run exactly once.
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
      "  --only/--skip  engines to run / leave out; --figures w1-single,w1-batch,w2-c1,w2-c16,w4-steps\n" +
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
const figureList = args.figures?.split(",").map((s) => s.trim());
const figureWanted = (id: string) => !figureList || figureList.includes(id);

// ------------------------------------------------------------------ helpers

const fmtInt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const fmt1 = new Intl.NumberFormat("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });
const fmt = (v: number) => (Math.abs(v) >= 100 ? fmtInt.format(v) : fmt1.format(v));
const fmtRatio = (v: number) => (v >= 10 ? `${fmtInt.format(v)}×` : `${v.toFixed(2)}×`);
const progress = (msg: string) => process.stderr.write(`${msg}\n`);
const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

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

async function measureQueue(a: Adapter, fig: Figure): Promise<number> {
  const N = SIZE.jobs;
  await a.setup();
  try {
    if (fig.id === "w1-single" || fig.id === "w1-batch") {
      const t0 = performance.now();
      if (fig.id === "w1-single") for (let i = 0; i < N; i++) await a.enqueueOne(payload(i));
      else await enqueueAll(a, N, SIZE.batch);
      const ms = performance.now() - t0;
      const left = await a.remaining();
      if (left !== N) throw new Error(`after enqueueing ${N}, remaining() says ${left}`);
      return (N / ms) * 1000;
    }
    const concurrency = fig.id === "w2-c1" ? 1 : 16;
    await enqueueAll(a, N, 1_000);
    const queued = await a.remaining();
    if (queued !== N) throw new Error(`after enqueueing ${N}, remaining() says ${queued}`);
    const seen = new Uint16Array(N);
    let distinct = 0;
    let dupes = 0;
    let allSeen!: () => void;
    const seenAll = new Promise<void>((res) => {
      allSeen = res;
    });
    const onJob = (p: Payload) => {
      const s = p.seq;
      if (seen[s]!++ === 0) {
        if (++distinct === N) allSeen();
      } else dupes++;
    };
    const t0 = performance.now();
    const w = await a.startWorker({ concurrency, onJob });
    let ms: number;
    try {
      await withTimeout(seenAll, FIGURE_TIMEOUT_MS, `drain (${distinct} of ${N} seen)`);
      await until(async () => (await a.remaining()) === 0, "remaining() reaching 0");
      ms = performance.now() - t0;
    } finally {
      await w.stop();
    }
    if (dupes > 0) throw new Error(`${dupes} jobs ran more than once`);
    const left = await a.remaining();
    if (left !== 0) throw new Error(`${left} jobs remain after the drain`);
    return (N / ms) * 1000;
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
      for (const fig of QUEUE_FIGURES) {
        if (!figureWanted(fig.id)) continue;
        const r = result(key, fig.id);
        if (broken.has(`${key}/${fig.id}`)) continue;
        const s0 = performance.now();
        try {
          const v = await retryOnce(() => measureQueue(a, fig), `${key} ${fig.label}`, r);
          r.samples.push(v);
          progress(
            `run ${run}/${RUNS} ${key.padEnd(16)} ${fig.label}: ${fmt(v)} ${fig.unit} (${((performance.now() - s0) / 1000).toFixed(1)} s)`,
          );
        } catch (e) {
          r.errors.push(errMsg(e));
          failed(key, fig.id, r);
          progress(`run ${run}/${RUNS} ${key.padEnd(16)} ${fig.label}: FAILED ${errMsg(e)}`);
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
    if (r.errors.length && !r.samples.length) return "failed";
    if (!r.samples.length) return "–";
    const m = fmt(median(r.samples));
    return r.errors.length ? `${m} (${r.errors.length} failed)` : m;
  };
  const med = (engine: string, figure: string): number | undefined => {
    const r = results.get(`${engine}\u0000${figure}`);
    return r?.samples.length ? median(r.samples) : undefined;
  };

  const lines: string[] = [];
  const mode = QUICK ? "quick" : "full";
  lines.push(
    `Side-by-side, ${mode} run: ${fmtInt.format(SIZE.jobs)} jobs, medians of ${RUNS} run(s), jobs/s (W4: steps/s); higher is better.`,
  );
  lines.push(
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? "?"}, ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}; ` +
      `${env.postgres ?? "no PostgreSQL"}; ${env.redis ?? "no Redis"}. Took ${totalS.toFixed(0)} s.`,
  );
  lines.push("");
  lines.push(
    `| engine | store | durable | ${QUEUE_FIGURES.map((f) => f.label).join(" | ")} | ${STEPS_FIGURE.label} |`,
  );
  lines.push(`| --- | --- | --- | ${QUEUE_FIGURES.map(() => "---:").join(" | ")} | ---: |`);
  const rows = new Map<string, { backend: string; durable: boolean }>();
  for (const { key, a } of [...queues, ...stepsers])
    rows.set(key, { backend: a.backend, durable: a.durable });
  for (const [key, info] of rows) {
    lines.push(
      `| ${key} | ${info.backend} | ${info.durable ? "yes" : "no"} | ${QUEUE_FIGURES.map((f) => cell(key, f.id)).join(" | ")} | ${cell(key, STEPS_FIGURE.id)} |`,
    );
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
  const ratioRows: string[] = [];
  for (const [ours, peer] of pairs) {
    if (!rows.has(ours) || !rows.has(peer)) continue;
    const cells = [...QUEUE_FIGURES, STEPS_FIGURE].map((f) => {
      const x = med(ours, f.id);
      const y = med(peer, f.id);
      return x !== undefined && y !== undefined && y > 0 ? fmtRatio(x / y) : "–";
    });
    if (cells.every((c) => c === "–")) continue;
    ratioRows.push(`| ${ours} / ${peer} | ${cells.join(" | ")} |`);
  }
  if (ratioRows.length) {
    lines.push("");
    lines.push("Ratchet / peer (ratio of the medians above; > 1 means Ratchet is faster):");
    lines.push("");
    lines.push(`| pair | ${[...QUEUE_FIGURES, STEPS_FIGURE].map((f) => f.label).join(" | ")} |`);
    lines.push(`| --- | ${[...QUEUE_FIGURES, STEPS_FIGURE].map(() => "---:").join(" | ")} |`);
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
    ...[...results.values()]
      .filter((r) => r.errors.length)
      .map((r) => `- ${r.engine}, ${r.figure}: ${r.errors.join("; ")}`),
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
        figures: [...QUEUE_FIGURES, STEPS_FIGURE],
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
