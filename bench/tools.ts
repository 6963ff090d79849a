/**
 * Tool-call figures (spec §19.10–§19.20), SQLite and PostgreSQL:
 * - tool calls per second through the whole path: an agent whose instant faux model asks for 8
 *   calls of an instant tool in its first turn and answers in its second; 16 conversations at a
 *   time; each call a child task with its intent step, its stream and its result entry;
 * - compaction bookkeeping per entry: the token count and split point over a context of 2,000
 *   entries (what every turn of an agent with a compaction policy pays), in µs per entry.
 *
 *   npm run build && node dist/bench/tools.js [--store sqlite|pg|both] [--conversations 64] [--runs 3]
 *
 * Also run by `npm run bench` (bench/run.ts).
 */
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { z } from "zod";
import { defineAgent } from "../src/agent/agent.js";
import { entryTokens, splitPoint } from "../src/agent/compaction.js";
import { Conversations } from "../src/agent/conversations.js";
import { defineToolCalls } from "../src/agent/tools/calls.js";
import { defineTool } from "../src/agent/tools/define.js";
import { fauxModel } from "../src/models/faux.js";
import type { EntryRecord } from "../src/store/conversations/types.js";
import { type BenchStore, openFresh, renderStoreFigures, type StoreFigure, storesOf } from "./layers.js";
import { median, progress } from "./stats.js";

const CALLS = 8;
const AT_ONCE = 16;

const noop = defineTool({
  name: "noop",
  description: "does nothing",
  schema: z.object({ i: z.number() }),
  replay: "safe",
  execute: (_c, a) => `ok ${a.i}`,
});
const tools = defineToolCalls({ tools: [noop] });
const model = fauxModel({
  scripts: (_n, call) =>
    call.prompt.some((m) => m.role === "tool")
      ? { text: "done" }
      : { toolCalls: Array.from({ length: CALLS }, (_, i) => ({ id: `c${i}`, name: "noop", input: { i } })) },
});
const agent = defineAgent({ name: "bench.agent", model, tools, cwd: "/tmp" });

async function callsRun(store: BenchStore, pgUrl: string, conversations: number): Promise<number> {
  const { r, done } = await openFresh(store, pgUrl, [agent.task, tools.task], "tools");
  try {
    const c = new Conversations(r, { run: agent });
    for (let i = 0; i < conversations; i++) await c.create(`b${i}`);
    await r.start({ concurrency: AT_ONCE * (CALLS + 1) });
    const t0 = performance.now();
    const subs = await Promise.all(
      Array.from({ length: conversations }, (_, i) => c.submit(`b${i}`, { text: "go" })),
    );
    for (const s of subs) {
      const settled = await s.wait({ timeoutMs: 300_000 });
      if (settled.status !== "done") throw new Error(`conversation ${s.conversationId}: ${settled.status}`);
    }
    const secs = (performance.now() - t0) / 1000;
    await r.stop();
    return (conversations * CALLS) / secs;
  } finally {
    await done();
  }
}

/** µs per entry of the compaction bookkeeping over `n` entries (pure: no store). */
function bookkeeping(n: number): number {
  const entries: EntryRecord[] = Array.from({ length: n }, (_, i) => ({
    conversationId: "c",
    seq: i,
    kind: i % 3 === 0 ? "user" : i % 3 === 1 ? "assistant" : "tool-result",
    name: null,
    data:
      i % 3 === 1
        ? { text: "an answer ".repeat(20), usage: { output: 50 } }
        : { text: "some text ".repeat(20) },
    taskId: null,
    submissionId: null,
    createdAt: 0,
  }));
  const rounds = 200;
  const t0 = performance.now();
  let sink = 0;
  for (let r = 0; r < rounds; r++) {
    for (const e of entries) sink += entryTokens(e);
    sink += splitPoint(entries, 20_000);
  }
  if (sink < 0) throw new Error("unreachable");
  return ((performance.now() - t0) * 1000) / (rounds * n);
}

export async function runToolBench(o: {
  stores: BenchStore[];
  pgUrl: string;
  conversations: number;
  runs: number;
}): Promise<StoreFigure[]> {
  const out: StoreFigure[] = [];
  const add = (store: string, figure: string, unit: string, samples: number[]) =>
    out.push({ store, figure, unit, samples, median: median(samples) });
  for (const store of o.stores) {
    const s: number[] = [];
    for (let i = 0; i < o.runs; i++) {
      progress(`tools ${store}: run ${i + 1}/${o.runs} (${o.conversations} conversations × ${CALLS} calls)`);
      s.push(await callsRun(store, o.pgUrl, o.conversations));
    }
    add(store, `tool calls through the agent loop, instant tool and model, ${CALLS} per turn`, "calls/s", s);
  }
  const b: number[] = [];
  for (let i = 0; i < o.runs; i++) b.push(bookkeeping(2_000));
  add("(no store)", "compaction bookkeeping (token count + split point), 2,000 entries", "µs/entry", b);
  return out;
}

export const renderToolFigures = renderStoreFigures;

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      store: { type: "string", default: "both" },
      conversations: { type: "string", default: "64" },
      runs: { type: "string", default: "3" },
      "pg-url": { type: "string" },
    },
  });
  const figs = await runToolBench({
    stores: storesOf(values.store),
    pgUrl: values["pg-url"] ?? process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    conversations: Number(values.conversations),
    runs: Number(values.runs),
  });
  process.stdout.write(`${renderToolFigures(figs)}\n`);
}
