/**
 * Where a fresh PostgreSQL worker's server CPU goes, connection by connection (issue 6: what a short
 * drain such as the peers harness's W2 pays besides the rows themselves).
 *
 *   npm run build && node dist/bench/backends.js [--tasks 20000] [--runs 3] [--pg-url postgres://…]
 *
 * Each run fills a fresh schema with `--tasks` no-ops (another process, enqueueMany), then a fresh
 * process opens Ratchet and drains it at concurrency 16 with prefetch 500, as W2's worker does, until
 * nothing is live. The CPU of every postgres process of this machine is read from
 * /proc/<pid>/schedstat (nanoseconds; /proc/<pid>/stat counts ticks of 10 ms, too coarse for one
 * connection) before the open, after it and at the end, and each of the drain's connections is named
 * by its last statement (pg_stat_activity). The server must be local.
 *
 * Then, on one more connection, what a new backend costs before it has done any work: the connect,
 * the first claim of 32 (the catalog entries of the task table and its indexes, the plan), the second
 * (a custom plan: PostgreSQL plans a prepared statement's first five executions for their values) and
 * the sixth and later (the generic plan, planned once).
 */
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { defineTask, Ratchet, silentLogger } from "../src/index.js";
import { bind, compile } from "../src/store/postgres/named.js";
import { claimFast } from "../src/store/postgres/sql.js";
import { countingNoop } from "./noop.js";
import { median, PG_RUN_OPTIONS, tasksAndRuns } from "./stats.js";

const { values: args } = parseArgs({
  options: { ...PG_RUN_OPTIONS, fill: { type: "boolean", default: false } },
});
const { N, RUNS } = tasksAndRuns(args.tasks, args.runs);
const URL = args["pg-url"]!;

/** CPU time so far of every postgres process of this machine, ms by pid (schedstat: ns). */
function postgresCpu(): Map<string, number> {
  const out = new Map<string, number>();
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (readFileSync(`/proc/${p}/comm`, "utf8").trim() !== "postgres") continue;
      out.set(p, Number(readFileSync(`/proc/${p}/schedstat`, "utf8").split(" ")[0]) / 1e6);
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return out;
}

const since = (a: Map<string, number>, b: Map<string, number>, pid: string) =>
  b.get(pid)! - (a.get(pid) ?? 0);

interface Sample {
  openMs: number;
  /** From the open to nothing live, wall. */
  allMs: number;
  /** Server CPU of the open, then of the whole drain (open included), ms. */
  openCpu: number;
  cpu: number;
  /** The worker's connections (the backends that began after the open did): CPU and last statement. */
  conns: { cpu: number; last: string }[];
  /** Every other postgres process (WAL writer, checkpointer, autovacuum, other sessions). */
  others: number;
}

async function child(schema: string, fill: boolean): Promise<Sample | undefined> {
  const { task, finished } = countingNoop(defineTask, N);
  if (fill) {
    const r = await Ratchet.open({ store: URL, postgres: { schema }, tasks: [task], logger: silentLogger });
    for (let i = 0; i < N; i += 1_000)
      await r.enqueueMany(Array.from({ length: 1_000 }, (_, j) => ({ task, input: { seq: i + j } })));
    await r.close();
    return undefined;
  }
  const admin = new pg.Client(URL);
  await admin.connect();
  const mine = (await admin.query<{ p: number }>("SELECT pg_backend_pid() AS p")).rows[0]!.p;
  const c0 = postgresCpu();
  const t0 = performance.now();
  const r = await Ratchet.open({ store: URL, postgres: { schema }, tasks: [task], logger: silentLogger });
  const c1 = postgresCpu();
  const openMs = performance.now() - t0;
  await r.start({ concurrency: 16, prefetch: 500 });
  await finished;
  while ((await r.depths()).some((d) => d.live > 0)) await new Promise((res) => setTimeout(res, 2));
  const c2 = postgresCpu();
  const allMs = performance.now() - t0;
  const activity = new Map(
    (
      await admin.query<{ pid: number; q: string }>(
        `SELECT pid, left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS q FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()`,
      )
    ).rows.map((x) => [String(x.pid), x.q]),
  );
  await r.close();
  await admin.end();
  let openCpu = 0;
  let cpu = 0;
  let others = 0;
  const conns: Sample["conns"] = [];
  for (const pid of c2.keys()) {
    if (pid === String(mine)) continue;
    const d = since(c0, c2, pid);
    cpu += d;
    if (c1.has(pid)) openCpu += since(c0, c1, pid);
    const last = activity.get(pid);
    if (!c0.has(pid) && last !== undefined) conns.push({ cpu: d, last });
    else others += d;
  }
  conns.sort((a, b) => b.cpu - a.cpu);
  return { openMs, allMs, openCpu, cpu, conns, others };
}

/** A new backend's own cost: connect, then a claim of 32 on it, again and again. */
async function backendCost(schema: string): Promise<number[]> {
  const c = new pg.Client(URL);
  const t = postgresCpu();
  await c.connect();
  const pid = String((await c.query<{ p: number }>("SELECT pg_backend_pid() AS p")).rows[0]!.p);
  const at = () => postgresCpu().get(pid)!;
  const out = [at() - (t.get(pid) ?? 0)];
  const q = compile(claimFast(32), `"${schema}"`);
  const values = bind(q, {
    grace: 10_000,
    worker: "backends",
    queue: "default",
    queues: ["default"],
    names: ["noop"],
    limit: 32,
    now: null,
  });
  for (let i = 0; i < 8; i++) {
    const before = at();
    await c.query({ name: "claim", text: q.text, values });
    out.push(at() - before);
  }
  await c.end();
  return out;
}

if (args.child) {
  const s = await child(args.child, args.fill);
  if (s) process.stdout.write(`${JSON.stringify(s)}\n`);
  process.exit(0);
}

const admin = new pg.Client(URL);
await admin.connect();
const samples: Sample[] = [];
const costs: number[][] = [];
const self = fileURLToPath(import.meta.url);
const run = (schema: string, extra: string[]) => {
  const res = spawnSync(
    process.execPath,
    [self, "--tasks", String(N), "--pg-url", URL, "--child", schema, ...extra],
    {
      encoding: "utf8",
    },
  );
  if (res.status !== 0) throw new Error(`run failed: ${res.stderr}`);
  return res.stdout;
};
for (let i = 0; i < RUNS; i++) {
  const schema = `backends_${process.pid}_${i}`;
  try {
    run(schema, ["--fill"]);
    const s = JSON.parse(run(schema, []).trim().split("\n").pop()!) as Sample;
    samples.push(s);
    console.error(
      `run ${i + 1}: open ${s.openMs.toFixed(0)} ms (server ${s.openCpu.toFixed(1)} ms), all ${s.allMs.toFixed(0)} ms; server ${((s.cpu / N) * 1000).toFixed(1)} µs/task over ${s.conns.length} connections: ${s.conns.map((c) => `${c.cpu.toFixed(0)} ms (last: ${c.last})`).join("; ")}; others ${s.others.toFixed(0)} ms`,
    );
    // More to claim for the new backend: a fresh batch of tasks.
    run(schema, ["--fill"]);
    costs.push(await backendCost(schema));
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}
await admin.end();

const m = (f: (s: Sample) => number) => median(samples.map(f));
console.log(
  `\nA fresh worker draining ${N} no-ops (c16, prefetch 500) on PostgreSQL; medians of ${RUNS} run(s), server CPU from /proc/<pid>/schedstat\n`,
);
console.log("| figure | value |\n| --- | ---: |");
console.log(`| open, wall (ms) | ${m((s) => s.openMs).toFixed(1)} |`);
console.log(`| open, server CPU (ms) | ${m((s) => s.openCpu).toFixed(1)} |`);
console.log(`| open and drain, wall (ms) | ${m((s) => s.allMs).toFixed(0)} |`);
console.log(`| server CPU per task, open and drain (µs) | ${m((s) => (s.cpu / N) * 1000).toFixed(1)} |`);
console.log(`| connections of the worker | ${m((s) => s.conns.length)} |`);
const at = (i: number) => median(costs.map((c) => c[i]!)).toFixed(2);
console.log(`| a new backend: connect (ms of its CPU) | ${at(0)} |`);
console.log(`| then its first claim of 32 | ${at(1)} |`);
console.log(`| its second (a custom plan) | ${at(2)} |`);
console.log(`| its fifth (the last custom plan) | ${at(5)} |`);
console.log(`| its seventh (the generic plan) | ${at(7)} |`);
