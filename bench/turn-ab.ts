/**
 * One PostgreSQL model turn, this build against another one, in one process (issue 38, spec
 * §18.10): turns alternate between the two builds (and a plain ctx.step of this build, one
 * commit's floor), one at a time, so a loaded machine slows both alike. Per turn: the wall time of
 * generate() inside its task, and the statements and COMMITs the pg client sent meanwhile — a
 * count the machine's load cannot move.
 *
 *   git worktree add --detach /tmp/base-turn main && ln -s "$PWD/node_modules" /tmp/base-turn/node_modules
 *   node --import tsx bench/turn-ab.ts --base /tmp/base-turn --turns 400
 *   node --import tsx bench/turn-ab.ts --base /tmp/base-turn --turns 60 --concurrency 16   # rounds of 64
 *   … --store sqlite                                        # the same on SQLite (no statement count)
 *
 * The statement count is of every query of the process during the turn, so it includes a
 * waitFor read of the other builds' loop now and then (its median does not).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import pg from "pg";
import { median } from "./stats.js";

const { values } = parseArgs({
  options: {
    base: { type: "string", default: "/tmp/base-turn" },
    turns: { type: "string", default: "400" },
    store: { type: "string", default: "pg" },
    /** Turns in flight per side: rounds of 4 × this many tasks alternate between the sides. */
    concurrency: { type: "string", default: "1" },
    "pg-url": { type: "string" },
  },
});
const PG = values["pg-url"] ?? process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const N = Number(values.turns);
const C = Number(values.concurrency);
const SQLITE = values.store === "sqlite";
const PROMPT = [{ role: "user" as const, content: [{ type: "text" as const, text: "hi" }] }];

let queries = 0;
let commits = 0;
type Query = (this: pg.Client, ...args: unknown[]) => unknown;
const query = pg.Client.prototype.query as unknown as Query;
(pg.Client.prototype as unknown as { query: Query }).query = function (this: pg.Client, ...args) {
  queries++;
  const a = args[0] as string | { text?: string };
  const text = typeof a === "string" ? a : a?.text;
  if (text !== undefined && /^\s*COMMIT/i.test(text)) commits++;
  return query.apply(this, args);
};

interface Side {
  name: string;
  /** Turns per second of each round (concurrency > 1). */
  rates: number[];
  ms: number[];
  statements: number[];
  commits: number[];
  run(): Promise<void>;
  close(): Promise<void>;
}

async function side(name: string, root: string, plainStep: boolean): Promise<Side> {
  const { Ratchet, defineTask, silentLogger } = await import(`${root}/src/index.ts`);
  const { fauxModel } = await import(`${root}/src/models/faux.ts`);
  const { generate } = await import(`${root}/src/models/generate.ts`);
  const instant = fauxModel({ scripts: [{ text: "an instant answer", chunkChars: 4 }] });
  const s: Side = {
    name,
    rates: [],
    ms: [],
    statements: [],
    commits: [],
    run: async () => {},
    close: async () => {},
  };
  const task = defineTask({
    name: `ab-${name.replace(/\W/g, "-")}`,
    async run(ctx: any) {
      const [q0, c0, t0] = [queries, commits, performance.now()];
      if (plainStep) await ctx.step("answer", () => "an instant answer");
      else await generate(ctx, { name: "answer", model: instant, prompt: PROMPT });
      s.ms.push(performance.now() - t0);
      s.statements.push(queries - q0);
      s.commits.push(commits - c0);
      return null;
    },
  });
  const tag = `turn_ab_${process.pid}_${name.replace(/\W/g, "_")}`;
  const dir = SQLITE ? mkdtempSync(join(tmpdir(), "turn-ab-")) : "";
  const store = SQLITE ? `sqlite:${join(dir, "r.db")}` : PG;
  const r = await Ratchet.open({
    store,
    ...(SQLITE ? {} : { postgres: { schema: tag } }),
    tasks: [task],
    logger: silentLogger,
    pollIntervalMs: 20,
  });
  await r.start({ concurrency: C });
  s.run = async () => {
    const n = C === 1 ? 1 : 4 * C;
    const t0 = performance.now();
    const ids = await r.enqueueMany(Array.from({ length: n }, () => ({ task, input: null })));
    for (const id of ids) await r.waitFor(id, { timeoutMs: 60_000 });
    s.rates.push(n / ((performance.now() - t0) / 1000));
  };
  s.close = async () => {
    await r.stop();
    await r.close();
    if (SQLITE) return rmSync(dir, { recursive: true, force: true });
    const c = new pg.Client(PG);
    await c.connect();
    await c.query(`DROP SCHEMA IF EXISTS "${tag}" CASCADE`);
    await c.end();
  };
  return s;
}

const here = resolve(import.meta.dirname, "..");
const sides = [
  await side("base build, turn", resolve(values.base), false),
  await side("this build, turn", here, false),
  await side("this build, plain ctx.step", here, true),
];
for (let i = 0; i < N; i++) for (const s of i % 2 ? [...sides].reverse() : sides) await s.run();
console.log(
  `${values.store}, ${C} in flight, ${N} rounds, load ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")}`,
);
console.log(
  "| what | turn median ms | turns/s (median round) | statements | COMMITs |\n|---|---:|---:|---:|---:|",
);
for (const s of sides) {
  const warm = Math.min(20, N >> 2);
  const ms = median(s.ms.slice(warm)).toFixed(2);
  const rate = Math.round(median(s.rates.slice(warm)));
  const counts = SQLITE ? "– | –" : `${median(s.statements.slice(warm))} | ${median(s.commits.slice(warm))}`;
  console.log(`| ${s.name} | ${ms} | ${rate} | ${counts} |`);
  await s.close();
}
