/**
 * Model turn figures (spec §18), SQLite and PostgreSQL, with an instant faux model (no latency, no
 * token rate: what is measured is Ratchet, not a provider):
 *
 * - turns/s through `generate`: `turns` tasks of one turn each (a request streamed into the turn's
 *   durable stream, the answer committed with its usage row), 16 at a time;
 * - the same tasks with one plain `ctx.step` instead of the turn: the engine's floor. The per-turn
 *   overhead of the models layer is the difference of the two per-task times;
 * - CPU per streamed token: 100 concurrent generations of 200 tokens at 100 tokens/s each
 *   (2 s per generation) at the default 100 ms stream interval; the worker's CPU µs per token.
 *
 *   node --import tsx bench/models.ts [--store sqlite|pg|both] [--turns 2000] [--runs 3]
 *
 * Also run by `npm run bench` (bench/run.ts) after the stream figures.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { defineTask, Ratchet, silentLogger, type TaskDefinition } from "../src/index.js";
import { fauxModel } from "../src/models/faux.js";
import { generate } from "../src/models/generate.js";
import { fmt, median, progress } from "./stats.js";

export interface ModelFigure {
  store: string;
  figure: string;
  unit: string;
  samples: number[];
  median: number;
}

const CONCURRENCY = 16;
const GENERATIONS = 100;
const TOKENS = 200;
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
const tokens = defineTask({
  name: "bench-tokens",
  maxMs: 120_000,
  async run(ctx) {
    return (await generate(ctx, { name: "answer", model: paced, prompt: PROMPT })).usage.output;
  },
});

async function open(
  store: "sqlite" | "pg",
  pgUrl: string,
): Promise<{ r: Ratchet; done: () => Promise<void> }> {
  const tasks = [turn, step, tokens];
  if (store === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "ratchet-bench-models-"));
    const r = await Ratchet.open({
      store: `sqlite:${join(dir, "b.db")}`,
      tasks,
      logger: silentLogger,
      pollIntervalMs: 20,
    });
    return {
      r,
      done: async () => {
        await r.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const schema = `rt_bench_models_${Math.random().toString(36).slice(2, 10)}`;
  const r = await Ratchet.open({
    store: pgUrl,
    postgres: { schema },
    tasks,
    logger: silentLogger,
    pollIntervalMs: 20,
  });
  return {
    r,
    done: async () => {
      await r.close();
      const pg = (await import("pg")).default;
      const c = new pg.Client({ connectionString: pgUrl });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await c.end();
    },
  };
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
    }
    add(`turns through generate(), instant faux, ${CONCURRENCY} at a time`, "turns/s", turns);
    add("  the same tasks with one ctx.step instead (the engine's floor)", "tasks/s", steps);
    add("  overhead of a turn over a step, per task", "µs", overhead);
    add(`CPU per streamed token, ${GENERATIONS} generations at 100 tokens/s, 100 ms interval`, "µs", cpuTok);
  }
  return out;
}

export function renderModelFigures(figs: ModelFigure[]): string {
  const lines = ["| store | figure | median | runs |", "|---|---|---:|---|"];
  for (const f of figs)
    lines.push(
      `| ${f.store} | ${f.figure} | ${fmt(f.median)} ${f.unit} | ${f.samples.map(fmt).join(", ")} |`,
    );
  return lines.join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      store: { type: "string", default: "both" },
      turns: { type: "string", default: "2000" },
      runs: { type: "string", default: "3" },
      "pg-url": { type: "string" },
    },
  });
  const stores: ("sqlite" | "pg")[] =
    values.store === "both" ? ["sqlite", "pg"] : values.store === "pg" ? ["pg"] : ["sqlite"];
  const figs = await runModelBench({
    stores,
    pgUrl: values["pg-url"] ?? process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    turns: Number(values.turns),
    runs: Number(values.runs),
  });
  process.stdout.write(`${renderModelFigures(figs)}\n`);
}
