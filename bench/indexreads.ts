/**
 * What a drain's claims read from ratchet_tasks' indexes on PostgreSQL, with one worker process and
 * with two: the server-side half of why W2 with two processes costs more per job (issue 43).
 *
 *   npm run build && node dist/bench/indexreads.js [--tasks 20000] [--procs 1,2] [--pg-url …]
 *
 * For each process count: a fresh schema, `--tasks` no-ops enqueued in batches of 1,000, VACUUM
 * ANALYZE, the statistics reset; then that many worker processes (this file, `--worker`), each
 * `start({ concurrency: 16, prefetch: 500 })` as in the peers harness's W2, until the live counters
 * reach zero. Prints the drain's rate and, per index of ratchet_tasks that was scanned, its scans,
 * the index entries they returned (`idx_tup_read`) and the live rows fetched through them
 * (`idx_tup_fetch`), from pg_stat_user_indexes. The statistics reach the view a moment after the
 * drain (PostgreSQL 15 flushes them at the end of each transaction, at most once a second per
 * backend): the workers close before they are read.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { defineTask, Ratchet, silentLogger } from "../src/index.js";
import { PG_RUN_OPTIONS } from "./stats.js";

const { values: args } = parseArgs({
  options: {
    tasks: PG_RUN_OPTIONS.tasks,
    "pg-url": PG_RUN_OPTIONS["pg-url"],
    procs: { type: "string", default: "1,2" },
    worker: { type: "string" },
  },
});
/** The longest a drain may take before the run fails (a worker that died leaves tasks live). */
const DRAIN_LIMIT_MS = 120_000;
const URL = args["pg-url"]!;
const noop = defineTask({ name: "noop", run: () => null });

async function worker(schema: string): Promise<void> {
  const r = await Ratchet.open({
    store: URL,
    postgres: { schema, poolMax: 10 },
    tasks: [noop],
    logger: silentLogger,
    pollIntervalMs: 10,
  });
  process.on("message", (m) => {
    if (m === "start") void r.start({ concurrency: 16, prefetch: 500 });
    if (m === "stop") void r.stop().then(() => r.close().then(() => process.exit(0)));
  });
  process.send!("ready");
}

async function measure(procs: number, tasks: number): Promise<void> {
  const schema = `bench_indexreads_${process.pid}_${procs}`;
  const r = await Ratchet.open({ store: URL, postgres: { schema }, tasks: [noop], logger: silentLogger });
  const admin = new pg.Client(URL);
  await admin.connect();
  try {
    for (let i = 0; i < tasks; i += 1_000) {
      const n = Math.min(1_000, tasks - i);
      await r.enqueueMany(Array.from({ length: n }, (_, j) => ({ task: noop, input: { seq: i + j } })));
    }
    await admin.query(`VACUUM ANALYZE "${schema}".ratchet_tasks`);
    await admin.query("SELECT pg_stat_reset()");
    const kids = [];
    for (let p = 0; p < procs; p++) {
      const k = fork(fileURLToPath(import.meta.url), ["--worker", schema, "--pg-url", URL]);
      kids.push(k);
      await new Promise((res) => k.once("message", res));
    }
    const t0 = performance.now();
    for (const k of kids) k.send("start");
    for (;;) {
      let live = 0;
      for (const q of await r.depths()) live += q.live;
      if (live === 0) break;
      if (performance.now() - t0 > DRAIN_LIMIT_MS)
        throw new Error(`${live} tasks still live after ${DRAIN_LIMIT_MS} ms: did a worker die?`);
      await new Promise((res) => setTimeout(res, 5));
    }
    const ms = performance.now() - t0;
    await Promise.all(
      kids.map((k) => {
        const exited = new Promise((res) => k.once("exit", res));
        k.send("stop");
        return exited;
      }),
    );
    // The backends' statistics reach the view at most a second after their last transaction.
    await new Promise((res) => setTimeout(res, 1_200));
    const ix = await admin.query(
      `SELECT indexrelname AS name, idx_scan AS scans, idx_tup_read AS read, idx_tup_fetch AS fetched
       FROM pg_stat_user_indexes WHERE schemaname = $1 AND relname = 'ratchet_tasks' AND idx_scan > 0
       ORDER BY idx_tup_read DESC`,
      [schema],
    );
    console.log(
      `\n${procs} worker process(es), ${tasks} no-ops: ${Math.round((tasks / ms) * 1000)} tasks/s\n`,
    );
    console.log("| index | scans | entries read | rows fetched |");
    console.log("| --- | ---: | ---: | ---: |");
    for (const row of ix.rows) console.log(`| ${row.name} | ${row.scans} | ${row.read} | ${row.fetched} |`);
  } finally {
    await r.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

if (args.worker) {
  await worker(args.worker);
} else {
  const tasks = Number(args.tasks);
  const counts = args.procs.split(",").map(Number);
  if (!Number.isInteger(tasks) || tasks < 1_000 || tasks > 1_000_000)
    throw new Error("--tasks must be an integer in [1000, 1000000]");
  if (counts.some((c) => !Number.isInteger(c) || c < 1 || c > 8))
    throw new Error("--procs must list integers in [1, 8]");
  for (const procs of counts) await measure(procs, tasks);
}
