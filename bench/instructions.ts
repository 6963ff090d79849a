/**
 * W1 batches (the peers harness's enqueue of 1,000 at a time on SQLite) counted in instructions
 * instead of time: on this VM the wall clock of one W1 run spreads by ±30 % for every engine, and
 * the instructions a job costs do not.
 *
 *   npm run build && npm --prefix bench ci && node dist/bench/instructions.js [--small 10000] [--large 50000]
 *
 * Needs valgrind (`apt-get install valgrind`). For each engine (Ratchet, and plainjob from bench/'s
 * node_modules) a fresh process under `valgrind --tool=callgrind` opens a fresh file, enqueues `--small`
 * jobs in batches of 1,000 with the harness's payload (`{ seq, enqueuedAt }`) and closes; then again
 * with `--large`. The difference of the two counts, divided by the difference of the jobs, is what one
 * more job costs: the process's start, open and close cancel out. Threads are counted too (Ratchet's
 * checkpoint thread, spec §10.4). Split by object file from `callgrind_annotate`: SQLite (the driver's
 * better_sqlite3.node, which links it), node (V8's runtime and builtins: JSON.stringify, allocation,
 * GC), libc, and the rest (the JIT's code, which has no object file). Instructions are not time
 * (cache misses and system calls are not in them) but they rank two builds or two engines without
 * the machine's noise.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    small: { type: "string", default: "10000" },
    large: { type: "string", default: "50000" },
    child: { type: "string" },
    jobs: { type: "string" },
    dir: { type: "string" },
  },
});
const BATCH = 1_000;
const ENGINES = ["ratchet", "plainjob"] as const;
type Engine = (typeof ENGINES)[number];
const HERE = fileURLToPath(import.meta.url);
// dist/bench/instructions.js → the repository's bench/ (plainjob and its better-sqlite3 live there).
const BENCH_DIR = resolve(HERE, "../../../bench");

const payload = (seq: number) => ({ seq, enqueuedAt: performance.timeOrigin + performance.now() });

async function child(engine: Engine, jobs: number, dir: string): Promise<void> {
  if (engine === "ratchet") {
    const { defineTask, Ratchet, silentLogger } = await import("../src/index.js");
    const noop = defineTask({ name: "noop", run: () => null });
    const r = await Ratchet.open({
      store: `sqlite:${join(dir, "r.db")}`,
      tasks: [noop],
      logger: silentLogger,
    });
    for (let i = 0; i < jobs; i += BATCH)
      await r.enqueueMany(Array.from({ length: BATCH }, (_, j) => ({ task: noop, input: payload(i + j) })));
    await r.close();
    return;
  }
  const require = createRequire(join(BENCH_DIR, "package.json"));
  const Database = require("better-sqlite3");
  const pj = require("plainjob");
  const quiet = { log() {}, info() {}, warn() {}, error() {}, debug() {} };
  const q = pj.defineQueue({ connection: pj.better(new Database(join(dir, "p.db"))), logger: quiet });
  for (let i = 0; i < jobs; i += BATCH)
    q.addMany(
      "noop",
      Array.from({ length: BATCH }, (_, j) => payload(i + j)),
    );
  q.close();
}

/** Instructions by object file (and the total) of one callgrind output. */
function counts(file: string): Record<string, number> {
  const res = spawnSync("callgrind_annotate", ["--threshold=100", file], {
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
  });
  if (res.status !== 0) throw new Error(`callgrind_annotate failed: ${res.stderr}`);
  const out: Record<string, number> = { total: 0, sqlite: 0, node: 0, libc: 0 };
  for (const line of res.stdout.split("\n")) {
    const m = /^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$/.exec(line);
    if (!m) continue;
    const n = Number(m[1]!.replaceAll(",", ""));
    const rest = m[2]!;
    if (rest.startsWith("PROGRAM TOTALS")) {
      out.total = n;
      continue;
    }
    const ob = /\[([^\]]*)\]\s*$/.exec(rest)?.[1] ?? "";
    if (ob.endsWith("better_sqlite3.node")) out.sqlite! += n;
    else if (ob.endsWith("/node")) out.node! += n;
    else if (ob.includes("libc.so")) out.libc! += n;
  }
  // The rest of the total: the JIT's code (no object file) and the other libraries.
  out.other = out.total! - out.sqlite! - out.node! - out.libc!;
  return out;
}

function measure(engine: Engine, jobs: number): Record<string, number> {
  const dir = mkdtempSync(join(tmpdir(), "ratchet-instructions-"));
  try {
    const file = join(dir, "callgrind.out");
    const res = spawnSync(
      "valgrind",
      [
        "--tool=callgrind",
        // V8 writes and rewrites its machine code on the heap: valgrind must look for that.
        "--smc-check=all-non-file",
        `--callgrind-out-file=${file}`,
        process.execPath,
        HERE,
        "--child",
        engine,
        "--jobs",
        String(jobs),
        "--dir",
        dir,
      ],
      { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
    );
    if (res.status !== 0) throw new Error(`valgrind run of ${engine} failed: ${res.stderr.slice(-2_000)}`);
    return counts(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (args.child) {
  await child(args.child as Engine, Number(args.jobs), args.dir!);
} else {
  const small = Number(args.small);
  const large = Number(args.large);
  if (!Number.isInteger(small) || !Number.isInteger(large) || small < BATCH || large <= small)
    throw new Error("--small and --large must be integers, 1,000 ≤ small < large");
  const rows: string[] = [];
  const per: Record<string, number> = {};
  for (const engine of ENGINES) {
    process.stderr.write(`${engine}: ${small} and ${large} jobs under callgrind…\n`);
    const a = measure(engine, small);
    const b = measure(engine, large);
    const d = (k: string) => (b[k]! - a[k]!) / (large - small);
    per[engine] = d("total");
    rows.push(
      `| ${engine} | ${Math.round(d("total"))} | ${Math.round(d("sqlite"))} | ${Math.round(d("node"))} | ${Math.round(d("libc"))} | ${Math.round(d("other"))} |`,
    );
  }
  console.log(
    `W1 batches of ${BATCH} on SQLite: instructions per job, (${large} jobs − ${small} jobs) / ${large - small}\n`,
  );
  console.log("| engine | total | SQLite | node (V8 runtime, builtins) | libc | JIT code and the rest |");
  console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
  for (const r of rows) console.log(r);
  console.log(`\nplainjob / ratchet: ${(per.plainjob! / per.ratchet!).toFixed(2)}× the instructions per job`);
}
