import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { defineTask, type TaskDefinition } from "../src/index.js";
import { fauxModel } from "../src/models/faux.js";
import { generate } from "../src/models/generate.js";
import { type BenchStore, openFresh, renderStoreFigures, type StoreFigure, storesOf } from "./layers.js";
import { median, progress } from "./stats.js";

export type ModelFigure = StoreFigure;

const CONCURRENCY = 16;
const GENERATIONS = 100;
const TOKENS = 200;
const LATENCY_TURNS = 200;
const PROMPT = [{ role: "user" as const, content: [{ type: "text" as const, text: "hi" }] }];

const instant = fauxModel({ scripts: [{ text: "an instant answer", chunkChars: 4 }] });
const paced = fauxModel({ scripts: [{ text: "tok ".repeat(TOKENS), chunkChars: 4, tokensPerSecond: 100 }] });

const turn = defineTask({
  name: "bench-turn",
  async run(ctx) {
    return (await generate(ctx, { name: "answer", model: instant, prompt: PROMPT })).text.length;
  },
});
const step = defineTask({
  name: "bench-step",
  async run(ctx) {
    return (await ctx.step("answer", () => "an instant answer")).length;
  },
});
/** W4's shape (docs/benchmarks-peers.md): ten turns in a task, as DBOS's W4 runs ten steps in a workflow. */
const TURNS_PER_TASK = 10;
const tenTurns = defineTask({
  name: "bench-ten-turns",
  async run(ctx) {
    let n = 0;
    for (let i = 0; i < TURNS_PER_TASK; i++)
      n += (await generate(ctx, { name: `answer:${i}`, model: instant, prompt: PROMPT })).text.length;
    return n;
  },
});
const tokens = defineTask({
  name: "bench-tokens",
  maxMs: 120_000,
  async run(ctx) {
    return (await generate(ctx, { name: "answer", model: paced, prompt: PROMPT })).usage.output;
  },
});

/** Wall time inside the task of one generate() turn, one task at a time (the turn's own latency). */
const latencies: number[] = [];
const timed = defineTask({
  name: "bench-turn-timed",
  async run(ctx) {
    const t0 = performance.now();
    const r = await generate(ctx, { name: "answer", model: instant, prompt: PROMPT });
    latencies.push(performance.now() - t0);
    return r.text.length;
  },
});

function open(store: BenchStore, pgUrl: string) {
  return openFresh(store, pgUrl, [turn, step, tokens, timed, tenTurns], "models");
}

/** Median ms of one turn inside its task, `n` turns one at a time. */
async function turnLatency(store: "sqlite" | "pg", pgUrl: string, n: number): Promise<number> {
  latencies.length = 0;
  await drainRun(store, pgUrl, timed, n, 1);
  return median(latencies.slice(Math.min(20, n >> 2)));
}

/** Tasks per second: `n` tasks of `def`, CONCURRENCY at a time; also the worker's CPU µs per task. */
async function drainRun(
  store: "sqlite" | "pg",
  pgUrl: string,
  def: TaskDefinition,
  n: number,
  c: number,
): Promise<[number, number]> {
  const { r, done } = await open(store, pgUrl);
  try {
    const ids = await r.enqueueMany(Array.from({ length: n }, () => ({ task: def, input: null })));
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await r.start({ concurrency: c });
    for (const id of ids) await r.waitFor(id, { timeoutMs: 600_000 });
    const secs = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    await r.stop();
    return [n / secs, (cpu.user + cpu.system) / n];
  } finally {
    await done();
  }
}

export async function runModelBench(o: {
  stores: ("sqlite" | "pg")[];
  pgUrl: string;
  turns: number;
  runs: number;
}): Promise<ModelFigure[]> {
  const out: ModelFigure[] = [];
  for (const store of o.stores) {
    const add = (figure: string, unit: string, samples: number[]) =>
      out.push({ store, figure, unit, samples, median: median(samples) });
    const turns: number[] = [];
    const steps: number[] = [];
    const overhead: number[] = [];
    const cpuTok: number[] = [];
    const latency: number[] = [];
    const inTasks: number[] = [];
    for (let i = 0; i < o.runs; i++) {
      progress(`models ${store}: run ${i + 1}/${o.runs} (${o.turns} turns, ${o.turns} one-step tasks)`);
      const [t] = await drainRun(store, o.pgUrl, turn, o.turns, CONCURRENCY);
      const [s] = await drainRun(store, o.pgUrl, step, o.turns, CONCURRENCY);
      turns.push(t);
      steps.push(s);
      overhead.push((1 / t - 1 / s) * 1e6);
      progress(
        `models ${store}: run ${i + 1}/${o.runs} (${GENERATIONS} generations × ${TOKENS} tokens at 100 tokens/s)`,
      );
      const [, cpuPerGen] = await drainRun(store, o.pgUrl, tokens, GENERATIONS, GENERATIONS);
      cpuTok.push(cpuPerGen / TOKENS);
      const tasks = Math.max(1, Math.round(o.turns / TURNS_PER_TASK));
      progress(`models ${store}: run ${i + 1}/${o.runs} (${tasks} tasks × ${TURNS_PER_TASK} turns)`);
      const [perTask] = await drainRun(store, o.pgUrl, tenTurns, tasks, CONCURRENCY);
      inTasks.push(perTask * TURNS_PER_TASK);
      progress(`models ${store}: run ${i + 1}/${o.runs} (${LATENCY_TURNS} turns one at a time)`);
      latency.push(await turnLatency(store, o.pgUrl, LATENCY_TURNS));
    }
    add(`turns through generate(), instant faux, ${CONCURRENCY} at a time`, "turns/s", turns);
    add("  the same tasks with one ctx.step instead (the engine's floor)", "tasks/s", steps);
    add("  overhead of a turn over a step, per task", "µs", overhead);
    add(
      `turns in W4's shape: tasks of ${TURNS_PER_TASK} turns each, ${CONCURRENCY} tasks at a time`,
      "turns/s",
      inTasks,
    );
    add("one turn's wall time inside its task, one task at a time (median)", "ms", latency);
    add(`CPU per streamed token, ${GENERATIONS} generations at 100 tokens/s, 100 ms interval`, "µs", cpuTok);
  }
  return out;
}

export const renderModelFigures = renderStoreFigures;

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      store: { type: "string", default: "both" },
      turns: { type: "string", default: "2000" },
      runs: { type: "string", default: "3" },
      "pg-url": { type: "string" },
    },
  });
  const stores = storesOf(values.store);
  const figs = await runModelBench({
    stores,
    pgUrl: values["pg-url"] ?? process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    turns: Number(values.turns),
    runs: Number(values.runs),
  });
  process.stdout.write(`${renderModelFigures(figs)}\n`);
}
