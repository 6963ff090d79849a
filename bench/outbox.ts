/**
 * Outbox figures (spec part 21), SQLite and PostgreSQL:
 * - what a task that opts into facts (`defineTask({ facts: ["completed"] })`) pays: a drain of N
 *   instant tasks that write a `task.completed` fact in their settlement's transaction, beside the
 *   same drain of tasks that did not opt in, each on fresh storage, alternating which goes first;
 *   the difference per task in wall time and in the process's CPU;
 * - a sender's delivery rate: the N facts of that drain delivered to a file sink (JSON lines) in
 *   batches of 100, one destination, passes back to back.
 *
 *   npm run build && node dist/bench/outbox.js [--store sqlite|pg|both] [--tasks 5000] [--runs 3]
 *
 * Also run by `npm run bench` (bench/run.ts).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { OutboxSender } from "../src/dispatch/outbox/sender.js";
import { FileSink } from "../src/dispatch/outbox/sinks.js";
import { defineTask, type TaskDefinition } from "../src/index.js";
import { type BenchStore, openFresh, renderStoreFigures, type StoreFigure, storesOf } from "./layers.js";
import { median, progress } from "./stats.js";

const AT_ONCE = 16;
const plain = defineTask({ name: "bench.outbox.plain", run: async () => null });
const withFacts = defineTask({ name: "bench.outbox.facts", facts: ["completed"], run: async () => null });

interface Drain {
  perSec: number;
  cpuUs: number;
  /** Facts delivered per second by a sender, for the drain of withFacts. */
  sent?: number;
}

async function drain(store: BenchStore, pgUrl: string, def: TaskDefinition, n: number): Promise<Drain> {
  const { r, done } = await openFresh(store, pgUrl, [plain, withFacts], "outbox");
  const dir = mkdtempSync(join(tmpdir(), "ratchet-bench-outbox-sink-"));
  try {
    const ids = await r.enqueueMany(Array.from({ length: n }, () => ({ task: def, input: null })));
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await r.start({ concurrency: AT_ONCE });
    for (const id of ids) await r.waitFor(id, { timeoutMs: 600_000 });
    const secs = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    await r.stop();
    const out: Drain = { perSec: n / secs, cpuUs: (cpu.user + cpu.system) / n };
    if (def === withFacts)
      out.sent = await send(r.store as unknown as SenderStore, join(dir, "facts.jsonl"), n);
    return out;
  } finally {
    await done();
    rmSync(dir, { recursive: true, force: true });
  }
}

type SenderStore = ConstructorParameters<typeof OutboxSender>[0]["store"];

/** Facts per second delivered to a file sink until all `n` are: passes back to back. */
async function send(store: SenderStore, path: string, n: number): Promise<number> {
  const sender = new OutboxSender({
    store,
    destinations: [
      { name: "file", types: ["task.*"], sink: new FileSink({ path }), batch: { maxFacts: 100 } },
    ],
    maxBatchesPerPass: 1_000,
    retentionMs: 0,
  });
  const t0 = performance.now();
  let facts = 0;
  for (let pass = 0; facts < n && pass < 10_000; pass++) facts += (await sender.runOnce()).facts;
  const secs = (performance.now() - t0) / 1000;
  await sender.stop();
  const lines = readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l !== "").length;
  if (facts !== n || lines !== n)
    throw new Error(`sender delivered ${facts} facts (${lines} lines), expected ${n}`);
  return n / secs;
}

export async function runOutboxBench(o: {
  stores: BenchStore[];
  pgUrl: string;
  tasks: number;
  runs: number;
}): Promise<StoreFigure[]> {
  const out: StoreFigure[] = [];
  for (const store of o.stores) {
    const add = (figure: string, unit: string, samples: number[]) =>
      out.push({ store, figure, unit, samples, median: median(samples) });
    const p: Drain[] = [];
    const f: Drain[] = [];
    for (let i = 0; i < o.runs; i++) {
      progress(`outbox ${store}: run ${i + 1}/${o.runs} (${o.tasks} tasks each way, then the sender)`);
      // Alternate which drain goes first, so a warming process or server favours neither.
      if (i % 2 === 0) {
        p.push(await drain(store, o.pgUrl, plain, o.tasks));
        f.push(await drain(store, o.pgUrl, withFacts, o.tasks));
      } else {
        f.push(await drain(store, o.pgUrl, withFacts, o.tasks));
        p.push(await drain(store, o.pgUrl, plain, o.tasks));
      }
    }
    add(
      `drain of instant tasks, ${AT_ONCE} at a time, no facts`,
      "tasks/s",
      p.map((d) => d.perSec),
    );
    add(
      "  the same tasks, each writing task.completed with its settlement",
      "tasks/s",
      f.map((d) => d.perSec),
    );
    add(
      "  wall time a fact adds per task",
      "µs",
      p.map((d, i) => 1e6 / f[i]!.perSec - 1e6 / d.perSec),
    );
    add(
      "  process CPU a fact adds per task",
      "µs",
      p.map((d, i) => f[i]!.cpuUs - d.cpuUs),
    );
    add(
      "sender: facts delivered to a file sink, batches of 100",
      "facts/s",
      f.map((d) => d.sent!),
    );
  }
  return out;
}

export const renderOutboxFigures = renderStoreFigures;

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      store: { type: "string", default: "both" },
      tasks: { type: "string", default: "5000" },
      runs: { type: "string", default: "3" },
      "pg-url": { type: "string" },
    },
  });
  const figs = await runOutboxBench({
    stores: storesOf(values.store),
    pgUrl: values["pg-url"] ?? process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    tasks: Number(values.tasks),
    runs: Number(values.runs),
  });
  process.stdout.write(`${renderOutboxFigures(figs)}\n`);
}
