/**
 * Conversation figures (spec §17), SQLite and PostgreSQL: entries appended per second through
 * `Conversations.commit` (validation, JSON, one transaction each):
 *
 * - one writer, one entry per commit (each commit waits for the one before: latency-bound);
 * - one writer, 50 entries per commit;
 * - 8 conversations written at once, one entry per commit (commits of different conversations
 *   do not wait for each other's row lock).
 *
 *   npm run build && node dist/bench/conversations.js [--store sqlite|pg|both] [--commits 2000] [--runs 3]
 *
 * Also run by `npm run bench` (bench/run.ts) after its other figures.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { Conversations, defineRun } from "../src/agent/index.js";
import { Ratchet, silentLogger } from "../src/index.js";
import { fmt, median, progress } from "./stats.js";

export interface ConversationFigure {
  store: string;
  figure: string;
  unit: string;
  samples: number[];
  median: number;
}

const run = defineRun({ name: "bench-conversation", run: (r) => r.answer(null) });
const ENTRY = {
  kind: "assistant" as const,
  data: { text: "a sentence of an answer, about sixty bytes long." },
};

async function open(
  store: "sqlite" | "pg",
  pgUrl: string,
): Promise<{ r: Ratchet; done: () => Promise<void> }> {
  if (store === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "ratchet-bench-conv-"));
    const r = await Ratchet.open({
      store: `sqlite:${join(dir, "b.db")}`,
      tasks: [run.task],
      logger: silentLogger,
    });
    const done = async () => {
      await r.close();
      rmSync(dir, { recursive: true, force: true });
    };
    return { r, done };
  }
  const schema = `bench_conv_${process.pid}_${Date.now()}`;
  const r = await Ratchet.open({
    store: pgUrl,
    postgres: { schema },
    tasks: [run.task],
    logger: silentLogger,
  });
  return {
    r,
    done: async () => {
      const pool = (r.store as unknown as { pool: { query(q: string): Promise<unknown> } }).pool;
      await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
      await r.close();
    },
  };
}

/** Entries per second of `writers` conversations, each making `commits` commits of `batch` entries. */
async function measure(
  c: Conversations,
  tag: string,
  writers: number,
  commits: number,
  batch: number,
): Promise<number> {
  const ids = Array.from({ length: writers }, (_, i) => `${tag}-${i}`);
  for (const id of ids) await c.create(id);
  const entries = Array.from({ length: batch }, () => ENTRY);
  const t0 = performance.now();
  await Promise.all(
    ids.map(async (id) => {
      for (let i = 0; i < commits; i++) await c.commit(id, { entries });
    }),
  );
  return (writers * commits * batch) / ((performance.now() - t0) / 1000);
}

export async function runConversationBench(o: {
  stores: ("sqlite" | "pg")[];
  pgUrl: string;
  commits: number;
  runs: number;
}): Promise<ConversationFigure[]> {
  const shapes = [
    { figure: "entries/s, 1 writer, 1 entry per commit", writers: 1, commits: o.commits, batch: 1 },
    {
      figure: "entries/s, 1 writer, 50 entries per commit",
      writers: 1,
      commits: Math.max(1, o.commits / 10),
      batch: 50,
    },
    {
      figure: "entries/s, 8 conversations at once, 1 entry per commit",
      writers: 8,
      commits: Math.max(1, o.commits / 8),
      batch: 1,
    },
  ];
  const out: ConversationFigure[] = [];
  for (const store of o.stores) {
    for (const s of shapes) {
      const samples: number[] = [];
      for (let k = 0; k < o.runs; k++) {
        const { r, done } = await open(store, o.pgUrl);
        try {
          samples.push(await measure(new Conversations(r, { run }), `b${k}`, s.writers, s.commits, s.batch));
        } finally {
          await done();
        }
      }
      progress(`conversations ${store}: ${s.figure}: ${samples.map(fmt).join(", ")}`);
      out.push({ store, figure: s.figure, unit: "entries/s", samples, median: median(samples) });
    }
  }
  return out;
}

export function renderConversationFigures(figs: readonly ConversationFigure[]): string {
  const rows = figs.map(
    (f) =>
      `| ${f.store} | ${f.figure} | ${fmt(f.median)} | ${fmt(Math.min(...f.samples))}–${fmt(Math.max(...f.samples))} |`,
  );
  return ["| store | figure | median | min–max |", "|---|---|---:|---:|", ...rows].join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      store: { type: "string", default: "both" },
      commits: { type: "string", default: "2000" },
      runs: { type: "string", default: "3" },
    },
  });
  const stores =
    values.store === "both" ? (["sqlite", "pg"] as const) : ([values.store] as ("sqlite" | "pg")[]);
  const figs = await runConversationBench({
    stores: [...stores],
    pgUrl: process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    commits: Number(values.commits),
    runs: Number(values.runs),
  });
  process.stdout.write(`${renderConversationFigures(figs)}\n`);
}
