/**
 * What the parts of a PostgreSQL task's two batched writes cost the server: the fast claim
 * (src/store/postgres/sql.ts, claimFast) or the completion (holder.ts, completeManySql), each
 * beside variants of its text or of its table, the statement alone.
 *
 *   npm run build && node dist/bench/claimshape.js [--part claim|complete] [--tasks 61440] [--rounds 5] [--only own,-text] [--pg-url postgres://…]
 *   (`--only` also sets the order of the variants in each round; ratios are to its first)
 *
 * Each variant is a fresh schema: the store migrates it, `--tasks` no-ops are enqueued (payloads
 * shaped like the peers harness's), the variant's table changes are applied, VACUUM ANALYZE, and the
 * store's pool is closed. `--part claim`: one new connection runs claimFast(512), compiled as the
 * store compiles it (named.ts), until every task is claimed. `--part complete`: every task is first
 * claimed (untimed, by the store's own claim), then the completions of each 512 in claim order, as
 * a worker's settle batch sends them (results "null"), are timed. Nothing else runs. Reported per
 * task, medians over the rounds: the client's wall time of the timed statements (commits and round
 * trips included), the CPU time of every postgres process of this machine over them (from /proc;
 * the server must be local), and that CPU as a ratio to the first variant's in the same round (the
 * machine's speed drifts between rounds more than the variants differ). A variant whose edit no
 * longer matches the statement's text fails the run. Variants of the claim:
 * - `own`: the statement as the store sends it;
 * - `-text`: each claimed task returned as its id alone, not the JSON of its values (claimRowText);
 * - `name-pos`: the name as its 1-based position in :names instead of to_json(name);
 * - `-input`: the input left out of each task's JSON;
 * - `-findings`: the update without its guard on the findings (expired, gated, promoted);
 * - `-ready`: the update without READY re-checked on the locked rows.
 * Of the completion:
 * - `own`: the statement as a worker's first settle statement sends it (plain completions);
 * - `-counts`: without the queue counter's upsert;
 * - `-result`: the result a constant, not sliced out of the batch's text;
 * - `-returning`: the count alone returned, not the rows with more to do;
 * - `-fence`: without the epoch test (measurement only: the fence is spec §3.7).
 * Of the table, for both: `-trigger`, `-checks`, `-rare indexes`: without the seat-release trigger,
 * its CHECK constraints, or the partial indexes a plain task never has an entry in
 * (bench/indexes.ts; the wake index stays, the claim's promotion searches it). And for both,
 * `floor-lease`: floor-lease-pg's own table and statement (bench/floor-sql.ts: what Ratchet's rules
 * ask of a claim and a completion and nothing else), filled and run the same way: how far the
 * store's statement is from the floor of its part.
 */
import { parseArgs } from "node:util";
import pg from "pg";
import { completeManySql, resultSlices, sortedUnique } from "../src/store/postgres/holder.js";
import { bind, compile } from "../src/store/postgres/named.js";
import { PostgresStore } from "../src/store/postgres/postgres-store.js";
import { claimFast } from "../src/store/postgres/sql.js";
import type { NewTask, Settlement } from "../src/store/store.js";
import { fillFloorPg, floorLeaseClaim, floorLeaseComplete } from "./floor-sql.js";
import { dropChecks, RARE_INDEXES } from "./indexes.js";
import { median, postgresCpuMs } from "./stats.js";

const { values: args } = parseArgs({
  options: {
    part: { type: "string", default: "claim" },
    tasks: { type: "string", default: "61440" },
    rounds: { type: "string", default: "5" },
    only: { type: "string" },
    "pg-url": {
      type: "string",
      default: process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    },
  },
});
/** A prefetching worker's refill (a multiple of CLAIM_STEP: the store keeps one plan per size). */
const CLAIM = 512;
const N = Number(args.tasks);
const ROUNDS = Number(args.rounds);
if (!Number.isInteger(N) || N < CLAIM || N > 1_048_576 || N % CLAIM !== 0)
  throw new Error(`--tasks must be a multiple of ${CLAIM} in [${CLAIM}, 1048576]`);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1 || ROUNDS > 20) throw new Error("--rounds must be in [1, 20]");
const URL = args["pg-url"]!;
const PART = args.part;
if (PART !== "claim" && PART !== "complete") throw new Error("--part is claim or complete");

/** Replaces `from` in the statement, and fails loudly if it is not there (a variant that changed nothing). */
function edit(sql: string, from: string | RegExp, to: string, variant: string): string {
  const out = sql.replace(from, to);
  if (out === sql) throw new Error(`variant ${variant}: its edit no longer matches the statement's text`);
  return out;
}

const ROW_TEXT = /concat\('\[', t\.id,[\s\S]*?'\]'\) AS r/;

interface Variant {
  name: string;
  /** The part's SQL (with {s} and :named parameters) for this variant. */
  sql: (own: string) => string;
  /** Changes to the variant's table, `t` its quoted name. */
  table?: (t: string) => string[];
  /** Changes to the variant's table made through the admin connection. */
  tables?: (c: pg.Client, t: string) => Promise<void>;
  /** floor-lease-pg's table and statements instead of the store's (`sql` unused). */
  floor?: true;
}

/** Every variant of `list` at once: their edits of the statement and of the table, in order. */
function together(name: string, list: Variant[]): Variant {
  return {
    name,
    sql: (own) => list.reduce((s, v) => v.sql(s), own),
    table: (t) => list.flatMap((v) => v.table?.(t) ?? []),
    tables: async (c, t) => {
      for (const v of list) await v.tables?.(c, t);
    },
  };
}

const FLOOR: Variant = { name: "floor-lease", sql: (s) => s, floor: true };

const TABLE: Variant[] = [
  {
    name: "-trigger",
    sql: (s) => s,
    table: (t) => [`DROP TRIGGER ratchet_seat_release ON ${t}`],
  },
  { name: "-checks", sql: (s) => s, tables: dropChecks },
  {
    name: "-rare indexes",
    sql: (s) => s,
    table: (t) =>
      RARE_INDEXES.filter((n) => !n.endsWith("_wake")).map(
        (n) => `DROP INDEX ${t.slice(0, t.lastIndexOf("."))}.${n}`,
      ),
  },
];
const CLAIM_VARIANTS: Variant[] = [
  { name: "own", sql: (s) => s },
  { name: "-text", sql: (s) => edit(s, ROW_TEXT, "t.id::text AS r", "-text") },
  {
    name: "name-pos",
    sql: (s) => edit(s, "to_json(t.name)", "array_position(:names::text[], t.name)", "name-pos"),
  },
  {
    name: "-input",
    sql: (s) => edit(s, /THEN 'null' ELSE t\.input END/, "THEN 'null' ELSE 'null' END", "-input"),
  },
  {
    name: "-findings",
    sql: (s) => edit(s, "NOT (SELECT expired OR gated OR promoted > 0 FROM f) AND ", "", "-findings"),
  },
  {
    name: "-ready",
    sql: (s) => edit(s, /AND \(t\.status = 'pending' OR[\s\S]*?t\.wake_at <= :now\)\)/, "", "-ready"),
  },
  ...TABLE,
  FLOOR,
];
const COMPLETE_VARIANTS: Variant[] = [
  { name: "own", sql: (s) => s },
  {
    name: "-counts",
    sql: (s) => edit(s, /counted AS \([\s\S]*?RETURNING 1\),/, "", "-counts"),
  },
  {
    name: "-result",
    sql: (s) =>
      edit(s, /result = convert_from\([\s\S]*?'UTF8'\), ended_at/, "result = 'null', ended_at", "-result"),
  },
  {
    name: "-returning",
    sql: (s) =>
      edit(
        s,
        /SELECT n\.applied, d\.id[\s\S]*$/,
        "SELECT n.applied, NULL::bigint AS id, 0 AS token, 0 AS dependents, false AS tree FROM n",
        "-returning",
      ),
  },
  {
    name: "-fence",
    sql: (s) =>
      edit(
        edit(
          s,
          /AND t\.epoch = \(:tokens::int\[\]\)\[width_bucket\(t\.id, :ids::bigint\[\]\)\]/,
          "",
          "-fence",
        ),
        /AND t\.claimed_at = \(:claimed::bigint\[\]\)\[width_bucket\(t\.id, :ids::bigint\[\]\)\]/,
        "",
        "-fence",
      ),
  },
  ...TABLE,
  {
    name: "-ended index",
    sql: (s) => s,
    table: (t) => [`DROP INDEX ${t.slice(0, t.lastIndexOf("."))}.ratchet_tasks_ended`],
  },
  FLOOR,
];
// All of the claim's and its table's variants above at once (-text covers -input and name-pos).
CLAIM_VARIANTS.splice(
  CLAIM_VARIANTS.length - 1,
  0,
  together(
    "-all",
    CLAIM_VARIANTS.filter((v) => !["own", "-input", "name-pos"].includes(v.name) && !v.floor),
  ),
);
// All of the completion's and its table's variants above at once (but the fence, which §3.7 needs):
// what is left is the row's own write, to set beside the floor's.
COMPLETE_VARIANTS.splice(
  COMPLETE_VARIANTS.length - 1,
  0,
  together(
    "-all",
    COMPLETE_VARIANTS.filter((v) => v.name !== "own" && v.name !== "-fence" && !v.floor),
  ),
);
const ALL = PART === "claim" ? CLAIM_VARIANTS : COMPLETE_VARIANTS;
const wanted = args.only?.split(",").map((s) => s.trim());
const VARIANTS = wanted
  ? wanted.map((n) => {
      const v = ALL.find((x) => x.name === n);
      if (!v) throw new Error(`unknown variant ${n}; known: ${ALL.map((x) => x.name).join(", ")}`);
      return v;
    })
  : ALL;

const noop = (seq: number): NewTask => ({
  name: "noop",
  version: 1,
  queue: "default",
  input: JSON.stringify({ seq, enqueuedAt: Date.now() }),
  priority: 0,
  maxMs: 60_000,
  maxAttempts: 3,
  delayMs: 0,
  dedupe: null,
  job: null,
  needs: [],
});

const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));

/** A fresh schema with N pending no-ops, the variant's table changes applied, analyzed. */
async function prepare(admin: pg.Client, schema: string, v: Variant): Promise<void> {
  if (v.floor) {
    // Its own schema and table, filled in batches of 1,000, vacuumed and analyzed.
    await fillFloorPg(admin, schema, N, "lease");
    await sleep(300);
    return;
  }
  const store = new PostgresStore({ connectionString: URL, schema, poolMax: 2 });
  try {
    await store.migrate();
    for (let i = 0; i < N; i += 1_024)
      await store.enqueue(
        Array.from({ length: Math.min(1_024, N - i) }, (_, j) => noop(i + j)),
        { maxDepth: () => 2_000_000 },
      );
  } finally {
    await store.close();
  }
  const t = `"${schema}".ratchet_tasks`;
  for (const sql of v.table?.(t) ?? []) await admin.query(sql);
  await v.tables?.(admin, t);
  await admin.query(`VACUUM ANALYZE ${t}`);
  // The store's backends exit: a process that ends takes its CPU time out of /proc's sum.
  await sleep(300);
}

type Completion = Extract<Settlement, { kind: "complete" }>;

/** Runs the claim `sql` (a variant's or the store's own) on `c`: the claimed tasks' tuples (sql.ts claimRowText). */
function claimer(c: pg.Client, sql: string, schema: string, variant: string) {
  const compiled = compile(sql, `"${schema}"`);
  const values = bind(compiled, {
    now: null,
    grace: 10_000,
    worker: "claimshape",
    queue: "default",
    queues: ["default"],
    names: ["noop"],
    limit: CLAIM,
  });
  /** The claimed tuples, and the claim's time (every fence carries it, spec §3.7). */
  return async (): Promise<{ at: number; tuples: unknown[][] }> => {
    const res = await c.query({ name: compiled.name, text: compiled.text, values });
    const row = res.rows[0] as { full: boolean | null; claim_now: number; rows: string | null };
    if (row.full) throw new Error(`variant ${variant}: the fast claim deferred to the full one`);
    return {
      at: Number(row.claim_now),
      tuples: row.rows === null ? [] : (JSON.parse(row.rows) as unknown[][]),
    };
  };
}

/** One variant's two statements: a claim (its batch), and the completion of a claimed batch. */
interface Part<B> {
  claim: () => Promise<B>;
  size: (b: B) => number;
  /** Completes a batch; how many tasks it completed. */
  complete: (b: B) => Promise<number>;
  /** Runs after the untimed claims of `--part complete`, before the clock. */
  beforeCompletions?: () => Promise<void>;
}

/**
 * The timed statements of the part on `c` (for completions, every task claimed first, untimed):
 * the client's wall time and the server's CPU, ms.
 */
async function timedPart<B>(
  c: pg.Client,
  variant: string,
  p: Part<B>,
): Promise<{ wallMs: number; cpuMs: number }> {
  const batches: B[] = [];
  if (PART === "complete") {
    for (let i = 0; i < N / CLAIM; i++) batches.push(await p.claim());
    await p.beforeCompletions?.();
  }
  await c.query("SELECT 1");
  await sleep(100);
  const cpu0 = postgresCpuMs();
  const t0 = performance.now();
  let done = 0;
  if (PART === "claim") for (let i = 0; i < N / CLAIM; i++) done += p.size(await p.claim());
  else for (const b of batches) done += await p.complete(b);
  const wallMs = performance.now() - t0;
  const cpuMs = postgresCpuMs() - cpu0;
  if (done !== N)
    throw new Error(`variant ${variant}: ${PART === "claim" ? "claimed" : "completed"} ${done} of ${N}`);
  return { wallMs, cpuMs };
}

/** A variant's part on one new connection: the store's statements, or the floor's. */
async function timed(schema: string, v: Variant): Promise<{ wallMs: number; cpuMs: number }> {
  const c = new pg.Client(URL);
  await c.connect();
  try {
    return v.floor
      ? await timedPart(c, v.name, floorPart(c, schema))
      : await timedPart(c, v.name, storePart(c, schema, v));
  } finally {
    await c.end();
  }
}

/** The store's claim (or a variant's) and its completion (or a variant's), as a worker sends them. */
function storePart(c: pg.Client, schema: string, v: Variant): Part<Completion[]> {
  const claim = claimer(c, PART === "claim" ? v.sql(claimFast(CLAIM)) : claimFast(CLAIM), schema, v.name);
  // A variant's edit is of its own part's statement: the completion is compiled for that part only.
  const complete = PART === "complete" ? compile(v.sql(completeManySql(true)), `"${schema}"`) : undefined;
  return {
    claim: async () => {
      const { at, tuples } = await claim();
      return tuples.map((t) => ({
        kind: "complete",
        fence: { taskId: t[0] as number, token: t[7] as number, claimedAt: at },
        result: "null",
      }));
    },
    size: (b) => b.length,
    async complete(batch) {
      const unique = sortedUnique(batch);
      const values = bind(complete!, {
        now: null,
        ids: unique.map((x) => x.fence.taskId),
        tokens: unique.map((x) => x.fence.token),
        claimed: unique.map((x) => x.fence.claimedAt),
        ...resultSlices(unique),
        shard: 0,
        total: batch.length,
      });
      const res = await c.query({ name: complete!.name, text: complete!.text, values });
      return (res.rows[0] as { applied: number }).applied;
    },
  };
}

/** floor-lease-pg's claim of CLAIM and its fenced completion (bench/floor-sql.ts). */
function floorPart(c: pg.Client, schema: string): Part<{ id: string; epoch: number; claimed_at: string }[]> {
  const t = `"${schema}".floor_jobs`;
  return {
    claim: async () =>
      (
        (
          await c.query({
            name: `floor-claim-${schema}`,
            text: floorLeaseClaim(t, CLAIM),
            values: ["claimshape", Date.now()],
          })
        ).rows as { id: string; epoch: number; claimed_at: string }[]
      ).sort((a, b) => Number(a.id) - Number(b.id)),
    size: (b) => b.length,
    async complete(b) {
      const res = await c.query({
        name: `floor-complete-${schema}`,
        text: floorLeaseComplete(t),
        values: [b.map((x) => x.id), b.map((x) => x.epoch), Date.now(), b.map((x) => x.claimed_at)],
      });
      return res.rowCount ?? 0;
    },
    // Its completion tests the status plainly, so with statistics from when every job was pending
    // the planner scans the lease index (all N running now) for each batch: ~100 µs per job. The
    // store's own completion hides its status test in a CASE for this reason (holder.ts); here the
    // table is analyzed again instead, as autovacuum would have done in a harness drain.
    beforeCompletions: async () => {
      await c.query(`ANALYZE ${t}`);
    },
  };
}

const admin = new pg.Client(URL);
await admin.connect();
const samples = new Map(VARIANTS.map((v) => [v.name, { wall: [] as number[], cpu: [] as number[] }]));
const ratios = new Map(VARIANTS.map((v) => [v.name, [] as number[]]));
try {
  for (let round = 0; round < ROUNDS; round++) {
    let first = 0;
    for (const v of VARIANTS) {
      const schema = `claimshape_${process.pid}`;
      try {
        await prepare(admin, schema, v);
        const r = await timed(schema, v);
        const s = samples.get(v.name)!;
        s.wall.push((r.wallMs * 1_000) / N);
        s.cpu.push((r.cpuMs * 1_000) / N);
        if (v === VARIANTS[0]) first = r.cpuMs;
        ratios.get(v.name)!.push(r.cpuMs / first);
        console.error(
          `round ${round + 1} ${v.name}: wall ${s.wall.at(-1)!.toFixed(2)}, server CPU ${s.cpu.at(-1)!.toFixed(2)} µs/task`,
        );
      } finally {
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      }
    }
  }
} finally {
  await admin.end();
}
console.log(
  `\n${PART === "claim" ? "Claims" : "Completions"} of ${CLAIM} over ${N} tasks; medians of ${ROUNDS} round(s), µs per task\n`,
);
console.log(`| variant | wall | server CPU | server CPU / ${VARIANTS[0]!.name}, same round |`);
console.log("| --- | ---: | ---: | ---: |");
for (const v of VARIANTS) {
  const s = samples.get(v.name)!;
  console.log(
    `| ${v.name} | ${median(s.wall).toFixed(2)} | ${median(s.cpu).toFixed(2)} | ${median(ratios.get(v.name)!).toFixed(3)} |`,
  );
}
