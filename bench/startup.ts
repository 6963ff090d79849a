/**
 * A fresh worker's start on PostgreSQL: what a short drain (the peers harness's W2 of 20,000) pays
 * before its steady rate.
 *
 *   npm run build && node dist/bench/startup.js [--tasks 20000] [--runs 3] [--pg-url postgres://…]
 *
 * Each run enqueues `--tasks` no-ops into a fresh schema (with enqueueMany, then closes, and does not
 * ANALYZE: the table is as a bulk load leaves it), then a new process opens Ratchet on it and starts
 * a worker (concurrency 16, prefetch 500), and reports the time `open()` took, when the first handler
 * ran and when the last did, all from the `open()` call.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { defineTask, Ratchet, silentLogger } from "../src/index.js";
import { countingNoop } from "./noop.js";
import { median, PG_RUN_OPTIONS, tasksAndRuns } from "./stats.js";

const { values: args } = parseArgs({ options: PG_RUN_OPTIONS });
const { N, RUNS } = tasksAndRuns(args.tasks, args.runs);
const URL = args["pg-url"]!;

interface Sample {
  openMs: number;
  firstMs: number;
  allMs: number;
}

let first = 0;
let t0 = 0;
const { task: noop, finished } = countingNoop(defineTask, N, () => {
  if (first === 0) first = performance.now() - t0;
});
const options = (schema: string) => ({
  store: URL,
  postgres: { schema, poolMax: 10 },
  tasks: [noop],
  logger: silentLogger,
  pollIntervalMs: 20,
  maxDepth: 2_000_000,
});

if (args.child) {
  t0 = performance.now();
  const r = await Ratchet.open(options(args.child));
  const openMs = performance.now() - t0;
  await r.start({ concurrency: 16, prefetch: 500 });
  await finished;
  const sample: Sample = { openMs, firstMs: first, allMs: performance.now() - t0 };
  await r.close();
  process.stdout.write(`${JSON.stringify(sample)}\n`);
  process.exit(0);
}

const admin = new pg.Client(URL);
await admin.connect();
const samples: Sample[] = [];
try {
  for (let i = 0; i < RUNS; i++) {
    const schema = `startup_${process.pid}`;
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    const r = await Ratchet.open(options(schema));
    for (let k = 0; k < N; k += 1_000)
      await r.enqueueMany(Array.from({ length: 1_000 }, (_, j) => ({ task: noop, input: { seq: k + j } })));
    await r.close();
    const res = spawnSync(
      process.execPath,
      [fileURLToPath(import.meta.url), "--tasks", String(N), "--pg-url", URL, "--child", schema],
      { encoding: "utf8" },
    );
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    if (res.status !== 0) throw new Error(`run failed: ${res.stderr}`);
    const s = JSON.parse(res.stdout.trim().split("\n").pop()!) as Sample;
    samples.push(s);
    console.error(
      `run ${i + 1}: open ${s.openMs.toFixed(1)} ms, first handler ${s.firstMs.toFixed(1)} ms, all ${s.allMs.toFixed(0)} ms`,
    );
  }
} finally {
  await admin.end();
}
const m = (k: keyof Sample) => median(samples.map((s) => s[k])).toFixed(1);
console.log(
  `\nA fresh worker on ${N} enqueued tasks, medians of ${RUNS} run(s), ms from open(): open ${m("openMs")}, first handler ${m("firstMs")}, all ${m("allMs")}`,
);
