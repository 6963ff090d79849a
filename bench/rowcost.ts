/**
 * The SQLite cost of a task's two row writes (its claim and its completion), measured on the
 * statements the store runs, outside the engine: what migration 6 (src/store/sqlite/migrations.ts)
 * is about.
 *
 *   npm run build && node dist/bench/rowcost.js [--rounds 11] [--tasks 20000]
 *
 * One file of N tasks is made by Ratchet (enqueueMany, then checkpointed). Each round copies it once
 * per variant and, on the copy, claims every task and completes it in chunks of 32 (the chunk size
 * of the store's claimMany and completeMany), one transaction each, timing the process's CPU:
 * - `case`: the schema as migrated (CHECKs as CASE expressions), the claim as the store runs it
 *   (`claimLean`: only the columns the claimer does not already know);
 * - `in-list`: the same file with ratchet_tasks' CHECKs put back as the IN lists of schema 5;
 * - `all-columns`: the schema as migrated, the claim returning all 22 CLAIM_COLUMNS (`claimIn`, as
 *   claims of many did before the lean form);
 * - `-trigger`: without the seat-release trigger (an AFTER UPDATE OF status row trigger: its program
 *   runs for every row a claim or a completion updates, to test its WHEN);
 * - `-rare indexes`: without the ten partial indexes a plain task never enters (each update of
 *   `status` tests their predicates on the old and the new row).
 * Variants alternate within a round, so drift on the machine falls on both; the table gives the
 * median over rounds, in µs per task, and the ratio.
 */
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import Database from "better-sqlite3";
import { defineTask, Ratchet, silentLogger } from "../src/index.js";
import { completeIn } from "../src/store/sqlite/holder.js";
import { CHECK_SWAPS, rewriteTable } from "../src/store/sqlite/migrations.js";
import { claimIn, claimLean } from "../src/store/sqlite/sql.js";
import { RARE_INDEXES } from "./indexes.js";
import { median } from "./stats.js";

const { values: args } = parseArgs({
  options: { rounds: { type: "string", default: "11" }, tasks: { type: "string", default: "20000" } },
});
const ROUNDS = Number(args.rounds);
const N = Number(args.tasks);
const CHUNK = 32;
if (!Number.isInteger(ROUNDS) || ROUNDS < 1 || !Number.isInteger(N) || N < CHUNK || N % CHUNK !== 0)
  throw new Error(`--rounds must be >= 1 and --tasks a multiple of ${CHUNK}`);

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

const dir = mkdtempSync(join(tmpdir(), "ratchet-rowcost-"));
try {
  const template = join(dir, "template.db");
  const noop = defineTask({ name: "noop", run: () => null });
  const r = await Ratchet.open({ store: `sqlite:${template}`, tasks: [noop], logger: silentLogger });
  for (let i = 0; i < N; i += 1_000) {
    const n = Math.min(1_000, N - i);
    await r.enqueueMany(Array.from({ length: n }, (_, j) => ({ task: noop, input: { seq: i + j } })));
  }
  await r.close();
  const t = new Database(template);
  t.pragma("wal_checkpoint(TRUNCATE)");
  t.close();

  // Each variant: how the copy is changed, the claim's text, and where its rows carry the epoch.
  type Variant = { prepare: (db: Database.Database) => void; claim: string; epoch: number };
  const lean = { claim: claimLean(CHUNK), epoch: 7 };
  const variants: Record<string, Variant> = {
    case: { prepare: () => {}, ...lean },
    "in-list": {
      prepare: (db) => {
        let text = db
          .prepare("SELECT sql FROM sqlite_schema WHERE name = 'ratchet_tasks'")
          .pluck()
          .get() as string;
        for (const [old, now] of CHECK_SWAPS) text = text.replace(now, old);
        rewriteTable(db, "ratchet_tasks", text);
      },
      ...lean,
    },
    "all-columns": { prepare: () => {}, claim: claimIn(CHUNK), epoch: 9 },
    "-trigger": { prepare: (db) => db.exec("DROP TRIGGER ratchet_seat_release"), ...lean },
    "-rare indexes": {
      prepare: (db) => {
        for (const ix of RARE_INDEXES) db.exec(`DROP INDEX ${ix}`);
      },
      ...lean,
    },
  };
  const samples: Record<string, { claim: number[]; complete: number[] }> = {};
  let copy = 0;
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, variant] of Object.entries(variants)) {
      const file = join(dir, `copy-${copy++}.db`);
      copyFileSync(template, file);
      const db = new Database(file);
      db.pragma("journal_mode = WAL");
      db.pragma("synchronous = NORMAL");
      variant.prepare(db);
      const select = db
        .prepare(
          `SELECT id FROM ratchet_tasks WHERE queue = 'default' AND status = 'pending' ORDER BY order_key, id LIMIT ${CHUNK}`,
        )
        .pluck();
      const claim = db.prepare(variant.claim).raw(true);
      const complete = db.prepare(completeIn(CHUNK));
      const now = Date.now();
      let claimMs = 0;
      let completeMs = 0;
      for (let done = 0; done < N; done += CHUNK) {
        const t0 = cpuMs();
        db.exec("BEGIN IMMEDIATE");
        const ids = select.all() as number[];
        const rows = claim.all({ now, grace: 1_000, worker: "w" }, ...ids) as unknown[][];
        db.exec("COMMIT");
        const t1 = cpuMs();
        db.exec("BEGIN IMMEDIATE");
        // id, token (the epoch), result.
        const values = rows.flatMap((row) => [row[0], row[variant.epoch], "null"]);
        const completed = complete.all({ now }, ...values).length;
        db.exec("COMMIT");
        completeMs += cpuMs() - t1;
        claimMs += t1 - t0;
        if (rows.length !== CHUNK || completed !== CHUNK)
          throw new Error(`${name}: claimed ${rows.length} and completed ${completed} of ${CHUNK}`);
      }
      db.close();
      rmSync(file, { force: true });
      samples[name] ??= { claim: [], complete: [] };
      const s = samples[name];
      s.claim.push((claimMs * 1_000) / N);
      s.complete.push((completeMs * 1_000) / N);
    }
    process.stderr.write(`round ${round + 1}/${ROUNDS}\n`);
  }
  const total = (name: string) => median(samples[name]!.claim) + median(samples[name]!.complete);
  console.log(`${N} tasks, chunks of ${CHUNK}, ${ROUNDS} rounds; CPU µs per task (median over rounds)\n`);
  console.log("| variant | claim + commit | complete + commit | both |");
  console.log("| --- | ---: | ---: | ---: |");
  for (const name of Object.keys(variants)) {
    const s = samples[name]!;
    console.log(
      `| ${name} | ${median(s.claim).toFixed(2)} | ${median(s.complete).toFixed(2)} | ${total(name).toFixed(2)} |`,
    );
  }
  console.log(`\nin-list / case: ${(total("in-list") / total("case")).toFixed(2)}×`);
  for (const name of ["-trigger", "-rare indexes"])
    console.log(`${name} / case: ${(total(name) / total("case")).toFixed(2)}×`);
  console.log(
    `all-columns / case, the claim alone: ${(median(samples["all-columns"]!.claim) / median(samples.case!.claim)).toFixed(2)}×`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
