/**
 * Single enqueues from many callers at once, on PostgreSQL: producers that do not wait for each other
 * (request handlers, a fan-out), each awaiting its own `enqueue()`, all to one queue.
 *
 *   npm run build && node dist/bench/enqueues.js [--callers 1,4,16] [--seconds 4] [--rounds 3] [--base /abs/other/dist]
 *   node dist/bench/enqueues.js --batch 1000 --callers 1 --rounds 4 --base …   # enqueueMany, as W1's batches
 *
 * Each measurement is a fresh process with a fresh schema: `--callers` loops, each enqueueing one
 * no-op at a time for `--seconds` (with `--batch n`, `enqueueMany` of n at a time, payloads shaped as
 * the peers harness's); tasks/s and each call's latency (p50, p99), and the CPU per task of this
 * process and of the local server's processes (from /proc), medians over `--rounds`. With `--base`,
 * the other build runs alternately beside this one (an A/B of a change).
 */
import { spawnSync } from "node:child_process";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { median, percentile, postgresCpuMs } from "./stats.js";

const { values: args } = parseArgs({
  options: {
    callers: { type: "string", default: "1,4,16" },
    seconds: { type: "string", default: "4" },
    rounds: { type: "string", default: "3" },
    base: { type: "string" },
    "pg-url": {
      type: "string",
      default: process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    },
    batch: { type: "string", default: "1" },
    child: { type: "string" },
  },
});
const BATCH = Number(args.batch);
if (!Number.isInteger(BATCH) || BATCH < 1 || BATCH > 10_000) throw new Error("--batch must be in [1, 10000]");
const CALLERS = args.callers.split(",").map(Number);
const SECONDS = Number(args.seconds);
const ROUNDS = Number(args.rounds);
if (CALLERS.some((c) => !Number.isInteger(c) || c < 1 || c > 256))
  throw new Error("--callers is a list of integers in [1, 256]");
if (!Number.isFinite(SECONDS) || SECONDS < 1 || SECONDS > 60) throw new Error("--seconds must be in [1, 60]");
if (!Number.isInteger(ROUNDS) || ROUNDS < 1 || ROUNDS > 20) throw new Error("--rounds must be in [1, 20]");

/** This build's dist/ (this file runs as dist/bench/enqueues.js). */
const OWN = resolve(fileURLToPath(import.meta.url), "../..");

interface Sample {
  /** Tasks per second. */
  rate: number;
  p50: number;
  p99: number;
  /** CPU per task of the enqueuing process and of the server, µs. */
  cpuUs: number;
  serverUs: number;
}

async function child(dist: string, callers: number): Promise<Sample> {
  const { defineTask, Ratchet, silentLogger }: typeof import("../src/index.js") = await import(
    pathToFileURL(join(dist, "src/index.js")).href
  );
  const noop = defineTask({ name: "noop", run: () => null });
  const schema = `enqueues_${process.pid}`;
  const r = await Ratchet.open({
    store: args["pg-url"],
    postgres: { schema, poolMax: callers + 2 },
    tasks: [noop],
    logger: silentLogger,
    maxDepth: 2_000_000,
  });
  const admin = new pg.Client(args["pg-url"]);
  await admin.connect();
  try {
    const ms: number[] = [];
    const end = performance.now() + SECONDS * 1_000;
    const server0 = postgresCpuMs();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    let seq = 0;
    await Promise.all(
      Array.from({ length: callers }, async (_, k) => {
        for (let i = 0; performance.now() < end; i++) {
          const t = performance.now();
          if (BATCH === 1) await r.enqueue(noop, { k, i });
          else
            await r.enqueueMany(
              Array.from({ length: BATCH }, () => ({
                task: noop,
                input: { seq: seq++, enqueuedAt: performance.timeOrigin + performance.now() },
              })),
            );
          ms.push(performance.now() - t);
        }
      }),
    );
    const elapsed = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const tasks = ms.length * BATCH;
    const serverMs = postgresCpuMs() - server0;
    ms.sort((a, b) => a - b);
    return {
      rate: (tasks / elapsed) * 1_000,
      p50: percentile(ms, 50),
      p99: percentile(ms, 99),
      cpuUs: (cpu.user + cpu.system) / tasks,
      serverUs: (serverMs * 1_000) / tasks,
    };
  } finally {
    await r.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
    await admin.end();
  }
}

if (args.child) {
  const [dist, callers] = args.child.split("|");
  process.stdout.write(`${JSON.stringify(await child(dist!, Number(callers)))}\n`);
} else {
  const builds = args.base ? [{ name: `base (${args.base})`, dist: args.base }] : [];
  builds.push({ name: `this (${OWN})`, dist: OWN });
  const samples = new Map<string, Sample[]>();
  for (let round = 0; round < ROUNDS; round++)
    for (const c of CALLERS)
      for (const b of builds) {
        const res = spawnSync(
          process.execPath,
          [
            fileURLToPath(import.meta.url),
            "--seconds",
            String(SECONDS),
            "--pg-url",
            args["pg-url"],
            "--batch",
            String(BATCH),
            "--child",
            `${b.dist}|${c}`,
          ],
          { encoding: "utf8" },
        );
        if (res.status !== 0) throw new Error(`child failed: ${res.stderr}`);
        const s = JSON.parse(res.stdout.trim().split("\n").at(-1)!) as Sample;
        const key = `${b.name}\u0000${c}`;
        samples.set(key, [...(samples.get(key) ?? []), s]);
        console.error(
          `round ${round + 1} ${b.name} × ${c}: ${s.rate.toFixed(0)} tasks/s, p50 ${s.p50.toFixed(2)} ms, p99 ${s.p99.toFixed(2)} ms, CPU ${s.cpuUs.toFixed(1)} µs/task, server ${s.serverUs.toFixed(1)} µs/task`,
        );
      }
  console.log(
    `\n${BATCH === 1 ? "Single enqueues" : `enqueueMany of ${BATCH}`} to one queue from concurrent callers, ${SECONDS} s each, medians of ${ROUNDS} round(s)\n`,
  );
  console.log(
    "| build | callers | tasks/s | call p50 (ms) | call p99 (ms) | CPU µs/task | server CPU µs/task |",
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const c of CALLERS)
    for (const b of builds) {
      const s = samples.get(`${b.name}\u0000${c}`)!;
      console.log(
        `| ${b.name} | ${c} | ${median(s.map((x) => x.rate)).toFixed(0)} | ${median(s.map((x) => x.p50)).toFixed(2)} | ${median(s.map((x) => x.p99)).toFixed(2)} | ${median(s.map((x) => x.cpuUs)).toFixed(1)} | ${median(s.map((x) => x.serverUs)).toFixed(1)} |`,
      );
    }
}
