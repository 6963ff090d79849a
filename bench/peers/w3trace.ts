/**
 * W3's tail, taken apart: for each engine, the worker in this process, single enqueues at 200/s
 * (open loop, as in compare.ts), and for every job both its enqueue-to-start latency and how long its
 * own enqueue call took. When the slowest 1 % are mostly slow enqueue calls, the tail is the store's
 * commit (an fsync), not the worker.
 *
 *   cd bench && node --import tsx peers/w3trace.ts [--engines ratchet-pg,graphile-worker] [--runs 3] [--n 2000]
 *
 * Runs alternate between the engines. Per run: p50/p99 of the latency, p50/p99/max of the enqueue
 * calls, how many of the slowest 1 % spent more than half their latency in their own enqueue call, and
 * whether a stall (an enqueue call over 50 ms) happened.
 *
 * `raw-commit` in --engines is the store's own commit on the same schedule: a one-row INSERT, each
 * its own transaction on a connection of its own (a pool of 16), into a fresh one-column table. Its
 * "enqueue call" columns are the disk's commit latency on this machine at that moment, the floor of
 * every engine's (the latency columns are empty: no worker).
 */
import { tmpdir } from "node:os";
import { parseArgs } from "node:util";
import { loadPeer, type Payload, rand, type Targets } from "./adapter.js";
import { QUEUE_ENGINES } from "./engines.js";

const { values: args } = parseArgs({
  options: {
    engines: { type: "string", default: "ratchet-pg,graphile-worker" },
    runs: { type: "string", default: "3" },
    n: { type: "string", default: "2000" },
  },
});
const RUNS = Number(args.runs);
const N = Number(args.n);
if (!Number.isInteger(RUNS) || RUNS < 1 || !Number.isInteger(N) || N < 100 || N > 100_000)
  throw new Error("--runs must be >= 1 and --n in [100, 100000]");
const keys = args.engines.split(",");
const RAW = "raw-commit";
for (const k of keys) if (k !== RAW && !QUEUE_ENGINES[k]) throw new Error(`unknown engine ${k}`);
const targets: Targets = {
  pgUrl: process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
  redisUrl: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
  tmpDir: tmpdir(),
};
const INTERVAL_MS = 5;
const wall = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Nearest rank, as compare.ts. */
function pct(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

/** Fires N calls of `one(i, at)` (at: the wall-clock ms of the call) on W3's schedule without waiting for each other; each call's ms. */
async function openLoop(one: (i: number, at: number) => Promise<unknown>): Promise<number[]> {
  const call = new Array<number>(N).fill(Number.NaN);
  const t0 = performance.now();
  const calls: Promise<void>[] = [];
  for (let i = 0; i < N; i++) {
    const wait = t0 + i * INTERVAL_MS - performance.now();
    if (wait > 0) await sleep(wait);
    const at = wall();
    calls.push(
      one(i, at).then(() => {
        call[i] = wall() - at;
      }),
    );
  }
  await Promise.all(calls);
  return call;
}

const callColumns = (call: readonly number[]) =>
  `${pct(call, 50).toFixed(1)} | ${pct(call, 99).toFixed(1)} | ${Math.max(...call).toFixed(1)}`;
const stalled = (call: readonly number[]) => (Math.max(...call) > 50 ? "yes" : "no");

/** The store's own commit on W3's schedule (see the header). */
async function rawTrace(): Promise<string> {
  const pg = (await loadPeer("pg")) as typeof import("pg");
  const pool = new pg.default.Pool({ connectionString: targets.pgUrl, max: 16 });
  const schema = `w3raw_${rand()}`;
  try {
    await pool.query(`CREATE SCHEMA "${schema}"; CREATE TABLE "${schema}".t (payload text NOT NULL)`);
    const call = await openLoop((i) =>
      pool.query(`INSERT INTO "${schema}".t (payload) VALUES ($1)`, [JSON.stringify({ seq: i })]),
    );
    return `| ${RAW} | – | – | ${callColumns(call)} | – | ${stalled(call)} |`;
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
    await pool.end();
  }
}

async function trace(key: string): Promise<string> {
  if (key === RAW) return rawTrace();
  const engine = await QUEUE_ENGINES[key]!.load();
  const a = await engine.adapter(targets);
  await a.setup();
  const latency = new Array<number>(N).fill(Number.NaN);
  let call: number[] = [];
  let seen = 0;
  let all!: () => void;
  const done = new Promise<void>((r) => {
    all = r;
  });
  const opts = {
    concurrency: 16,
    onJob(p: Payload) {
      latency[p.seq] = wall() - p.enqueuedAt;
      if (++seen === N) all();
    },
  };
  const w = a.startLocalWorker
    ? await a.startLocalWorker(opts)
    : await engine.startWorker(targets, a.ref(), opts);
  try {
    await sleep(250);
    call = await openLoop((i, at) => a.enqueueOne({ seq: i, enqueuedAt: at }));
    await Promise.race([
      done,
      sleep(60_000).then(() => Promise.reject(new Error(`${key}: ${seen} of ${N} ran`))),
    ]);
  } finally {
    await w.stop();
    await a.teardown();
  }
  const p99 = pct(latency, 99);
  const tail = latency.map((v, i) => [v, call[i]!] as const).filter(([v]) => v >= p99);
  const byEnqueue = tail.filter(([v, c]) => c > v / 2).length;
  const f = (x: number) => x.toFixed(1);
  return `| ${key} | ${f(pct(latency, 50))} | ${f(p99)} | ${callColumns(call)} | ${byEnqueue} of ${tail.length} | ${stalled(call)} |`;
}

console.log(
  `W3 traced: ${N} single enqueues at ${1000 / INTERVAL_MS}/s, worker (concurrency 16) in this process; ms\n`,
);
console.log(
  "| engine | latency p50 | latency p99 | enqueue call p50 | enqueue call p99 | enqueue call max | slowest 1 % mostly their enqueue call | stall (a call > 50 ms) |",
);
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
for (let run = 0; run < RUNS; run++) {
  for (const key of keys) {
    console.log(await trace(key));
  }
}
process.exit(0);
