import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { defineTask } from "../src/index.js";
import { type BenchStore, openFresh, renderStoreFigures, type StoreFigure, storesOf } from "./layers.js";
import { median, percentile, progress } from "./stats.js";

export type StreamFigure = StoreFigure;

const WRITERS = 50;
const RESUME_CHUNKS = 20_000;
const RESUMES = 200;

const writer = defineTask({
  name: "bench-writer",
  maxMs: 120_000,
  async run(ctx, input: { ms: number }) {
    const out = await ctx.stream("tokens");
    const end = performance.now() + input.ms;
    let n = 0;
    while (performance.now() < end) {
      out.write("tok ");
      // A model's tokens arrive between awaits; a writer that never yields would starve the others.
      if (++n % 16 === 0) await new Promise((r) => setImmediate(r));
    }
    await out.close();
    return n;
  },
});

const filler = defineTask({
  name: "bench-filler",
  maxMs: 120_000,
  async run(ctx, input: { chunks: number }) {
    const out = await ctx.stream("long");
    for (let i = 0; i < input.chunks; i++) {
      out.write({ i, text: "some output line" });
      if (i % 500 === 499) await out.flush();
    }
    await out.close();
    return null;
  },
});

function open(store: BenchStore, pgUrl: string) {
  return openFresh(store, pgUrl, [writer, filler], "streams");
}

/** One throughput run: chunks/s, MB/s, commits/s, µs of CPU per chunk. */
async function appendRun(store: "sqlite" | "pg", pgUrl: string, ms: number): Promise<number[]> {
  const { r, done } = await open(store, pgUrl);
  try {
    let commits = 0;
    const inner = r.store;
    const count = inner.appendStreams.bind(inner);
    // Counts the batches the writers' commits carried (one store call holds several writers' batches).
    (inner as { appendStreams: typeof inner.appendStreams }).appendStreams = (items) => {
      commits += items.length;
      return count(items);
    };
    const ids = await r.enqueueMany(Array.from({ length: WRITERS }, () => ({ task: writer, input: { ms } })));
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await r.start({ concurrency: WRITERS });
    for (const id of ids) await r.waitFor(id, { timeoutMs: ms + 60_000 });
    const secs = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    await r.stop();
    let chunks = 0;
    let bytes = 0;
    for (const id of ids)
      for (const s of await r.streams(id)) {
        chunks += s.length;
        bytes += s.bytes;
      }
    return [chunks / secs, bytes / secs / 1e6, commits / secs, (cpu.user + cpu.system) / chunks];
  } finally {
    await done();
  }
}

/** Reconnect → first chunk, in ms, at random offsets of a long closed stream. */
async function resumeRun(store: "sqlite" | "pg", pgUrl: string): Promise<number[]> {
  const { r, done } = await open(store, pgUrl);
  try {
    const id = await r.enqueue(filler, { chunks: RESUME_CHUNKS });
    await r.start({ concurrency: 1 });
    await r.waitFor(id, { timeoutMs: 120_000 });
    await r.stop();
    const ms: number[] = [];
    let seed = 7;
    for (let i = 0; i < RESUMES; i++) {
      seed = (seed * 48_271) % 2_147_483_647;
      const from = seed % RESUME_CHUNKS;
      const t0 = performance.now();
      for await (const c of r.readStream(id, "long", { from })) {
        if (c.offset !== from) throw new Error(`resumed at ${from}, got ${c.offset}`);
        break;
      }
      ms.push(performance.now() - t0);
    }
    return ms.sort((a, b) => a - b);
  } finally {
    await done();
  }
}

export async function runStreamBench(o: {
  stores: ("sqlite" | "pg")[];
  pgUrl: string;
  seconds: number;
  runs: number;
}): Promise<StreamFigure[]> {
  const out: StreamFigure[] = [];
  for (const store of o.stores) {
    const tput: number[][] = [];
    for (let i = 0; i < o.runs; i++) {
      progress(`streams ${store}: append run ${i + 1}/${o.runs} (${WRITERS} writers, ${o.seconds} s)`);
      tput.push(await appendRun(store, o.pgUrl, o.seconds * 1000));
    }
    const col = (k: number) => tput.map((t) => t[k]!);
    const add = (figure: string, unit: string, samples: number[]) =>
      out.push({ store, figure, unit, samples, median: median(samples) });
    add(`stream append, ${WRITERS} writers, 100 ms interval`, "chunks/s", col(0));
    add(`stream append, ${WRITERS} writers, 100 ms interval`, "MB/s", col(1));
    add("  batches committed", "batches/s", col(2));
    add("  worker CPU per chunk", "µs", col(3));
    const p50: number[] = [];
    const p99: number[] = [];
    for (let i = 0; i < o.runs; i++) {
      progress(`streams ${store}: resumed reader run ${i + 1}/${o.runs}`);
      const ms = await resumeRun(store, o.pgUrl);
      p50.push(percentile(ms, 50));
      p99.push(percentile(ms, 99));
    }
    add(`resumed reader, reconnect → first chunk (of ${RESUME_CHUNKS}), p50`, "ms", p50);
    add("  p99", "ms", p99);
  }
  return out;
}

export const renderStreamFigures = renderStoreFigures;

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      store: { type: "string", default: "both" },
      seconds: { type: "string", default: "3" },
      runs: { type: "string", default: "3" },
      "pg-url": { type: "string" },
    },
  });
  const stores = storesOf(values.store);
  const figs = await runStreamBench({
    stores,
    pgUrl: values["pg-url"] ?? process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    seconds: Number(values.seconds),
    runs: Number(values.runs),
  });
  process.stdout.write(`${renderStreamFigures(figs)}\n`);
}
