/**
 * The engine's own cost per task, without a store's: claims and settlements are answered from
 * memory at once (the real SQLite store, in memory, serves everything else), so what a drain costs
 * here is the worker's code (driver, executor, invocations, the settle Batcher) and its JIT and GC.
 *
 *   npm run build && node dist/bench/engine.js [--tasks 20000] [--pairs 5] [--base /abs/other/dist] [--heap [--sites 20]]
 *
 * Each run is a fresh process (the JIT warms up on the drain, as a fresh worker's does) that opens a
 * Ratchet of a build's dist/ and times `start({ concurrency: 16, prefetch: 500 })` until N no-op
 * handlers have run. Reported per task: the process's CPU, split into the main thread and the
 * others (V8's optimizing compiler, GC helpers); with `--heap`, the bytes allocated, from V8's
 * sampling heap profiler (every 256 bytes; it slows the run, so its CPU figures are not comparable),
 * and with `--sites n` the n allocation sites (function, file:line) that allocated the most.
 * With `--base`, runs alternate base, this build, …, `--pairs` times; medians are printed.
 */
import { spawnSync } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import type { ClaimedTask, ClaimRequest, Settlement, Store } from "../src/store/store.js";
import { sampleAllocations, siteLines } from "./heap.js";
import { claimedNoop, countingNoop } from "./noop.js";
import { abBuilds, fixedOrDash, median, threadCpuMs } from "./stats.js";

const { values: args } = parseArgs({
  options: {
    tasks: { type: "string", default: "20000" },
    pairs: { type: "string", default: "5" },
    base: { type: "string" },
    heap: { type: "boolean", default: false },
    /** With --heap: print this many allocation sites (function, file:line), most bytes first. */
    sites: { type: "string", default: "0" },
    child: { type: "string" },
  },
});
const N = Number(args.tasks);
const PAIRS = Number(args.pairs);
if (!Number.isInteger(N) || N < 1_000 || N > 10_000_000)
  throw new Error("--tasks must be in [1000, 10000000]");
if (!Number.isInteger(PAIRS) || PAIRS < 1 || PAIRS > 50) throw new Error("--pairs must be in [1, 50]");
const SITES = Number(args.sites);
if (!Number.isInteger(SITES) || SITES < 0 || SITES > 1_000) throw new Error("--sites must be in [0, 1000]");
const OWN = resolve(dirname(fileURLToPath(import.meta.url)), "..");

interface Sample {
  rate: number;
  cpuUs: number;
  mainCpuUs: number;
  otherCpuUs: number;
  /** Bytes allocated per task (--heap), else null. */
  bytes: number | null;
}

/**
 * A store that claims `left` tasks from memory (rows shaped as a claim returns them, the input
 * parsed from its JSON as a store does) and settles every item "ok", each after one turn of the
 * event loop, as a write would answer; everything else goes to `inner`.
 */
function memoryClaims(inner: Store, tasks: number): Store {
  let next = 1;
  let left = tasks;
  const now = Date.now();
  const turn = () => new Promise((r) => setImmediate(r));
  return new Proxy(inner, {
    get(target, key) {
      if (key === "claim")
        return async (req: ClaimRequest): Promise<ClaimedTask[]> => {
          const n = Math.min(req.limit, left);
          left -= n;
          const out: ClaimedTask[] = [];
          for (let i = 0; i < n; i++) {
            const id = next++;
            out.push(claimedNoop(id, 1, JSON.parse(`{"seq":${id - 1},"enqueuedAt":${now}}`), now, req));
          }
          await turn();
          return out;
        };
      if (key === "settle")
        return async (items: readonly Settlement[]) => {
          await turn();
          return items.map(() => "ok" as const);
        };
      // Two settle writes at once, as on PostgreSQL.
      if (key === "settleLanes") return 2;
      const v = Reflect.get(target, key, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

async function child(dist: string): Promise<Sample> {
  const { defineTask, Ratchet, silentLogger }: typeof import("../src/index.js") = await import(
    pathToFileURL(join(dist, "src/index.js")).href
  );
  const { SqliteStore }: typeof import("../src/store/sqlite/sqlite-store.js") = await import(
    pathToFileURL(join(dist, "src/store/sqlite/sqlite-store.js")).href
  );
  const { task: noop, finished } = countingNoop(defineTask, N);
  const inner = new SqliteStore({ path: ":memory:", clock: { now: () => Date.now() } });
  const r = await Ratchet.open({
    store: memoryClaims(inner, N),
    tasks: [noop],
    logger: silentLogger,
    pollIntervalMs: 20,
  });
  const stop = args.heap ? await sampleAllocations() : undefined;
  const th0 = threadCpuMs();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await r.start({ concurrency: 16, prefetch: 500 });
  await finished;
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  const th = threadCpuMs();
  let bytes: number | null = null;
  if (stop) {
    const heap = await stop();
    bytes = heap.bytes / N;
    if (SITES > 0) process.stderr.write(siteLines(heap, N, SITES));
  }
  await r.close();
  return {
    rate: (N / ms) * 1_000,
    cpuUs: (c.user + c.system) / N,
    mainCpuUs: ((th.main - th0.main) * 1_000) / N,
    otherCpuUs: ((th.other - th0.other) * 1_000) / N,
    bytes,
  };
}

if (args.child) {
  process.stdout.write(`${JSON.stringify(await child(args.child))}\n`);
  process.exit(0);
}

const builds = abBuilds(args.base, OWN);
const samples: Record<string, Sample[]> = Object.fromEntries(builds.map(([k]) => [k, []]));
const f = fixedOrDash;
for (let i = 0; i < PAIRS; i++) {
  for (const [name, dist] of builds) {
    const res = spawnSync(
      process.execPath,
      [
        fileURLToPath(import.meta.url),
        "--tasks",
        String(N),
        ...(args.heap ? ["--heap", "--sites", String(args.sites)] : []),
        "--child",
        dist,
      ],
      { encoding: "utf8" },
    );
    if (res.status !== 0) throw new Error(`${name} run failed: ${res.stderr}`);
    const s = JSON.parse(res.stdout.trim().split("\n").pop()!) as Sample;
    samples[name]!.push(s);
    if (res.stderr) process.stderr.write(res.stderr);
    console.error(
      `${name} ${f(s.rate, 0)} tasks/s, ${f(s.cpuUs)} µs CPU/task (main thread ${f(s.mainCpuUs)}, others ${f(s.otherCpuUs)})${s.bytes === null ? "" : `, ${f(s.bytes, 0)} B/task`}`,
    );
  }
}
console.log(
  `\nThe engine alone (claims and settlements from memory), ${N} no-ops, c16, prefetch 500, a fresh process per run; medians of ${PAIRS}\n`,
);
console.log(
  "| build | tasks/s | CPU µs/task | main thread | other threads | allocated B/task |\n| --- | ---: | ---: | ---: | ---: | ---: |",
);
for (const [name, dist] of builds) {
  const s = samples[name]!;
  const bytes = s.map((x) => x.bytes).filter((x): x is number => x !== null);
  console.log(
    `| ${name} (${dist}) | ${f(median(s.map((x) => x.rate)), 0)} | ${f(median(s.map((x) => x.cpuUs)))} | ${f(median(s.map((x) => x.mainCpuUs)))} | ${f(median(s.map((x) => x.otherCpuUs)))} | ${f(bytes.length ? median(bytes) : null, 0)} |`,
  );
}
