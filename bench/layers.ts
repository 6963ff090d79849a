/**
 * What the benchmarks of the layers above the engine share (bench/streams.ts, bench/models.ts):
 * a Ratchet on fresh storage of either store, torn down after, and their table of figures.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ratchet, silentLogger, type TaskDefinition } from "../src/index.js";
import { fmt } from "./stats.js";

export type BenchStore = "sqlite" | "pg";

/** One figure of one store: its runs and their median. */
export interface StoreFigure {
  store: string;
  figure: string;
  unit: string;
  samples: number[];
  median: number;
}

/** A Ratchet on a new SQLite file or PostgreSQL schema; `done` closes it and removes the storage. */
export async function openFresh(
  store: BenchStore,
  pgUrl: string,
  tasks: TaskDefinition[],
  tag: string,
): Promise<{ r: Ratchet; done: () => Promise<void> }> {
  if (store === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), `ratchet-bench-${tag}-`));
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
  const schema = `rt_bench_${tag}_${Math.random().toString(36).slice(2, 10)}`;
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

export function renderStoreFigures(figs: StoreFigure[]): string {
  const lines = ["| store | figure | median | runs |", "|---|---|---:|---|"];
  for (const f of figs)
    lines.push(
      `| ${f.store} | ${f.figure} | ${fmt(f.median)} ${f.unit} | ${f.samples.map(fmt).join(", ")} |`,
    );
  return lines.join("\n");
}

/** `--store sqlite|pg|both` as a list. */
export function storesOf(value: string | undefined): BenchStore[] {
  return value === "pg" ? ["pg"] : value === "sqlite" ? ["sqlite"] : ["sqlite", "pg"];
}
