/**
 * An in-process drain, for A/B comparisons of two builds: the numbers quoted beside optimisations in
 * the code ("in-process drains of 60,000 at c16, alternating pairs").
 *
 *   npm run build && node dist/bench/drain.js --store pg [--tasks 60000] [--pairs 5] [--prefetch 500] [--base /abs/other/dist]
 *   node dist/bench/drain.js --store pg --floor [--tasks 60000] [--pairs 3]
 *   node dist/bench/drain.js --store pg --cold --tasks 20000 --pairs 6 [--base …]   # a fresh worker, as in W2
 *   node dist/bench/drain.js --store pg --cold --tasks 20000 --pairs 6 --free-completions
 *
 * Each run is a fresh process: it opens Ratchet (from this build's dist/, or `--base`'s), enqueues
 * `--tasks` no-ops in batches of 1,000 (untimed; PostgreSQL: a fresh schema, VACUUM ANALYZE after),
 * then times `start({ concurrency: 16, prefetch })` until every task has settled (stats() polled
 * every 2 ms once the last handler has run), and reports tasks/s (settled, and at the last handler:
 * the rate of the handlers alone, which runs ahead of the settlements by up to the backlog of spec
 * §8.9), the process's CPU per task, and on PostgreSQL the CPU of every `postgres` process of this
 * machine per task (read from /proc; the server must be local), the WAL written per task
 * (pg_current_wal_lsn before and after), the server's WAL flushes per 1,000 tasks (pg_stat_wal) and, when the server loads pg_stat_statements, the
 * execution time of the drain's statements per task (the extension's counters are reset before each
 * drain) and, with its track_planning on, their planning time per task; and on both stores how busy the machine's cores were (the share of their time not idle,
 * /proc/stat) and the share of the drain's wall time with a claim in flight (near 100 %: the drain
 * waits on its refills). With `--base`, runs alternate base, this build, base, …, `--pairs` times, and the medians
 * of each are printed.
 *
 * `--cold`: the tasks are enqueued by another process first (a run of this script with `--fill`), so
 * the drain's process opens Ratchet and drains as a fresh worker does (the peers harness's W2), its
 * JIT warming up on the drain itself; the clock then also covers `Ratchet.open`. The process CPU is
 * given split into its main thread and its other threads (V8's optimizing compiler and GC helpers).
 *
 * `--free-completions`: runs alternate this build as it is and the same with every batch of plain
 * completions answered "ok" at once, unwritten (the drain then ends at its last handler: read the
 * handlers' rate): how fast the drain could go if completing a task cost nothing, the bound on what
 * any cheaper completion (another table shape, another statement) could give.
 *
 * `--lean`: runs alternate this build as it is and this build's engine on floor-lease-pg's table and
 * statements (bench/floor-sql.ts: a claim and a fenced completion that keep Ratchet's rules for
 * them and nothing else; every other store call still goes to the real store, which has no tasks):
 * what the drain would be if a plain task's two writes cost what the floor's do, the worker's code
 * unchanged. The tasks are the floor's jobs (`{ seq, enqueuedAt }`), claimed in batches of the
 * driver's refills.
 *
 * `--heap [--sites n]`: the bytes the drain's process allocated per task (bench/heap.ts), and its n
 * allocation sites that allocated the most, on stderr; its CPU figures then do not compare.
 *
 * Environment: BENCH_POOL sets the PostgreSQL pool's size (default 10, as in the peers harness);
 * BENCH_CHILD_NODE_ARGS passes node flags to each drain's process (not the fills), e.g.
 * `--cpu-prof --cpu-prof-dir=/tmp/prof` (node refuses --cpu-prof in NODE_OPTIONS).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import type { ClaimedTask, Store } from "../src/store/store.js";
import {
  fillFloorPg,
  floorLeaseClaim,
  floorLeaseComplete,
  floorPgClaim,
  floorPgComplete,
} from "./floor-sql.js";
import { sampleAllocations, siteLines } from "./heap.js";
import { claimedNoop, countingNoop } from "./noop.js";
import { abBuilds, fixedOrDash, machineTicks, median, postgresCpuMs, threadCpuMs } from "./stats.js";

const nodeArgs = (process.env.BENCH_CHILD_NODE_ARGS ?? "").split(" ").filter(Boolean);
const POOL = Number(process.env.BENCH_POOL ?? 10);
if (!Number.isInteger(POOL) || POOL < 1 || POOL > 100)
  throw new Error("BENCH_POOL must be an integer in [1, 100]");
const { values: args } = parseArgs({
  options: {
    store: { type: "string", default: "sqlite" },
    tasks: { type: "string", default: "60000" },
    prefetch: { type: "string", default: "500" },
    pairs: { type: "string", default: "5" },
    base: { type: "string" },
    "pg-url": {
      type: "string",
      default: process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    },
    child: { type: "string" },
    floor: { type: "boolean", default: false },
    cold: { type: "boolean", default: false },
    /** Completions answered "ok" without a statement: the most any completion design could give. */
    "free-completions": { type: "boolean", default: false },
    /** Ratchet's engine on floor-lease-pg's table and statements (see the header). */
    lean: { type: "boolean", default: false },
    /** Bytes allocated in the drain's process per task (bench/heap.ts; its CPU figures then do not compare). */
    heap: { type: "boolean", default: false },
    /** With --heap: print this many allocation sites, most bytes first. */
    sites: { type: "string", default: "0" },
    /** With --child: the file or schema to use (--cold), and whether this run only fills it. */
    target: { type: "string" },
    fill: { type: "boolean", default: false },
  },
});
const N = Number(args.tasks);
const PAIRS = Number(args.pairs);
if (args.store !== "sqlite" && args.store !== "pg") throw new Error("--store is sqlite or pg");
if (!Number.isInteger(N) || N < 1_000 || N > 2_000_000 || N % 1_000 !== 0)
  throw new Error("--tasks must be a multiple of 1,000 in [1000, 2000000]");
if (!Number.isInteger(PAIRS) || PAIRS < 1 || PAIRS > 50) throw new Error("--pairs must be in [1, 50]");
if (args.floor && args.store !== "pg") throw new Error("--floor runs on PostgreSQL only (--store pg)");
if (args.floor && args.base) throw new Error("--floor and --base do not go together");
if (args.floor && args.cold) throw new Error("--floor and --cold do not go together");
if (args["free-completions"] && (args.floor || args.base))
  throw new Error("--free-completions measures this build against itself: no --floor or --base");
const FREE = args["free-completions"];
const LEAN = args.lean;
if (LEAN && (args.store !== "pg" || args.floor || args.base || FREE))
  throw new Error("--lean runs on PostgreSQL (--store pg), alone: no --floor, --base or --free-completions");
const SITES = Number(args.sites);
if (!Number.isInteger(SITES) || SITES < 0 || SITES > 1_000) throw new Error("--sites must be in [0, 1000]");
if (args.heap && args.floor) throw new Error("--heap measures Ratchet, not --floor");

const HERE = dirname(fileURLToPath(import.meta.url));
/** This build's dist/ (this file runs as dist/bench/drain.js). */
const OWN = resolve(HERE, "..");

interface Sample {
  /** Tasks per second until every task has settled (as W2 in the peers harness). */
  rate: number;
  /** The process's CPU per task on its main thread and on its other threads (threadCpuMs). */
  mainCpuUs: number;
  otherCpuUs: number;
  /** Tasks per second until the last handler ran (settlements may still be in flight). */
  handlersRate: number;
  cpuUs: number;
  pgCpuUs: number | null;
  /** WAL the server wrote during the drain, bytes per task (pg_current_wal_lsn before and after). */
  walBytes: number | null;
  /**
   * The server's WAL flushes (pg_stat_wal.wal_sync, every process of the server) per 1,000 tasks: a
   * commit that waits for the disk flushes unless a flush of another commit already covered it.
   */
  walSyncs: number | null;
  /** Execution time of the drain's statements, µs per task (only with pg_stat_statements loaded). */
  stmtUs: number | null;
  /**
   * Planning time of the drain's statements, µs per task, and how many plans per 1,000 tasks (with
   * pg_stat_statements loaded and its track_planning on; else 0). Each connection plans a prepared
   * statement anew for its first five runs, so a cold worker's claims and completions are planned
   * about five times per connection they land on.
   */
  planUs: number | null;
  plans: number | null;
  /** Share of the machine's CPU time (all cores) not idle over the drain, from /proc/stat. */
  machineBusy: number;
  /** Share of the drain's wall time with a claim in flight (the store's claim calls, timed in the drain's process). */
  claimShare: number;
  /** Bytes allocated in the drain's process per task (--heap), else null. */
  bytes: number | null;
}

/** Times `drain` (which resolves when N tasks have run) and reads what it cost. */
async function measure(
  admin: pg.Client | undefined,
  schema: string,
  drain: () => Promise<number>,
): Promise<Sample> {
  const wal = async () =>
    admin ? Number((await admin.query("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn AS b")).rows[0].b) : 0;
  const wal0 = await wal();
  const syncs = async () =>
    admin ? Number((await admin.query("SELECT wal_sync FROM pg_stat_wal")).rows[0].wal_sync) : 0;
  const syncs0 = await syncs();
  // With pg_stat_statements loaded on the server, the statements' own execution time too.
  const stmts = admin
    ? await admin.query("SELECT pg_stat_statements_reset()").then(
        () => true,
        () => false,
      )
    : false;
  const pg0 = admin ? postgresCpuMs() : 0;
  const m0 = machineTicks();
  claimClock.reset();
  const stop = args.heap ? await sampleAllocations() : undefined;
  const th0 = threadCpuMs();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const handled = await drain();
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  const th = threadCpuMs();
  const m1 = machineTicks();
  const heap = stop ? await stop() : undefined;
  if (heap && SITES > 0) process.stderr.write(siteLines(heap, N, SITES));
  const pgMs = admin ? postgresCpuMs() - pg0 : null;
  const walBytes = admin ? (await wal()) - wal0 : null;
  const walSyncs = admin ? (await syncs()) - syncs0 : null;
  const stmtRow = stmts
    ? (
        await admin!.query(
          `SELECT coalesce(sum(total_exec_time), 0) AS ms, coalesce(sum(total_plan_time), 0) AS plan_ms,
             coalesce(sum(plans), 0) AS plans FROM pg_stat_statements WHERE query LIKE $1`,
          [`%"${schema}".%`],
        )
      ).rows[0]
    : null;
  /** A pg_stat_statements sum per task (ms → µs per task, or plans per 1,000 tasks). */
  const per = (v: unknown) => (stmtRow ? (Number(v) * 1_000) / N : null);
  return {
    rate: (N / ms) * 1_000,
    handlersRate: (N / (handled - t0)) * 1_000,
    cpuUs: (c.user + c.system) / N,
    mainCpuUs: ((th.main - th0.main) * 1_000) / N,
    otherCpuUs: ((th.other - th0.other) * 1_000) / N,
    pgCpuUs: pgMs === null ? null : (pgMs * 1_000) / N,
    walBytes: walBytes === null ? null : walBytes / N,
    walSyncs: walSyncs === null ? null : (walSyncs * 1_000) / N,
    stmtUs: per(stmtRow?.ms),
    planUs: per(stmtRow?.plan_ms),
    plans: per(stmtRow?.plans),
    machineBusy: 1 - (m1.idle - m0.idle) / Math.max(1, m1.total - m0.total),
    claimShare: claimClock.busyMs() / ms,
    bytes: heap ? heap.bytes / N : null,
  };
}

/**
 * The wall time during which at least one claim is in flight: the drain is claim-bound when this
 * is near 1 (each refill starts as soon as the last one returns, and the buffer runs dry meanwhile).
 */
const claimClock = (() => {
  let inFlight = 0;
  let since = 0;
  let busy = 0;
  return {
    reset() {
      busy = 0;
      since = performance.now();
    },
    async time<T>(p: () => Promise<T>): Promise<T> {
      if (inFlight++ === 0) since = performance.now();
      try {
        return await p();
      } finally {
        if (--inFlight === 0) busy += performance.now() - since;
      }
    },
    busyMs: () => busy + (inFlight > 0 ? performance.now() - since : 0),
  };
})();

/**
 * One run in this process: fill (enqueue N untimed) and drain the store. With `target` (--cold),
 * only one of the two: `fill` enqueues into the target and returns nothing; otherwise the target is
 * already filled and the clock covers opening Ratchet too, as a fresh worker's start.
 */
async function child(dist: string, target?: string, fill = false): Promise<Sample | undefined> {
  const { defineTask, Ratchet, silentLogger }: typeof import("../src/index.js") = await import(
    pathToFileURL(join(dist, "src/index.js")).href
  );
  const { task: noop, finished } = countingNoop(defineTask, N);
  const common = { tasks: [noop], logger: silentLogger, pollIntervalMs: 20, maxDepth: 2_000_000 };
  const schema = target && args.store === "pg" ? target : `drain_${process.pid}`;
  const dir = target ? "" : mkdtempSync(join(tmpdir(), "ratchet-drain-"));
  const file = target && args.store === "sqlite" ? target : join(dir, "drain.db");
  const admin = args.store === "pg" ? new pg.Client(args["pg-url"]) : undefined;
  const open = () =>
    args.store === "pg"
      ? Ratchet.open({ store: args["pg-url"], postgres: { schema, poolMax: POOL }, ...common })
      : Ratchet.open({ store: `sqlite:${file}`, ...common });
  try {
    let r = target && !fill ? undefined : await open();
    if (r && LEAN) {
      const c = new pg.Client(args["pg-url"]);
      await c.connect();
      await fillFloorPg(c, `${schema}_lean`, N, "lease").finally(() => c.end());
    } else if (r) {
      for (let i = 0; i < N; i += 1_000)
        await r.enqueueMany(Array.from({ length: 1_000 }, (_, j) => ({ task: noop, input: { seq: i + j } })));
    }
    if (admin) {
      await admin.connect();
      if (r) await admin.query(`VACUUM ANALYZE "${schema}".ratchet_tasks`);
    }
    if (fill) {
      await r!.close();
      return undefined;
    }
    const live = async () => {
      let n = 0;
      for (const q of await r!.stats())
        for (const [status, k] of Object.entries(q.byStatus)) if (status !== "terminal") n += k ?? 0;
      return n;
    };
    let lean: Lean | undefined;
    const sample = await measure(admin, schema, async () => {
      r ??= await open();
      const store = r.store as { claim: Store["claim"]; settle: Store["settle"] };
      if (LEAN) lean = await leanStore(store, `"${schema}_lean".floor_jobs`);
      const claim = store.claim.bind(store);
      store.claim = (req) => claimClock.time(() => claim(req));
      if (FREE) {
        // A batch of plain completions (every task of the drain) is answered at once, unwritten;
        // anything else (none here) still goes to the store.
        const settle = store.settle.bind(store);
        store.settle = async (items) =>
          items.every((s) => s.kind === "complete" && s.fence.mode !== "abort")
            ? items.map(() => "ok" as const)
            : settle(items);
      }
      await r.start({ concurrency: 16, prefetch: Number(args.prefetch) });
      await finished;
      const handled = performance.now();
      // Settled: the last settlements commit after the last handler returns (with free completions
      // nothing is written: the drain ends at the last handler, and the tasks stay running).
      if (lean) await lean.allCompleted;
      else while (!FREE && (await live()) > 0) await new Promise((res) => setTimeout(res, 2));
      return handled;
    });
    await r!.close();
    await lean?.close();
    return sample;
  } finally {
    if (admin) {
      if (!target) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
      if (!target && LEAN)
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}_lean" CASCADE`).catch(() => {});
      await admin.end().catch(() => {});
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
}

interface Lean {
  /** Settles once every job of the floor's table has been completed. */
  allCompleted: Promise<void>;
  close(): Promise<void>;
}

/**
 * `--lean`: the store's claim and settle replaced by floor-lease-pg's statements on table `t`, on a
 * pool of their own (the driver claims one refill at a time; settle batches may overlap). Claimed
 * jobs become ClaimedTasks of the no-op as the fast claim would make them.
 */
async function leanStore(
  store: { claim: Store["claim"]; settle: Store["settle"] },
  t: string,
): Promise<Lean> {
  const pool = new pg.Pool({ connectionString: args["pg-url"], max: POOL });
  let completed = 0;
  let all!: () => void;
  const allCompleted = new Promise<void>((res) => {
    all = res;
  });
  const claimText = new Map<number, string>();
  store.claim = async (req) => {
    let text = claimText.get(req.limit);
    if (!text) {
      // Its rows as one JSON text, as the store's fast claim returns them (sql.ts claimRowText):
      // node-postgres parsing a DataRow per job would charge the worker what the store avoids.
      text = `WITH u AS (${floorLeaseClaim(t, req.limit)})
        SELECT '[' || string_agg(concat('[', id, ',', epoch, ',', payload, ']'), ',' ORDER BY id) || ']' AS rows FROM u`;
      claimText.set(req.limit, text);
    }
    const now = Date.now();
    const res = await pool.query({ name: `lean-claim-${req.limit}`, text, values: [req.workerId, now] });
    const out: ClaimedTask[] = [];
    const rows = (res.rows[0] as { rows: string | null }).rows;
    for (const [id, epoch, input] of rows === null ? [] : (JSON.parse(rows) as [number, number, unknown][]))
      out.push(claimedNoop(id, epoch, input, now, req));
    return out;
  };
  store.settle = async (items) => {
    const done = items
      .map((s) => ({ id: s.fence.taskId, epoch: s.fence.token, at: s.fence.claimedAt }))
      .sort((a, b) => a.id - b.id);
    const res = await pool.query({
      name: "lean-complete",
      text: floorLeaseComplete(t),
      values: [done.map((x) => x.id), done.map((x) => x.epoch), Date.now(), done.map((x) => x.at)],
    });
    if (res.rowCount !== items.length) throw new Error(`lean: completed ${res.rowCount} of ${items.length}`);
    completed += items.length;
    if (completed === N) all();
    return items.map(() => "ok" as const);
  };
  return { allCompleted, close: () => pool.end() };
}

/**
 * `--floor`: the statements of floor-pg (bench/peers/floor.ts) in this process, measured like a drain:
 * a four-column table, claims of 500 (`FOR UPDATE SKIP LOCKED … RETURNING`) on one connection, each
 * batch completed by one `UPDATE` on a second connection while the next claim runs. What the store
 * itself asks of a job that keeps its row, without the harness's worker start-up.
 */
async function floorChild(): Promise<Sample> {
  const schema = `drain_floor_${process.pid}`;
  const t = `"${schema}".floor_jobs`;
  const url = args["pg-url"]!;
  const admin = new pg.Client(url);
  const claimer = new pg.Client(url);
  const completer = new pg.Client(url);
  await Promise.all([admin.connect(), claimer.connect(), completer.connect()]);
  try {
    await fillFloorPg(admin, schema, N);
    return await measure(admin, schema, async () => {
      let done = 0;
      let completing: Promise<unknown> = Promise.resolve();
      while (done < N) {
        const res = await claimClock.time(() =>
          claimer.query({
            name: "floor-claim",
            text: floorPgClaim(t, 500),
            values: ["drain"],
          }),
        );
        const rows = res.rows as { id: string; payload: string }[];
        for (const row of rows) JSON.parse(row.payload);
        done += rows.length;
        await completing;
        completing = completer.query({
          name: "floor-complete",
          text: floorPgComplete(t),
          values: [rows.map((row) => row.id)],
        });
      }
      const handled = performance.now();
      await completing;
      return handled;
    });
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
    await Promise.all([admin.end(), claimer.end(), completer.end()]).catch(() => {});
  }
}

if (args.child) {
  const sample =
    args.child === "floor" ? await floorChild() : await child(args.child, args.target, args.fill);
  if (sample) process.stdout.write(`${JSON.stringify(sample)}\n`);
  process.exit(0);
}

// What alternates: two builds (--base), or this build as it is and with --free-completions or
// --lean, each entry with the flag its drain's process takes.
const builds: [name: string, dist: string, flag?: string][] = args.floor
  ? [["floor", "floor"]]
  : FREE
    ? [
        ["this", OWN],
        ["free completions", OWN, "--free-completions"],
      ]
    : LEAN
      ? [
          ["this", OWN],
          ["engine on the floor's table", OWN, "--lean"],
        ]
      : abBuilds(args.base, OWN);
const samples: Record<string, Sample[]> = Object.fromEntries(builds.map(([k]) => [k, []]));
const f = fixedOrDash;
for (let i = 0; i < PAIRS; i++) {
  for (const [name, dist, flag] of builds) {
    const forwarded = [
      "--store",
      args.store!,
      "--tasks",
      String(N),
      "--prefetch",
      args.prefetch!,
      "--pg-url",
      args["pg-url"]!,
      ...(flag ? [flag] : []),
      ...(args.heap ? ["--heap", "--sites", String(SITES)] : []),
    ];
    // The drain's own process (not a fill) takes BENCH_CHILD_NODE_ARGS (see the header).
    const run = (extra: string[]) => {
      const childNodeArgs = extra.includes("--fill") ? [] : nodeArgs;
      const res = spawnSync(
        process.execPath,
        [...childNodeArgs, fileURLToPath(import.meta.url), ...forwarded, "--child", dist, ...extra],
        { encoding: "utf8" },
      );
      if (res.status !== 0) throw new Error(`${name} run failed: ${res.stderr}`);
      if (args.heap && !extra.includes("--fill")) process.stderr.write(res.stderr);
      return res.stdout;
    };
    let out: string;
    if (args.cold) {
      // Filled by one process of this build, drained by another.
      const dir = mkdtempSync(join(tmpdir(), "ratchet-drain-cold-"));
      const target = args.store === "pg" ? `drain_cold_${process.pid}_${i}` : join(dir, "drain.db");
      try {
        run(["--target", target, "--fill"]);
        out = run(["--target", target]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
        if (args.store === "pg") {
          const admin = new pg.Client(args["pg-url"]);
          await admin.connect();
          await admin.query(`DROP SCHEMA IF EXISTS "${target}" CASCADE`).catch(() => {});
          await admin.query(`DROP SCHEMA IF EXISTS "${target}_lean" CASCADE`).catch(() => {});
          await admin.end();
        }
      }
    } else out = run([]);
    const s = JSON.parse(out.trim().split("\n").pop()!) as Sample;
    samples[name]!.push(s);
    console.error(
      `${name} ${f(s.rate, 0)} tasks/s settled (handlers ${f(s.handlersRate, 0)}/s), ${f(s.cpuUs)} µs CPU/task (main thread ${f(s.mainCpuUs)}, others ${f(s.otherCpuUs)}), postgres ${f(s.pgCpuUs)} µs/task, statements ${f(s.stmtUs)} µs/task (planning ${f(s.planUs)}, ${f(s.plans)} plans per 1,000 tasks), WAL ${f(s.walBytes, 0)} B/task, ${f(s.walSyncs)} WAL flushes per 1,000 tasks, machine busy ${f(s.machineBusy * 100, 0)} %, a claim in flight ${f(s.claimShare * 100, 0)} % of the time${s.bytes === null ? "" : `, ${f(s.bytes, 0)} B allocated/task`}`,
    );
  }
}
console.log(
  `\nIn-process drain, ${args.store}, ${N} no-ops, c16, prefetch ${args.prefetch}${args.cold ? ", cold (a fresh worker process: open and drain)" : ""}; medians of ${PAIRS} run(s)\n`,
);
console.log(
  "| build | tasks/s, settled | tasks/s, handlers | process CPU µs/task | main thread | other threads | postgres CPU µs/task | statements µs/task | planning µs/task | WAL B/task | WAL flushes /1k tasks | machine busy % | claim in flight % |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
);
for (const [name, dist] of builds) {
  const s = samples[name]!;
  const pgs = s.map((x) => x.pgCpuUs).filter((x): x is number => x !== null);
  const wals = s.map((x) => x.walBytes).filter((x): x is number => x !== null);
  const flushes = s.map((x) => x.walSyncs).filter((x): x is number => x !== null);
  const stmts = s.map((x) => x.stmtUs).filter((x): x is number => x !== null);
  const plans = s.map((x) => x.planUs).filter((x): x is number => x !== null);
  console.log(
    `| ${name} (${dist}) | ${f(median(s.map((x) => x.rate)), 0)} | ${f(median(s.map((x) => x.handlersRate)), 0)} | ${f(median(s.map((x) => x.cpuUs)))} | ${f(median(s.map((x) => x.mainCpuUs)))} | ${f(median(s.map((x) => x.otherCpuUs)))} | ${f(pgs.length ? median(pgs) : null)} | ${f(stmts.length ? median(stmts) : null)} | ${f(plans.length ? median(plans) : null)} | ${f(wals.length ? median(wals) : null, 0)} | ${f(flushes.length ? median(flushes) : null)} | ${f(median(s.map((x) => x.machineBusy * 100)), 0)} | ${f(median(s.map((x) => x.claimShare * 100)), 0)} |`,
  );
}
