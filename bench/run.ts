/**
 * Ratchet benchmark runner (SQLite, then PostgreSQL). See bench/README.md.
 *
 *   npm run build && npm run bench            full run (20,000-task figures)
 *   npm run bench -- --quick                  smoke run with small sizes
 *   npm run bench -- --runs 5 --dir /mnt/ssd  more runs, database files elsewhere
 *   npm run bench -- --pg-only                PostgreSQL figures only
 *
 * Every figure runs on a fresh SQLite file (WAL, synchronous=NORMAL) in a new
 * temp directory, is measured `runs` times, and is reported as the median with
 * the min–max. The table goes to stdout; the same data as JSON to
 * bench/results/latest-sqlite.json (latest-sqlite-quick.json for --quick).
 * PostgreSQL figures (bench/pg.ts) follow when --pg is given, or by default
 * when the server answers; they go to bench/results/latest-pg.json.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { arch, cpus, platform, release, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import Database from "better-sqlite3";
import { defineTask, Ratchet, silentLogger, type TaskDefinition } from "../src/index.js";
import type { SqliteStore } from "../src/store/sqlite/sqlite-store.js";
import { renderConversationFigures, runConversationBench } from "./conversations.js";
import { renderModelFigures, runModelBench } from "./models.js";
import { renderOutboxFigures, runOutboxBench } from "./outbox.js";
import { pgProblem, runPg } from "./pg.js";
import { fmt, median, n, progress } from "./stats.js";
import { renderStreamFigures, runStreamBench } from "./streams.js";
import { renderToolFigures, runToolBench } from "./tools.js";

// ------------------------------------------------------------------ options

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    runs: { type: "string" },
    dir: { type: "string" },
    pg: { type: "boolean", default: false },
    "pg-only": { type: "boolean", default: false },
    "pg-url": { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (args.help) {
  process.stdout.write(
    "usage: node dist/bench/run.js [--quick] [--runs N] [--dir PATH] [--pg | --pg-only] [--pg-url URL]\n" +
      "  --quick       small sizes, for a fast smoke run (writes latest-*-quick.json)\n" +
      "  --runs N      measurements per figure (default 3)\n" +
      "  --dir PATH    where the temporary SQLite files live (default: the OS temp dir)\n" +
      "  --pg          also run the PostgreSQL figures, and fail if the server is unreachable\n" +
      "                (without --pg they run only when the server answers)\n" +
      "  --pg-only     PostgreSQL figures only (skips SQLite)\n" +
      "  --pg-url URL  server (default: env RATCHET_PG_URL, else postgres://postgres@127.0.0.1:5432/test)\n",
  );
  process.exit(0);
}

const QUICK = args.quick;
const RUNS = args.runs === undefined ? 3 : Number(args.runs);
if (!Number.isInteger(RUNS) || RUNS < 1) {
  process.stderr.write("--runs must be a positive integer\n");
  process.exit(2);
}
const BASE_DIR = resolve(args.dir ?? tmpdir());
const PG_URL = args["pg-url"] ?? process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

const SIZE = {
  enqueue: QUICK ? 2_000 : 20_000,
  batch: QUICK ? 100 : 1_000,
  drain: QUICK ? 2_000 : 20_000,
  stepTasks: QUICK ? 100 : 1_000,
  stepsPerTask: 10,
  commits: QUICK ? 2_000 : 20_000,
};
const POLL_MS = 20;
const SYNCHRONOUS = "NORMAL" as const;

// ------------------------------------------------------------------ tasks

const noop = defineTask({ name: "noop", run: () => null });
const steps10 = defineTask({
  name: "steps10",
  async run(ctx) {
    let sum = 0;
    for (let i = 0; i < SIZE.stepsPerTask; i++) sum += await ctx.step(`s${i}`, () => i);
    return sum;
  },
});

/** W2 with seats (spec §14.9): 64 keys, at most 2 tasks of a key at once. */
const SEAT_KEYS = 64;
const SEAT_LIMIT = 2;
const seated = defineTask({
  name: "seated",
  concurrency: { key: (i: { i: number }) => String(i.i % SEAT_KEYS), limit: SEAT_LIMIT },
  run: () => null,
});

// ---------------------------------------------------------------- helpers

/** A fresh directory with one SQLite file path; removed by the returned cleanup. */
function freshDb(): { path: string; cleanup: () => void } {
  const dir = mkdtempSync(join(BASE_DIR, "ratchet-bench-"));
  return { path: join(dir, "bench.db"), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * The housekeeping after a bulk insert, untimed, before a depth figure's drain (as bench/peers/compare.ts
 * does for every engine): without it the checkpoint of the 200,000 rows' WAL lands in the drain, and
 * the figure asks what waiting tasks cost a drain, not what their insert's checkpoint costs (0.62×
 * the baseline with it in, this session's run).
 */
function checkpoint(r: Ratchet): void {
  (r.store as SqliteStore).db.pragma("wal_checkpoint(TRUNCATE)");
}

async function withRatchet<T>(tasks: TaskDefinition[], fn: (r: Ratchet) => Promise<T>): Promise<T> {
  const db = freshDb();
  const r = await Ratchet.open({
    store: `sqlite:${db.path}`,
    synchronous: SYNCHRONOUS,
    tasks,
    logger: silentLogger,
    pollIntervalMs: POLL_MS,
  });
  try {
    return await fn(r);
  } finally {
    await r.close();
    db.cleanup();
  }
}

async function enqueueBatches(r: Ratchet, task: TaskDefinition, count: number, batch = 1_000) {
  for (let i = 0; i < count; i += batch) {
    const size = Math.min(batch, count - i);
    await r.enqueueMany(Array.from({ length: size }, (_, k) => ({ task, input: { i: i + k } })));
  }
}

async function completed(r: Ratchet): Promise<number> {
  let sum = 0;
  for (const q of await r.stats()) sum += q.byOutcome.completed ?? 0;
  return sum;
}

/**
 * Starts a worker on the queued tasks and returns the ms until all `count` settlements committed.
 * Completion is counted from the settlements the worker's store commits (the bench wraps
 * store.settle), not by polling stats(): a stats() scan of a 20k-row table costs ~7 ms, and polling
 * it every 20 ms took a third of the event loop from the drain it measured. stats() then confirms.
 */
async function timeDrain(r: Ratchet, count: number, concurrency: number, prefetch = 0): Promise<number> {
  let settled = 0;
  let resolve!: () => void;
  const all = new Promise<void>((res) => {
    resolve = res;
  });
  const store = r.store as { settle: Ratchet["store"]["settle"] };
  const settle = store.settle.bind(r.store);
  store.settle = async (items) => {
    const out = await settle(items);
    settled += out.filter((x) => x === "ok").length;
    if (settled >= count) resolve();
    return out;
  };
  const t0 = performance.now();
  await r.start({ concurrency, prefetch });
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    all,
    new Promise((_, rej) => {
      timer = setTimeout(() => rej(new Error("drain did not finish within 10 minutes")), 600_000);
    }),
  ]);
  clearTimeout(timer);
  const ms = performance.now() - t0;
  await r.stop();
  store.settle = settle;
  const done = await completed(r);
  if (done < count) throw new Error(`drain: ${done} of ${count} completed`);
  return ms;
}

// ---------------------------------------------------------------- figures

interface Figure {
  figure: string;
  unit: string;
  /** What one run measures, for the JSON. */
  detail: string;
  samples: number[];
}

const figures: Figure[] = [];

function record(figure: string, unit: string, detail: string): Figure {
  const f: Figure = { figure, unit, detail, samples: [] };
  figures.push(f);
  return f;
}

async function benchEnqueueSingle(): Promise<void> {
  const f = record(
    `enqueue, ${n(SIZE.enqueue)} single calls`,
    "tasks/s",
    `${SIZE.enqueue} awaited enqueue() calls, one transaction each`,
  );
  for (let run = 0; run < RUNS; run++) {
    const ms = await withRatchet([noop], async (r) => {
      const t0 = performance.now();
      for (let i = 0; i < SIZE.enqueue; i++) await r.enqueue(noop, { i });
      return performance.now() - t0;
    });
    f.samples.push((SIZE.enqueue / ms) * 1000);
  }
}

async function benchEnqueueMany(): Promise<void> {
  const f = record(
    `enqueueMany, ${n(SIZE.enqueue)} in batches of ${n(SIZE.batch)}`,
    "tasks/s",
    `${SIZE.enqueue} tasks via enqueueMany, ${SIZE.batch} per call (one transaction per batch)`,
  );
  for (let run = 0; run < RUNS; run++) {
    const ms = await withRatchet([noop], async (r) => {
      const t0 = performance.now();
      await enqueueBatches(r, noop, SIZE.enqueue, SIZE.batch);
      return performance.now() - t0;
    });
    f.samples.push((SIZE.enqueue / ms) * 1000);
  }
}

async function benchDrain(concurrency: number, prefetch = 0): Promise<void> {
  const f = record(
    `drain ${n(SIZE.drain)} no-op tasks, concurrency ${concurrency}${prefetch ? `, prefetch ${prefetch}` : ""}`,
    "tasks/s",
    `start() on ${SIZE.drain} queued no-op tasks until the settlements of all committed (counted in-process, confirmed by stats())`,
  );
  // What a stats() scan of the drained table costs (a dashboard or a poller pays this per call).
  const poll =
    concurrency === 1 && prefetch === 0
      ? record(
          `stats() on ${n(SIZE.drain)} tasks`,
          "ms/call",
          "mean of 20 stats() calls on the drained table (the drains no longer poll it)",
        )
      : undefined;
  for (let run = 0; run < RUNS; run++) {
    const ms = await withRatchet([noop], async (r) => {
      await enqueueBatches(r, noop, SIZE.drain);
      const drained = await timeDrain(r, SIZE.drain, concurrency, prefetch);
      if (poll) {
        const t0 = performance.now();
        for (let i = 0; i < 20; i++) await r.stats();
        poll.samples.push((performance.now() - t0) / 20);
      }
      return drained;
    });
    f.samples.push((SIZE.drain / ms) * 1000);
  }
}

/** The concurrency-16 drain again, every task under a seat: the claim counts seats and parks what does not fit. */
async function benchDrainSeated(concurrency: number): Promise<void> {
  const f = record(
    `drain ${n(SIZE.drain)} no-op tasks with seats (${SEAT_KEYS} keys × limit ${SEAT_LIMIT}), concurrency ${concurrency}`,
    "tasks/s",
    `as the drain above, each task with concurrency { key: i % ${SEAT_KEYS}, limit ${SEAT_LIMIT} }`,
  );
  for (let run = 0; run < RUNS; run++) {
    const ms = await withRatchet([seated], async (r) => {
      await enqueueBatches(r, seated, SIZE.drain);
      return timeDrain(r, SIZE.drain, concurrency);
    });
    f.samples.push((SIZE.drain / ms) * 1000);
  }
}

/**
 * W5: the due drain with many waiting tasks in the same queue, beside a baseline with none: the
 * claim reads the ready index only, so neither future nor dependency-blocked rows should slow it.
 */
async function benchDepth(): Promise<void> {
  const due = QUICK ? 500 : 2_000;
  const waiting = QUICK ? 20_000 : 200_000;
  const base = record(
    `drain ${n(due)} due no-op tasks, nothing waiting (concurrency 16)`,
    "tasks/s",
    "baseline of the next two figures, measured the same way",
  );
  const future = record(
    `drain ${n(due)} due no-op tasks while ${n(waiting)} wait for a future time (concurrency 16)`,
    "tasks/s",
    `${waiting} tasks with delayMs 1 day in the same queue (enqueued untimed), then ${due} due no-ops drained`,
  );
  const blocked = record(
    `drain ${n(due)} due no-op tasks while ${n(waiting)} wait on an unfinished predecessor (concurrency 16)`,
    "tasks/s",
    `${waiting} tasks whose needs name one task due in 1 day (enqueued untimed), then ${due} due no-ops drained`,
  );
  for (let run = 0; run < RUNS; run++) {
    base.samples.push(
      await withRatchet([noop], async (r) => {
        await enqueueBatches(r, noop, due);
        checkpoint(r);
        return (due / (await timeDrain(r, due, 16))) * 1000;
      }),
    );
    future.samples.push(
      await withRatchet([noop], async (r) => {
        for (let i = 0; i < waiting; i += 10_000)
          await r.enqueueMany(
            Array.from({ length: 10_000 }, (_, k) => ({
              task: noop,
              input: { i: i + k },
              delayMs: 86_400_000,
            })),
          );
        await enqueueBatches(r, noop, due);
        checkpoint(r);
        return (due / (await timeDrain(r, due, 16))) * 1000;
      }),
    );
    blocked.samples.push(
      await withRatchet([noop], async (r) => {
        const blocker = await r.enqueue(noop, { i: -1 }, { delayMs: 86_400_000 });
        for (let i = 0; i < waiting; i += 10_000)
          await r.enqueueMany(
            Array.from({ length: 10_000 }, (_, k) => ({ task: noop, input: { i: i + k }, needs: [blocker] })),
          );
        await enqueueBatches(r, noop, due);
        checkpoint(r);
        return (due / (await timeDrain(r, due, 16))) * 1000;
      }),
    );
  }
}

async function benchSteps(): Promise<void> {
  const total = SIZE.stepTasks * SIZE.stepsPerTask;
  const label = `${n(SIZE.stepTasks)} tasks × ${SIZE.stepsPerTask} steps, concurrency 16`;
  const rate = record(
    `ctx.step throughput (${label})`,
    "steps/s",
    `${total} steps / wall time of draining ${SIZE.stepTasks} tasks of ${SIZE.stepsPerTask} steps`,
  );
  const wall = record(
    "ctx.step wall time per step",
    "µs/step",
    "wall time of the step drain / number of steps (includes claim and settle of the tasks)",
  );
  const net = record(
    "ctx.step net cost per step",
    "µs/step",
    `(step drain − drain of ${SIZE.stepTasks} no-step tasks, same run) / number of steps`,
  );
  for (let run = 0; run < RUNS; run++) {
    const stepMs = await withRatchet([steps10], async (r) => {
      await enqueueBatches(r, steps10, SIZE.stepTasks);
      return timeDrain(r, SIZE.stepTasks, 16);
    });
    const baseMs = await withRatchet([noop], async (r) => {
      await enqueueBatches(r, noop, SIZE.stepTasks);
      return timeDrain(r, SIZE.stepTasks, 16);
    });
    rate.samples.push((total / stepMs) * 1000);
    wall.samples.push((stepMs * 1000) / total);
    net.samples.push(((stepMs - baseMs) * 1000) / total);
  }
}

async function benchRawCommits(): Promise<void> {
  const f = record(
    "raw SQLite commit rate (1-row INSERT transactions)",
    "commits/s",
    `${SIZE.commits} BEGIN IMMEDIATE; INSERT; COMMIT with better-sqlite3, WAL, synchronous=${SYNCHRONOUS}`,
  );
  for (let run = 0; run < RUNS; run++) {
    const db = freshDb();
    const conn = new Database(db.path);
    try {
      conn.pragma("busy_timeout = 10000");
      conn.pragma("journal_mode = WAL");
      conn.pragma(`synchronous = ${SYNCHRONOUS}`);
      conn.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)");
      const insert = conn.prepare("INSERT INTO t (v) VALUES (?)");
      const tx = conn.transaction((i: number) => insert.run(`{"i":${i}}`));
      const t0 = performance.now();
      for (let i = 0; i < SIZE.commits; i++) tx.immediate(i);
      const ms = performance.now() - t0;
      f.samples.push((SIZE.commits / ms) * 1000);
    } finally {
      conn.close();
      db.cleanup();
    }
  }
}

// ------------------------------------------------------------------- main

function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, "package.json")) && existsSync(join(dir, "bench"))) return dir;
    const up = dirname(dir);
    if (up === dir) return process.cwd();
    dir = up;
  }
}

async function runSqlite(): Promise<void> {
  const started = new Date();
  progress(`ratchet bench (sqlite${QUICK ? ", quick" : ""}): ${RUNS} runs per figure, files in ${BASE_DIR}`);
  const steps: [string, () => Promise<void>][] = [
    ["raw commit rate", benchRawCommits],
    ["enqueue (single)", benchEnqueueSingle],
    ["enqueueMany", benchEnqueueMany],
    ["drain c=1", () => benchDrain(1)],
    ["drain c=16", () => benchDrain(16)],
    // Claims of up to concurrency + 500 once half the buffer is gone (spec §8.7).
    ["drain c=16 prefetch 500", () => benchDrain(16, 500)],
    ["drain c=16 with seats", () => benchDrainSeated(16)],
    ["drain among waiting tasks (W5)", benchDepth],
    ["ctx.step", benchSteps],
  ];
  for (const [name, fn] of steps) {
    const t0 = performance.now();
    await fn();
    progress(`  ${name}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  }

  // Figures in the order they ran, except the poll cost, which is context for the drains and goes last.
  const ordered = [
    ...figures.filter((f) => f.unit !== "ms/call"),
    ...figures.filter((f) => f.unit === "ms/call"),
  ];
  const rows = ordered.map((f) => ({
    figure: f.figure,
    unit: f.unit,
    median: median(f.samples),
    min: Math.min(...f.samples),
    max: Math.max(...f.samples),
    samples: f.samples,
    detail: f.detail,
  }));

  const cpu = cpus();
  const env = {
    node: process.version,
    platform: `${platform()} ${release()} ${arch()}`,
    cpu: `${cpu[0]?.model ?? "unknown"} × ${cpu.length}`,
    dbDir: BASE_DIR,
  };
  const lines = [
    `Ratchet benchmark — SQLite (WAL, synchronous=${SYNCHRONOUS})${QUICK ? " — QUICK" : ""}`,
    `${started.toISOString()} · Node ${env.node} · ${env.platform} · ${env.cpu} · ${RUNS} runs per figure`,
    "",
    "| figure | median | min–max | unit |",
    "| --- | ---: | ---: | --- |",
    ...rows.map((r) => `| ${r.figure} | ${fmt(r.median)} | ${fmt(r.min)}–${fmt(r.max)} | ${r.unit} |`),
  ];
  process.stdout.write(`${lines.join("\n")}\n`);

  const outDir = join(packageRoot(), "bench", "results");
  mkdirSync(outDir, { recursive: true });
  const out = join(outDir, QUICK ? "latest-sqlite-quick.json" : "latest-sqlite.json");
  const json = {
    backend: "sqlite",
    synchronous: SYNCHRONOUS,
    quick: QUICK,
    runs: RUNS,
    sizes: SIZE,
    startedAt: started.toISOString(),
    env,
    figures: rows,
  };
  writeFileSync(out, `${JSON.stringify(json, null, 2)}\n`);
  progress(`wrote ${out}`);
}

async function main(): Promise<void> {
  if (!args["pg-only"]) await runSqlite();
  const required = args.pg || args["pg-only"];
  const problem = await pgProblem(PG_URL);
  if (problem !== null) {
    if (required) {
      process.stderr.write(`PostgreSQL figures need a server, but ${PG_URL} is unreachable: ${problem}\n`);
      process.exit(1);
    }
    progress(
      `PostgreSQL figures not run: no server at ${PG_URL} (${problem}); pass --pg to make this an error`,
    );
    if (!args["pg-only"]) await runStreams(["sqlite"]);
    if (!args["pg-only"]) await runConversations(["sqlite"]);
    if (!args["pg-only"]) await runModels(["sqlite"]);
    if (!args["pg-only"]) await runTools(["sqlite"]);
    if (!args["pg-only"]) await runOutbox(["sqlite"]);
    return;
  }
  if (!args["pg-only"]) process.stdout.write("\n");
  await runPg({ url: PG_URL, quick: QUICK, runs: RUNS, root: packageRoot() });
  await runStreams(args["pg-only"] ? ["pg"] : ["sqlite", "pg"]);
  await runConversations(args["pg-only"] ? ["pg"] : ["sqlite", "pg"]);
  await runModels(args["pg-only"] ? ["pg"] : ["sqlite", "pg"]);
  await runTools(args["pg-only"] ? ["pg"] : ["sqlite", "pg"]);
  await runOutbox(args["pg-only"] ? ["pg"] : ["sqlite", "pg"]);
}

/** Prints a layer's table under its title and writes its figures to bench/results/latest-NAME(-quick).json. */
function report(title: string, table: string, name: string, figs: unknown): void {
  process.stdout.write(`\n${title}\n\n${table}\n`);
  const out = join(packageRoot(), "bench", "results", `latest-${name}${QUICK ? "-quick" : ""}.json`);
  writeFileSync(out, `${JSON.stringify({ runs: RUNS, quick: QUICK, figures: figs }, null, 2)}\n`);
  progress(`wrote ${out}`);
}

/** The outbox figures (bench/outbox.ts): what a task's opt-in fact costs, and a sender's rate. */
async function runOutbox(stores: ("sqlite" | "pg")[]): Promise<void> {
  const figs = await runOutboxBench({ stores, pgUrl: PG_URL, tasks: QUICK ? 500 : 5_000, runs: RUNS });
  report("The outbox (spec §21)", renderOutboxFigures(figs), "outbox", figs);
}

/** The tool-call and compaction figures (bench/tools.ts), last. */
async function runTools(stores: ("sqlite" | "pg")[]): Promise<void> {
  const figs = await runToolBench({ stores, pgUrl: PG_URL, conversations: QUICK ? 8 : 64, runs: RUNS });
  report("Tool calls and compaction (spec §19)", renderToolFigures(figs), "tools", figs);
}

/** The model turn figures (bench/models.ts), after the conversation figures. */
async function runModels(stores: ("sqlite" | "pg")[]): Promise<void> {
  const figs = await runModelBench({ stores, pgUrl: PG_URL, turns: QUICK ? 200 : 2_000, runs: RUNS });
  report("Model turns (spec §18)", renderModelFigures(figs), "models", figs);
}

/** The durable output stream figures (bench/streams.ts), after the rest. */
async function runStreams(stores: ("sqlite" | "pg")[]): Promise<void> {
  const figs = await runStreamBench({ stores, pgUrl: PG_URL, seconds: QUICK ? 1 : 3, runs: RUNS });
  report("Durable output streams (spec §16)", renderStreamFigures(figs), "streams", figs);
}

/** The conversation figures (bench/conversations.ts), after the stream figures. */
async function runConversations(stores: ("sqlite" | "pg")[]): Promise<void> {
  const figs = await runConversationBench({
    stores,
    pgUrl: PG_URL,
    commits: QUICK ? 200 : 2_000,
    runs: RUNS,
  });
  report("Conversations (spec §17)", renderConversationFigures(figs), "conversations", figs);
}

await main();
