/**
 * PostgreSQL figures of the benchmark runner (see bench/README.md). Called by
 * bench/run.ts with `--pg` / `--pg-only`, or by default when the server is
 * reachable.
 *
 * Every measurement gets a fresh schema `rt_bench_<random>` (dropped after),
 * except the "200,000 waiting" figure and its baseline, whose runs share one
 * schema per figure (so the 200,000 future tasks are enqueued once, and the
 * baseline is measured the same way). Workers are separate processes: the
 * test fixture test/fixtures/worker.ts run under `node --import tsx`, each
 * with concurrency 16, a pool of 10 and pollIntervalMs 20 (500, the engine
 * default, for the latency figure). The runner process enqueues and watches.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { arch, cpus, platform, release, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import pg from "pg";
import { Ratchet, silentLogger } from "../src/index.js";
import { BENCH_SEAT_KEYS, BENCH_SEAT_LIMIT, makePgTasks, PG_TASK } from "../test/fixtures/pg-tasks.js";
import { fmt, median, n, percentile, progress } from "./stats.js";

export interface PgBenchOptions {
  url: string;
  quick: boolean;
  runs: number;
  /** Package root: where test/fixtures/worker.ts and bench/results live. */
  root: string;
}

interface Figure {
  figure: string;
  unit: string;
  detail: string;
  samples: number[];
}

const CONCURRENCY = 16;
const POOL = 10;
const POLL_MS = 20;
const ENGINE_DEFAULT_POLL_MS = 500;
const WATCH_MS = 20;
const DAY_MS = 86_400_000;

/** Whether a server answers at url; the reason when it does not. */
export async function pgProblem(url: string): Promise<string | null> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  c.on("error", () => {});
  try {
    await c.connect();
    await c.query("SELECT 1");
    return null;
  } catch (e) {
    return (e as Error).message || String(e);
  } finally {
    await c.end().catch(() => {});
  }
}

/** A worker process (the test fixture) on one schema. */
class Worker {
  readonly child: ChildProcessWithoutNullStreams;
  readonly types: string[] = [];
  stderr = "";
  readonly exited: Promise<number | null>;
  #listeners = new Set<() => void>();

  constructor(root: string, args: string[]) {
    this.child = spawn(
      process.execPath,
      ["--import", "tsx", join(root, "test/fixtures/worker.ts"), ...args],
      {
        cwd: root,
        stdio: ["pipe", "pipe", "pipe"],
      },
    );
    createInterface({ input: this.child.stdout }).on("line", (line) => {
      try {
        this.types.push(String((JSON.parse(line) as { type: unknown }).type));
      } catch {
        this.stderr += `(stdout) ${line}\n`;
      }
      for (const l of [...this.#listeners]) l();
    });
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (d: string) => {
      this.stderr += d;
    });
    this.child.stdin.on("error", () => {});
    this.exited = new Promise((res) =>
      this.child.on("exit", (code) => {
        res(code);
        for (const l of [...this.#listeners]) l();
      }),
    );
  }

  waitFor(type: string, timeoutMs = 60_000): Promise<void> {
    return new Promise((res, rej) => {
      const timer = setTimeout(
        () => done(new Error(`worker: no "${type}" in ${timeoutMs} ms\n${this.stderr}`)),
        timeoutMs,
      );
      const check = () => {
        if (this.types.includes(type)) done();
        else if (this.child.exitCode !== null || this.child.signalCode !== null)
          done(new Error(`worker exited before "${type}"\n${this.stderr}`));
      };
      const done = (err?: Error) => {
        clearTimeout(timer);
        this.#listeners.delete(check);
        if (err) rej(err);
        else res();
      };
      this.#listeners.add(check);
      check();
    });
  }

  send(cmd: "go" | "stop"): void {
    this.child.stdin.write(`${cmd}\n`);
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  async stop(): Promise<void> {
    if (!this.alive) return;
    this.send("stop");
    await this.waitFor("closed");
    const code = await this.exited;
    if (code !== 0) throw new Error(`worker exited ${code}\n${this.stderr}`);
  }

  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
  }
}

/**
 * One schema's worth of bench state: the runner's Ratchet (enqueues), a
 * pg.Client for the completion watch, worker processes, a temp dir for their
 * ledgers. close() stops or kills the workers and drops the schema.
 */
class Scene {
  readonly schema = `rt_bench_${randomBytes(5).toString("hex")}`;
  readonly dir = mkdtempSync(join(tmpdir(), "ratchet-pg-bench-"));
  readonly workers: Worker[] = [];
  r!: Ratchet;
  admin!: pg.Client;

  constructor(readonly o: PgBenchOptions) {}

  async open(): Promise<this> {
    this.admin = new pg.Client({ connectionString: this.o.url });
    this.admin.on("error", () => {});
    await this.admin.connect();
    this.r = await Ratchet.open({
      store: this.o.url,
      postgres: { schema: this.schema, poolMax: POOL },
      tasks: makePgTasks({ ledgerFd: -1, stepsFd: -1, orderFd: -1, maxMs: 60_000 }),
      logger: silentLogger,
    });
    return this;
  }

  /** Spawns `count` worker processes and waits until each has opened the store (not started). */
  async spawn(count: number, pollMs = POLL_MS, prefetch = 0): Promise<Worker[]> {
    const ws = Array.from(
      { length: count },
      (_, i) =>
        new Worker(this.o.root, [
          "--store",
          this.o.url,
          "--schema",
          this.schema,
          "--ledger",
          join(this.dir, `ledger-${this.workers.length + i}.txt`),
          "--concurrency",
          String(CONCURRENCY),
          "--pool",
          String(POOL),
          "--poll",
          String(pollMs),
          "--prefetch",
          String(prefetch),
        ]),
    );
    this.workers.push(...ws);
    await Promise.all(ws.map((w) => w.waitFor("ready")));
    return ws;
  }

  /** Live (non-terminal) tasks, from the maintained per-queue counters: cheap at any table size. */
  async live(): Promise<number> {
    const res = await this.admin.query(
      `SELECT coalesce(sum(live), 0)::bigint AS n FROM "${this.schema}".ratchet_queue_counts`,
    );
    return Number(res.rows[0].n);
  }

  /** Polls live() every WATCH_MS until it is at most `target`; returns performance.now() then. */
  async until(target: number, what: string): Promise<number> {
    const limit = performance.now() + 600_000;
    for (;;) {
      if ((await this.live()) <= target) return performance.now();
      for (const w of this.workers)
        if (!w.alive && !w.types.includes("closed"))
          throw new Error(`a worker exited during ${what}\n${w.stderr}`);
      if (performance.now() > limit) throw new Error(`${what} did not finish within 10 minutes`);
      await new Promise((res) => setTimeout(res, WATCH_MS));
    }
  }

  async enqueueBatches(
    task: string,
    count: number,
    batch: number,
    input: (i: number) => unknown = () => ({}),
    extra: { delayMs?: number } = {},
  ) {
    for (let i = 0; i < count; i += batch) {
      const size = Math.min(batch, count - i);
      await this.r.enqueueMany(
        Array.from({ length: size }, (_, k) => ({ task, input: input(i + k), ...extra })),
      );
    }
  }

  async completed(): Promise<number> {
    let sum = 0;
    for (const q of await this.r.stats()) sum += q.byOutcome.completed ?? 0;
    return sum;
  }

  ledger(i: number): string[] {
    return readFileSync(join(this.dir, `ledger-${i}.txt`), "utf8")
      .split("\n")
      .filter(Boolean);
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop().catch(() => w.kill())));
    await this.r?.close().catch(() => {});
    await this.admin?.query(`DROP SCHEMA IF EXISTS "${this.schema}" CASCADE`).catch(() => {});
    await this.admin?.end().catch(() => {});
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function withScene<T>(o: PgBenchOptions, fn: (s: Scene) => Promise<T>): Promise<T> {
  const s = new Scene(o);
  try {
    await s.open();
    return await fn(s);
  } finally {
    await s.close();
  }
}

export async function runPg(o: PgBenchOptions): Promise<void> {
  const started = new Date();
  const SIZE = {
    enqueue: o.quick ? 2_000 : 20_000,
    batch: o.quick ? 100 : 1_000,
    drain: o.quick ? 2_000 : 20_000,
    latencyRate: 200,
    latencySeconds: o.quick ? 2 : 10,
    waiting: o.quick ? 20_000 : 200_000,
    waitingBatch: 10_000,
    due: o.quick ? 500 : 2_000,
  };
  const figures: Figure[] = [];
  const record = (figure: string, unit: string, detail: string): Figure => {
    const f: Figure = { figure, unit, detail, samples: [] };
    figures.push(f);
    return f;
  };

  async function enqueueSingle(): Promise<void> {
    const f = record(
      `enqueue, ${n(SIZE.enqueue)} single calls`,
      "tasks/s",
      `${SIZE.enqueue} awaited enqueue() calls from one process, one transaction each`,
    );
    for (let run = 0; run < o.runs; run++) {
      const ms = await withScene(o, async (s) => {
        const t0 = performance.now();
        for (let i = 0; i < SIZE.enqueue; i++) await s.r.enqueue(PG_TASK.benchNoop, { i });
        return performance.now() - t0;
      });
      f.samples.push((SIZE.enqueue / ms) * 1000);
    }
  }

  async function enqueueMany(): Promise<void> {
    const f = record(
      `enqueueMany, ${n(SIZE.enqueue)} in batches of ${n(SIZE.batch)}`,
      "tasks/s",
      `${SIZE.enqueue} tasks via enqueueMany, ${SIZE.batch} per call (one transaction per batch)`,
    );
    for (let run = 0; run < o.runs; run++) {
      const ms = await withScene(o, async (s) => {
        const t0 = performance.now();
        await s.enqueueBatches(PG_TASK.benchNoop, SIZE.enqueue, SIZE.batch, (i) => ({ i }));
        return performance.now() - t0;
      });
      f.samples.push((SIZE.enqueue / ms) * 1000);
    }
  }

  /** Spawns `procs` workers, enqueues `count` due no-ops (untimed), then times go → all settled. */
  async function timedDrain(
    s: Scene,
    procs: number,
    count: number,
    task: string = PG_TASK.benchNoop,
    prefetch = 0,
  ): Promise<number> {
    const ws = await s.spawn(procs, POLL_MS, prefetch);
    const base = await s.live();
    await s.enqueueBatches(task, count, 1_000, (i) => ({ i }));
    const t0 = performance.now();
    for (const w of ws) w.send("go");
    const t1 = await s.until(base, `a drain of ${count}`);
    await Promise.all(ws.map((w) => w.stop()));
    return t1 - t0;
  }

  async function drain(procs: number, prefetch = 0): Promise<void> {
    const f = record(
      `drain ${n(SIZE.drain)} no-op tasks, ${procs} worker process${procs > 1 ? "es" : ""} × concurrency ${CONCURRENCY}${prefetch ? `, prefetch ${prefetch}` : ""}`,
      "tasks/s",
      `${procs} worker process(es) (concurrency ${CONCURRENCY}, prefetch ${prefetch}, pool ${POOL}) on ${SIZE.drain} queued no-op tasks; from "go" until the live counter is 0 (watched every ${WATCH_MS} ms)`,
    );
    for (let run = 0; run < o.runs; run++) {
      const ms = await withScene(o, async (s) => {
        const ms = await timedDrain(s, procs, SIZE.drain, PG_TASK.benchNoop, prefetch);
        const done = await s.completed();
        if (done !== SIZE.drain) throw new Error(`drain: ${done} of ${SIZE.drain} completed`);
        return ms;
      });
      f.samples.push((SIZE.drain / ms) * 1000);
    }
  }

  /** W2 with seats (spec §14.9): the same drain when every task takes a seat of 64 keys × limit 2. */
  async function drainSeated(procs: number): Promise<void> {
    const f = record(
      `drain ${n(SIZE.drain)} no-op tasks with seats (${BENCH_SEAT_KEYS} keys × limit ${BENCH_SEAT_LIMIT}), ${procs} worker process${procs > 1 ? "es" : ""} × concurrency ${CONCURRENCY}`,
      "tasks/s",
      `as the drain above, but each task has concurrency { key: i % ${BENCH_SEAT_KEYS}, limit ${BENCH_SEAT_LIMIT} }: every claim counts its seat and parks what does not fit`,
    );
    for (let run = 0; run < o.runs; run++) {
      const ms = await withScene(o, async (s) => {
        const ms = await timedDrain(s, procs, SIZE.drain, PG_TASK.benchSeated);
        const done = await s.completed();
        if (done !== SIZE.drain) throw new Error(`seated drain: ${done} of ${SIZE.drain} completed`);
        return ms;
      });
      f.samples.push((SIZE.drain / ms) * 1000);
    }
  }

  async function latency(): Promise<void> {
    const count = SIZE.latencyRate * SIZE.latencySeconds;
    const label = `${SIZE.latencyRate}/s for ${SIZE.latencySeconds} s, idle worker process`;
    const detail = `${count} enqueue() calls paced at ${SIZE.latencyRate}/s to one worker process (concurrency ${CONCURRENCY}, pollIntervalMs ${ENGINE_DEFAULT_POLL_MS}); the body records Date.now() − input.enqueuedAt (taken just before enqueue())`;
    const p50 = record(`enqueue-to-start latency p50 (${label})`, "ms", detail);
    const p95 = record(`enqueue-to-start latency p95 (${label})`, "ms", detail);
    const p99 = record(`enqueue-to-start latency p99 (${label})`, "ms", detail);
    const max = record(`enqueue-to-start latency max (${label})`, "ms", detail);
    for (let run = 0; run < o.runs; run++) {
      const lat = await withScene(o, async (s) => {
        const [w] = await s.spawn(1, ENGINE_DEFAULT_POLL_MS);
        w!.send("go");
        await w!.waitFor("started");
        const gap = 1000 / SIZE.latencyRate;
        const t0 = performance.now();
        for (let i = 0; i < count; i++) {
          const wait = t0 + i * gap - performance.now();
          if (wait > 0) await new Promise((res) => setTimeout(res, wait));
          await s.r.enqueue(PG_TASK.benchLatency, { enqueuedAt: Date.now() });
        }
        const paced = performance.now() - t0;
        await s.until(0, "the latency run");
        if (paced > SIZE.latencySeconds * 1000 * 1.1)
          progress(`    (enqueues fell behind the pace: ${Math.round(paced)} ms for ${count})`);
        return s
          .ledger(0)
          .map(Number)
          .sort((a, b) => a - b);
      });
      if (lat.length !== count) throw new Error(`latency: ${lat.length} of ${count} bodies recorded`);
      p50.samples.push(percentile(lat, 50));
      p95.samples.push(percentile(lat, 95));
      p99.samples.push(percentile(lat, 99));
      max.samples.push(lat.at(-1)!);
    }
  }

  async function dueAmongWaiting(): Promise<void> {
    const baseline = record(
      `drain ${n(SIZE.due)} due no-op tasks, empty queue otherwise (1 process × ${CONCURRENCY})`,
      "tasks/s",
      `baseline for the next figure, measured the same way: one schema per figure, per run ${SIZE.due} due no-ops drained by a new worker process, no waiting tasks`,
    );
    await withScene(o, async (s) => {
      for (let run = 0; run < o.runs; run++) {
        const ms = await timedDrain(s, 1, SIZE.due);
        baseline.samples.push((SIZE.due / ms) * 1000);
      }
    });
    const bulk = record(
      `enqueueMany, ${n(SIZE.waiting)} future tasks in batches of ${n(SIZE.waitingBatch)}`,
      "tasks/s",
      `setup of the next figure: ${SIZE.waiting} tasks with delayMs 1 day via enqueueMany, ${SIZE.waitingBatch} per call`,
    );
    const f = record(
      `drain ${n(SIZE.due)} due no-op tasks while ${n(SIZE.waiting)} wait for a future time, same queue (1 process × ${CONCURRENCY})`,
      "tasks/s",
      `one schema per figure: ${SIZE.waiting} waiting tasks (runAfter +1 day) enqueued once, then per run ${SIZE.due} due no-ops drained by a new worker process`,
    );
    await withScene(o, async (s) => {
      const t0 = performance.now();
      await s.enqueueBatches(PG_TASK.benchNoop, SIZE.waiting, SIZE.waitingBatch, (i) => ({ i }), {
        delayMs: DAY_MS,
      });
      bulk.samples.push((SIZE.waiting / (performance.now() - t0)) * 1000);
      // The housekeeping after a bulk insert, untimed (as bench/peers/compare.ts does for every engine):
      // the figure asks what waiting tasks cost a drain, not what the insert's aftermath costs.
      for (const t of ["ratchet_tasks", "ratchet_queue_counts"])
        await s.admin.query(`VACUUM (ANALYZE) "${s.schema}"."${t}"`);
      for (let run = 0; run < o.runs; run++) {
        const ms = await timedDrain(s, 1, SIZE.due);
        f.samples.push((SIZE.due / ms) * 1000);
      }
      const waiting = await s.r.stats();
      const w = waiting[0]?.byStatus.waiting ?? 0;
      if (w !== SIZE.waiting) throw new Error(`expected ${SIZE.waiting} waiting tasks, found ${w}`);
    });
  }

  progress(
    `ratchet bench (postgres${o.quick ? ", quick" : ""}): ${o.runs} runs per figure, ${redact(o.url)}`,
  );
  const steps: [string, () => Promise<void>][] = [
    ["enqueue (single)", enqueueSingle],
    ["enqueueMany", enqueueMany],
    ["drain, 1 process", () => drain(1)],
    ["drain, 2 processes", () => drain(2)],
    // Claims of up to concurrency + 500 once half the buffer is gone (spec §8.7).
    ["drain, 1 process, prefetch 500", () => drain(1, 500)],
    ["drain with seats, 1 process", () => drainSeated(1)],
    ["drain, 4 processes", () => drain(4)],
    ["latency", latency],
    ["due among waiting", dueAmongWaiting],
  ];
  for (const [name, fn] of steps) {
    const t0 = performance.now();
    await fn();
    progress(`  ${name}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  }

  const rows = figures.map((f) => ({
    figure: f.figure,
    unit: f.unit,
    median: median(f.samples),
    min: Math.min(...f.samples),
    max: Math.max(...f.samples),
    samples: f.samples,
    detail: f.detail,
  }));
  const server = await serverInfo(o.url);
  const cpu = cpus();
  const env = {
    node: process.version,
    platform: `${platform()} ${release()} ${arch()}`,
    cpu: `${cpu[0]?.model ?? "unknown"} × ${cpu.length}`,
    server,
  };
  const lines = [
    `Ratchet benchmark — PostgreSQL ${server.version} (synchronous_commit=${server.synchronous_commit}, fsync=${server.fsync})${o.quick ? " — QUICK" : ""}`,
    `${started.toISOString()} · Node ${env.node} · ${env.platform} · ${env.cpu} · ${o.runs} runs per figure · server on the same machine`,
    "",
    "| figure | median | min–max | unit |",
    "| --- | ---: | ---: | --- |",
    ...rows.map((r) => `| ${r.figure} | ${fmt(r.median)} | ${fmt(r.min)}–${fmt(r.max)} | ${r.unit} |`),
  ];
  process.stdout.write(`${lines.join("\n")}\n`);

  const outDir = join(o.root, "bench", "results");
  mkdirSync(outDir, { recursive: true });
  const out = join(outDir, o.quick ? "latest-pg-quick.json" : "latest-pg.json");
  const json = {
    backend: "postgres",
    quick: o.quick,
    runs: o.runs,
    sizes: SIZE,
    workers: {
      concurrency: CONCURRENCY,
      pool: POOL,
      pollIntervalMs: POLL_MS,
      latencyPollIntervalMs: ENGINE_DEFAULT_POLL_MS,
    },
    startedAt: started.toISOString(),
    env,
    figures: rows,
  };
  writeFileSync(out, `${JSON.stringify(json, null, 2)}\n`);
  progress(`wrote ${out}`);
}

function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "(postgres url)";
  }
}

async function serverInfo(url: string): Promise<Record<string, string>> {
  const c = new pg.Client({ connectionString: url });
  c.on("error", () => {});
  await c.connect();
  try {
    const info: Record<string, string> = {};
    for (const k of ["server_version", "synchronous_commit", "fsync", "shared_buffers", "max_connections"]) {
      info[k === "server_version" ? "version" : k] = String((await c.query(`SHOW ${k}`)).rows[0][k]);
    }
    return info;
  } finally {
    await c.end().catch(() => {});
  }
}
