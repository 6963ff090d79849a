/**
 * What a task's row costs the PostgreSQL server, taken apart (docs/benchmarks-peers.md, "Where a
 * PostgreSQL task's cost goes").
 *
 *   npm run build && node dist/bench/pgshape.js [--tasks 60000] [--rounds 2] [--only ratchet,narrow] [--pg-url postgres://…]
 *   (`--only` also sets the order of the variants in each round; ratios are to its first)
 *
 * Each variant is a fresh schema: Ratchet migrates it, the variant's change is applied, `--tasks`
 * no-ops are enqueued, VACUUM ANALYZE; then claims of 512 and the completion of each claim, one after
 * the other on one connection, until every task has completed. Nothing else runs, so the time is
 * the statements' own. Variants:
 * - `ratchet`: the store's own claim and settle (PostgresStore.claim / settle);
 * - `bare`: one UPDATE claiming 512 (the candidates locked with SKIP LOCKED, reached by ctid) and one
 *   UPDATE completing them: the two row writes and nothing else of Ratchet's;
 * - `… ff100`: the table at fillfactor 100, as before migration 8;
 * - `bare -lease -ended`: without the two indexes each task adds an entry to;
 * - `bare -checks`: without the table's CHECK constraints;
 * - `bare -rare indexes`: without the ten partial indexes a plain task never has an entry in (every
 *   non-HOT update still tests each one's predicate);
 * - `bare -lock`: the claim without FOR UPDATE SKIP LOCKED (the lock's own write);
 * - `bare -trigger`: without the seat-release trigger (AFTER UPDATE OF status, with a WHEN);
 * - `bare -trigger -checks -rare indexes`: without all three;
 * - `bare slim`: the table rebuilt with only the 23 columns that hold values on a plain task (no
 *   CHECKs, the primary key and the ready, lease and ended indexes): what the row's width costs;
 * - `narrow`: a sketch of the hot columns (status, order, attempts, epoch, lease and times) in a
 *   table of their own with the ready, lease and ended indexes; the claim reads the input from the
 *   wide row by primary key, the completion writes only the hot row;
 * - `archive`: the bare claim, and a completion that moves the row out instead of rewriting it: a
 *   DELETE of the running rows and an INSERT of their terminal record into a table of its own (the
 *   primary key and an index on the end time): what ending a task would cost if finished tasks
 *   lived apart from live ones;
 * - `bare enum`, `ratchet enum`: status and outcome as enum types instead of text, after the tasks
 *   are enqueued (the enqueue functions insert text); each index, CHECK and trigger that names them
 *   made again from its own definition: whether the text comparisons of status in every partial
 *   index's predicate, the CHECKs and the trigger's WHEN are where the time goes (they were not:
 *   bench/README.md);
 * - `ratchet -trigger`, `ratchet -checks`, `ratchet -rare indexes` and all three: the store's own
 *   statements on the table without them (the wake index stays: the claim looks for due timers in it);
 * - `floor-pg`: floor-pg's own table and statements (bench/floor-sql.ts).
 * Reported per task, medians of `--rounds`: from pg_stat_statements when the server loads it (the
 * execution time of the statements on the variant's schema: claims, the rest), else the client's
 * wall time of the calls (round trips and commits included); and the CPU time of every postgres
 * process of this machine over the drain (from /proc, the server must be local), which counts what
 * the statements' times leave out (parse, bind, commit, WAL) and what a busy VM's other tenants do
 * to wall time less.
 */
import { parseArgs } from "node:util";
import pg from "pg";
import { defineTask, Ratchet, silentLogger } from "../src/index.js";
import { PostgresStore } from "../src/store/postgres/postgres-store.js";
import { fillFloorPg, floorPgClaim, floorPgComplete } from "./floor-sql.js";
import { dropChecks, RARE_INDEXES } from "./indexes.js";
import { median, postgresCpuMs } from "./stats.js";

const { values: args } = parseArgs({
  options: {
    tasks: { type: "string", default: "60000" },
    rounds: { type: "string", default: "2" },
    only: { type: "string" },
    "pg-url": {
      type: "string",
      default: process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    },
  },
});
const N = Number(args.tasks);
const ROUNDS = Number(args.rounds);
if (!Number.isInteger(N) || N < 1_000 || N > 1_000_000 || N % 1_000 !== 0)
  throw new Error("--tasks must be a multiple of 1,000 in [1000, 1000000]");
if (!Number.isInteger(ROUNDS) || ROUNDS < 1 || ROUNDS > 20) throw new Error("--rounds must be in [1, 20]");
const URL = args["pg-url"]!;
/** A refill of a prefetching worker: a multiple of CLAIM_STEP, so the store keeps its large claim's plan (sql.ts). */
const CLAIM = 512;

interface Variant {
  name: string;
  /** Whose statements: the store's own, the bare two UPDATEs, floor-pg's, or the narrow sketch's. */
  kind: "own" | "bare" | "floor" | "narrow" | "archive";
  fillfactor?: number;
  drop?: string[];
  noChecks?: boolean;
  /** The table rebuilt with its 23 columns that hold values on a plain task, no CHECKs, three indexes. */
  slim?: boolean;
  /** The bare claim without FOR UPDATE SKIP LOCKED (one claimer here, so nothing to skip). */
  noLock?: boolean;
  /** Without the seat-release trigger (an AFTER UPDATE OF status row trigger with a WHEN). */
  noTrigger?: boolean;
  /** status and outcome as enum types instead of text (indexes, CHECKs and the trigger rebuilt). */
  enums?: boolean;
}
/** The rare indexes without the wake index, which the store's claim searches for due timers (spec §3.4). */
const RATCHET_RARE = RARE_INDEXES.filter((n) => !n.endsWith("_wake"));
const ALL: Variant[] = [
  { name: "ratchet", kind: "own" },
  { name: "ratchet ff100", kind: "own", fillfactor: 100 },
  { name: "ratchet -trigger", kind: "own", noTrigger: true },
  { name: "ratchet -checks", kind: "own", noChecks: true },
  { name: "ratchet -rare indexes", kind: "own", drop: RATCHET_RARE },
  {
    name: "ratchet -trigger -checks -rare indexes",
    kind: "own",
    noTrigger: true,
    noChecks: true,
    drop: RATCHET_RARE,
  },
  { name: "bare", kind: "bare" },
  { name: "bare ff100", kind: "bare", fillfactor: 100 },
  { name: "bare -lease -ended", kind: "bare", drop: ["ratchet_tasks_lease", "ratchet_tasks_ended"] },
  { name: "bare -checks", kind: "bare", noChecks: true },
  { name: "narrow", kind: "narrow" },
  { name: "archive", kind: "archive" },
  { name: "bare slim", kind: "bare", slim: true },
  { name: "bare -rare indexes", kind: "bare", drop: RARE_INDEXES },
  { name: "bare -lock", kind: "bare", noLock: true },
  { name: "bare -trigger", kind: "bare", noTrigger: true },
  {
    name: "bare -trigger -checks -rare indexes",
    kind: "bare",
    noTrigger: true,
    noChecks: true,
    drop: RARE_INDEXES,
  },
  { name: "bare enum", kind: "bare", enums: true },
  { name: "ratchet enum", kind: "own", enums: true },
  { name: "floor-pg", kind: "floor" },
];
const ONLY = args.only?.split(",");
// In the order --only gives them: each round runs them in that order, and the first is the one the
// others' ratios are to, so a variant's place in the round can be tested (the first of a round runs
// right after the previous round's last schema was dropped).
const VARIANTS = ONLY
  ? ONLY.map((name) => {
      const v = ALL.find((x) => x.name === name);
      if (!v)
        throw new Error(`--only: no variant "${name}"; there are: ${ALL.map((x) => x.name).join(", ")}`);
      return v;
    })
  : ALL;

const noop = defineTask({ name: "noop", run: () => null });

async function prepare(admin: pg.Client, schema: string, v: Variant): Promise<void> {
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  if (v.kind === "floor") {
    await fillFloorPg(admin, schema, N);
    return;
  }
  const r = await Ratchet.open({
    store: URL,
    postgres: { schema },
    tasks: [noop],
    logger: silentLogger,
    maxDepth: 2_000_000,
  });
  try {
    const t = `"${schema}".ratchet_tasks`;
    if (v.fillfactor) await admin.query(`ALTER TABLE ${t} SET (fillfactor = ${v.fillfactor})`);
    for (const ix of v.drop ?? []) await admin.query(`DROP INDEX "${schema}".${ix}`);
    if (v.noTrigger) await admin.query(`DROP TRIGGER ratchet_seat_release ON ${t}`);
    if (v.noChecks) await dropChecks(admin, t);
    for (let i = 0; i < N; i += 1_000)
      await r.enqueueMany(Array.from({ length: 1_000 }, (_, j) => ({ task: noop, input: { seq: i + j } })));
    // After the rows are in: the enqueue functions insert text.
    if (v.enums) await toEnums(admin, schema);
  } finally {
    await r.close();
  }
  if (v.slim) {
    const t = `"${schema}".ratchet_tasks`;
    await admin.query(`ALTER TABLE ${t} RENAME TO wide`);
    await admin.query(
      `CREATE TABLE ${t} WITH (fillfactor = 50) AS SELECT id, queue, name, version, input, status, outcome, result, priority, order_key, max_ms, attempts, max_attempts, epoch, run_after, wake_at, lease_until, locked_by, created_at, updated_at, started_at, claimed_at, ended_at FROM "${schema}".wide`,
    );
    await admin.query(`ALTER TABLE ${t} ADD PRIMARY KEY (id)`);
    await admin.query(`CREATE INDEX ON ${t} (queue, order_key, id) WHERE status = 'pending'`);
    await admin.query(`CREATE INDEX ON ${t} (lease_until) WHERE status = 'running'`);
    await admin.query(`CREATE INDEX ON ${t} (ended_at) WHERE status = 'terminal'`);
  }
  if (v.kind === "archive") {
    const d = `"${schema}".done`;
    await admin.query(
      `CREATE TABLE ${d} (id bigint PRIMARY KEY, queue text NOT NULL, name text NOT NULL, version integer NOT NULL,
         input text NOT NULL, outcome text NOT NULL, result text, priority integer NOT NULL, attempts integer NOT NULL,
         max_attempts integer NOT NULL, epoch integer NOT NULL, created_at bigint NOT NULL, started_at bigint,
         claimed_at bigint, ended_at bigint NOT NULL)`,
    );
    await admin.query(`CREATE INDEX ON ${d} (ended_at)`);
  }
  if (v.kind === "narrow") {
    // The hot columns in a table of their own, with the three indexes a task's claim and completion
    // add entries to; everything else stays in ratchet_tasks and is only read.
    const h = `"${schema}".hot`;
    await admin.query(
      `CREATE TABLE ${h} WITH (fillfactor = 50) AS SELECT id, queue, status, order_key, max_ms, attempts, epoch,
         lease_until, locked_by, claimed_at, started_at, updated_at, ended_at FROM "${schema}".ratchet_tasks`,
    );
    await admin.query(`ALTER TABLE ${h} ADD PRIMARY KEY (id)`);
    await admin.query(`CREATE INDEX ON ${h} (queue, order_key, id) WHERE status = 'pending'`);
    await admin.query(`CREATE INDEX ON ${h} (lease_until) WHERE status = 'running'`);
    await admin.query(`CREATE INDEX ON ${h} (ended_at) WHERE status = 'terminal'`);
    await admin.query(`VACUUM ANALYZE ${h}`);
  }
  await admin.query(`VACUUM ANALYZE "${schema}".ratchet_tasks`);
}

/**
 * status and outcome become enums: every index, CHECK and trigger that names them is dropped, the
 * columns change type, and each is made again from its own definition (the `::text` casts of its
 * literals removed, so they resolve to the enum).
 */
async function toEnums(admin: pg.Client, schema: string): Promise<void> {
  const t = `"${schema}".ratchet_tasks`;
  const q = async <R>(sql: string, values: unknown[] = []) => (await admin.query(sql, values)).rows as R[];
  const ixs = await q<{ name: string; def: string }>(
    `SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS def FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
     WHERE i.indrelid = $1::regclass AND pg_get_indexdef(i.indexrelid) ~ '(status|outcome)'`,
    [t],
  );
  const cks = await q<{ name: string; def: string }>(
    "SELECT conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'c'",
    [t],
  );
  const tgs = await q<{ name: string; def: string }>(
    "SELECT tgname AS name, pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal",
    [t],
  );
  const bare = (d: string) => d.replaceAll("::text", "").replace(/= ANY \(ARRAY\[([^\]]*)\]\)/g, "IN ($1)");
  for (const x of ixs) await admin.query(`DROP INDEX "${schema}"."${x.name}"`);
  for (const x of cks) await admin.query(`ALTER TABLE ${t} DROP CONSTRAINT "${x.name}"`);
  for (const x of tgs) await admin.query(`DROP TRIGGER "${x.name}" ON ${t}`);
  await admin.query(
    `CREATE TYPE "${schema}".task_status AS ENUM ('pending','running','waiting','completing','terminal')`,
  );
  await admin.query(
    `CREATE TYPE "${schema}".task_outcome AS ENUM ('completed','failed','aborted','upstream_failed','orphaned','faulted')`,
  );
  await admin.query(
    `ALTER TABLE ${t} ALTER COLUMN status TYPE "${schema}".task_status USING status::"${schema}".task_status,
       ALTER COLUMN outcome TYPE "${schema}".task_outcome USING outcome::"${schema}".task_outcome`,
  );
  for (const x of ixs) await admin.query(bare(x.def));
  for (const x of cks) await admin.query(`ALTER TABLE ${t} ADD CONSTRAINT "${x.name}" ${bare(x.def)}`);
  for (const x of tgs) await admin.query(bare(x.def));
}

/**
 * Claims until all N tasks are claimed, completing each claim before the next; the client's wall
 * time of the claims and of the completions, ms.
 */
async function timedDrain<R>(
  claim: () => Promise<R[]>,
  complete: (rows: R[]) => Promise<unknown>,
): Promise<[number, number]> {
  let claimMs = 0;
  let settleMs = 0;
  for (let done = 0; done < N; ) {
    let t0 = performance.now();
    const rows = await claim();
    claimMs += performance.now() - t0;
    if (rows.length === 0) throw new Error(`claimed nothing with ${N - done} tasks left`);
    t0 = performance.now();
    await complete(rows);
    settleMs += performance.now() - t0;
    done += rows.length;
  }
  return [claimMs, settleMs];
}

/** Claims and completions of floor-pg's statements (bench/floor-sql.ts) over its table. */
async function drainFloor(c: pg.Client, schema: string): Promise<[number, number]> {
  const t = `"${schema}".floor_jobs`;
  return timedDrain(
    async () =>
      (
        (await c.query({ name: `floor-claim-${schema}`, text: floorPgClaim(t, CLAIM), values: ["pgshape"] }))
          .rows as { id: string }[]
      ).map((r) => r.id),
    (ids) => c.query({ name: `floor-complete-${schema}`, text: floorPgComplete(t), values: [ids] }),
  );
}

/**
 * The narrow sketch: the claim updates the hot row and reads the task's input from the wide one by
 * primary key; the completion (of a task whose result is null) writes the hot row only.
 */
async function drainNarrow(c: pg.Client, schema: string): Promise<[number, number]> {
  const h = `"${schema}".hot`;
  return timedDrain(
    async () =>
      (
        (
          await c.query({
            name: `narrow-claim-${schema}`,
            text: `WITH c AS MATERIALIZED (SELECT ctid AS tid FROM ${h} WHERE queue = 'default' AND status = 'pending'
               ORDER BY order_key, id LIMIT ${CLAIM} FOR UPDATE SKIP LOCKED),
             u AS (UPDATE ${h} u SET status = 'running', attempts = u.attempts + 1, epoch = u.epoch + 1,
               lease_until = $1::bigint + u.max_ms, locked_by = 'pgshape', claimed_at = $1::bigint,
               started_at = coalesce(u.started_at, $1::bigint), updated_at = $1::bigint
             WHERE u.ctid = ANY(ARRAY(SELECT tid FROM c)) RETURNING u.id, u.attempts, u.epoch)
             SELECT u.id, u.attempts, u.epoch, t.name, t.version, t.input, t.priority, t.max_ms
             FROM u JOIN "${schema}".ratchet_tasks t ON t.id = u.id`,
            values: [Date.now()],
          })
        ).rows as { id: string }[]
      ).map((r) => r.id),
    (ids) =>
      c.query({
        name: `narrow-complete-${schema}`,
        text: `UPDATE ${h} SET status = 'terminal', ended_at = $2::bigint, lease_until = NULL, locked_by = NULL,
               updated_at = $2::bigint WHERE id = ANY($1::bigint[]) AND status = 'running'`,
        values: [ids, Date.now()],
      }),
  );
}

/** Claims and completes every task; returns the client's wall time of claims and completions, ms. */
async function drainOwn(schema: string): Promise<[number, number]> {
  const store = new PostgresStore({ connectionString: URL, schema, poolMax: 2 });
  try {
    return await timedDrain(
      () =>
        store.claim({
          workerId: "pgshape",
          queues: ["default"],
          names: ["noop"],
          limit: CLAIM,
          leaseGraceMs: 10_000,
        }),
      async (claimed) => {
        const results = await store.settle(
          claimed.map((c) => ({
            kind: "complete",
            fence: { taskId: c.id, token: c.epoch, claimedAt: c.claimedAt },
            result: "null",
          })),
        );
        if (results.some((x) => x !== "ok")) throw new Error("a completion was refused");
      },
    );
  } finally {
    await store.close();
  }
}

async function drainBare(
  c: pg.Client,
  schema: string,
  v: Variant,
  complete?: (ids: string[]) => Promise<unknown>,
): Promise<[number, number]> {
  const t = `"${schema}".ratchet_tasks`;
  return timedDrain(
    async () => {
      const res = await c.query({
        name: `bare-claim-${schema}${v.noLock ? "-nolock" : ""}`,
        text: `WITH c AS MATERIALIZED (SELECT ctid AS tid FROM ${t} WHERE queue = 'default' AND status = 'pending'
               ORDER BY order_key, id LIMIT ${CLAIM} ${v.noLock ? "" : "FOR UPDATE SKIP LOCKED"})
             UPDATE ${t} u SET status = 'running', attempts = u.attempts + 1, epoch = u.epoch + 1,
               lease_until = $1::bigint + u.max_ms, locked_by = 'pgshape', claimed_at = $1::bigint,
               started_at = coalesce(u.started_at, $1::bigint), updated_at = $1::bigint, wake_at = NULL
             WHERE u.ctid = ANY(ARRAY(SELECT tid FROM c))
             RETURNING u.id, u.name, u.version, u.input, u.priority, u.max_ms, u.attempts, u.epoch`,
        values: [Date.now()],
      });
      return (res.rows as { id: string }[]).map((r) => r.id);
    },
    complete ??
      (async (ids) => {
        await c.query({
          name: `bare-complete-${schema}`,
          text: `UPDATE ${t} SET status = 'terminal', outcome = 'completed', result = 'null', ended_at = $2::bigint,
               lease_until = NULL, locked_by = NULL, updated_at = $2::bigint
             WHERE id = ANY($1::bigint[]) AND status = 'running'`,
          values: [ids, Date.now()],
        });
      }),
  );
}

/** The bare claim, and completions that move the rows to the table of finished tasks (see `archive`). */
async function drainArchive(c: pg.Client, schema: string, v: Variant): Promise<[number, number]> {
  const t = `"${schema}".ratchet_tasks`;
  const d = `"${schema}".done`;
  return drainBare(c, schema, v, (ids) =>
    c.query({
      name: `archive-complete-${schema}`,
      text: `WITH x AS (DELETE FROM ${t} WHERE id = ANY($1::bigint[]) AND status = 'running'
               RETURNING id, queue, name, version, input, priority, attempts, max_attempts, epoch, created_at, started_at, claimed_at)
             INSERT INTO ${d} (id, queue, name, version, input, outcome, result, priority, attempts, max_attempts, epoch,
               created_at, started_at, claimed_at, ended_at)
             SELECT id, queue, name, version, input, 'completed', 'null', priority, attempts, max_attempts, epoch,
               created_at, started_at, claimed_at, $2::bigint FROM x`,
      values: [ids, Date.now()],
    }),
  );
}

const admin = new pg.Client(URL);
await admin.connect();
const statements = await admin.query("SELECT pg_stat_statements_reset()").then(
  () => true,
  () => false,
);
const samples = new Map<string, { claim: number[]; rest: number[]; cpu: number[] }>(
  VARIANTS.map((v) => [v.name, { claim: [], rest: [], cpu: [] }]),
);
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const v of VARIANTS) {
      const schema = `pgshape_${process.pid}`;
      await prepare(admin, schema, v);
      if (statements) await admin.query("SELECT pg_stat_statements_reset()");
      const cpu0 = postgresCpuMs();
      let [claimMs, restMs] =
        v.kind === "own"
          ? await drainOwn(schema)
          : await { bare: drainBare, floor: drainFloor, narrow: drainNarrow, archive: drainArchive }[v.kind](
              admin,
              schema,
              v,
            );
      const cpuMs = postgresCpuMs() - cpu0;
      if (statements) {
        const rows = (
          await admin.query(
            `SELECT coalesce(sum(total_exec_time) FILTER (WHERE query LIKE '%LIMIT%'), 0) AS claim,
                    coalesce(sum(total_exec_time) FILTER (WHERE query NOT LIKE '%LIMIT%'), 0) AS rest
             FROM pg_stat_statements WHERE query LIKE $1 AND query NOT LIKE '%pg_stat_statements%'`,
            [`%"${schema}".%`],
          )
        ).rows[0] as { claim: number; rest: number };
        claimMs = Number(rows.claim);
        restMs = Number(rows.rest);
      }
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      const s = samples.get(v.name)!;
      s.claim.push((claimMs * 1_000) / N);
      s.rest.push((restMs * 1_000) / N);
      s.cpu.push((cpuMs * 1_000) / N);
      console.error(
        `round ${round + 1} ${v.name}: claim ${s.claim.at(-1)!.toFixed(2)}, completion ${s.rest.at(-1)!.toFixed(2)} µs/task, server CPU ${s.cpu.at(-1)!.toFixed(2)} µs/task`,
      );
    }
  }
} finally {
  await admin.end();
}
console.log(
  `\nClaims of ${CLAIM} and their completions over ${N} tasks, one connection; µs per task, medians of ${ROUNDS} round(s), ${
    statements
      ? "server execution time (pg_stat_statements)"
      : "client wall time (pg_stat_statements not loaded)"
  }\n`,
);
// The machine's speed drifts between rounds more than variants differ: each variant's server CPU is
// also given as the median, over rounds, of its ratio to the first variant's in the same round.
const first = samples.get(VARIANTS[0]!.name)!;
console.log(
  `| variant | claim | completion | both | server CPU | server CPU / ${VARIANTS[0]!.name}, same round |\n| --- | ---: | ---: | ---: | ---: | ---: |`,
);
for (const v of VARIANTS) {
  const s = samples.get(v.name)!;
  const c = median(s.claim);
  const r = median(s.rest);
  const cpu = median(s.cpu);
  const ratio = median(s.cpu.map((x, i) => x / first.cpu[i]!));
  console.log(
    `| ${v.name} | ${c.toFixed(2)} | ${r.toFixed(2)} | ${(c + r).toFixed(2)} | ${cpu.toFixed(2)} | ${ratio.toFixed(3)} |`,
  );
}
