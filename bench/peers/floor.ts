/**
 * The floor: the least a durable queue that keeps its rows can do for W2 on each store, measured in
 * the same harness, so that a target can be checked against what the store itself allows on this
 * machine (issue 6: "show, with numbers, what physical limit stops them").
 *
 * Not an engine anyone would use: one table, no leases that expire, no retries, no results, no
 * priorities, no events. A job is one row; its life is exactly two row writes, both batched:
 * - claim: one statement takes up to CLAIM jobs (status 0 → 1) and returns them, one commit;
 * - completion: one statement marks the whole batch done (status 1 → 2), one commit, sent while the
 *   next claim is already on its way (PostgreSQL: a second connection), so the store and the worker
 *   overlap, as Ratchet's settlements and claims do.
 * The durability is Ratchet's: SQLite in WAL with `synchronous` NORMAL, PostgreSQL with the server's
 * defaults (`synchronous_commit` on). Any engine that keeps a row per job and commits each state
 * change does at least this much work per job; graphile-worker deletes its rows instead of keeping
 * them, which is why it can be compared with but not bounded by this floor.
 *
 * floor-lease-pg (floor-sql.ts) is the same loop over a table with what Ratchet's rules ask of each
 * claim and completion: claim order, attempts, a fencing epoch, a lease found by its own index, and
 * the row kept with its result. Between floor-pg and it: what the promises cost; between it and
 * Ratchet: Ratchet's own.
 *
 * Only the W2 figures (and W6, which reads their RSS) run for these engines.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import {
  floorLeaseClaim,
  floorLeaseComplete,
  floorLeaseInsert,
  floorLeaseSchema,
  floorPgClaim,
  floorPgComplete,
  floorPgInsert,
  floorPgSchema,
} from "../floor-sql.js";
import {
  type Adapter,
  loadPeer,
  type Payload,
  pgClient,
  type QueueEngine,
  rand,
  type StoreRef,
  type Targets,
  type WorkerOptions,
} from "./adapter.js";

/**
 * Jobs per claim. 1,000, where it was 500 (Ratchet's prefetch in this harness) until 2026-12-02: the
 * floor is the most a store allows, so it takes the claim size at which it drains fastest. W2 c16,
 * three runs each beside graphile-worker (`BENCH_FLOOR_CLAIM=500|1000 node --import tsx
 * peers/compare.ts --runs 3 --only graphile-worker,floor-lease-pg,floor-pg --figures w2-c16`):
 * floor-lease-pg 1.73× graphile-worker with claims of 500, 2.08× with 1,000 (floor-pg 1.83×, 2.26×);
 * in a later pair 2.29× with 2,000 against 1.99× with 1,000, within what runs minutes apart vary.
 * Two or three claim loops in the worker process, tried in a throwaway build, were no faster than
 * one (1.91× and 1.66×). Ratchet's own prefetch at 1,000 or 2,000 instead of 500 did not drain
 * faster (1.34× and 1.15× against 1.35×): its cost per job is not in the number of statements.
 */
const CLAIM = Number(process.env.BENCH_FLOOR_CLAIM ?? 1_000);
if (!Number.isInteger(CLAIM) || CLAIM < 1 || CLAIM > 10_000)
  throw new Error(
    `BENCH_FLOOR_CLAIM must be an integer in [1, 10000] (got ${process.env.BENCH_FLOOR_CLAIM})`,
  );
const POLL_MS = 20;

const ONLY_W2 = "the floor measures W2 (and W6) only";
const SKIPS: Record<string, string> = Object.fromEntries(
  ["w1-single", "w1-batch", "w3", "w3local", "w5", "w5m", "w5b"].map((id) => [id, ONLY_W2]),
);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ------------------------------------------------------------------------------------ SQLite

const SQLITE_DDL = `
CREATE TABLE IF NOT EXISTS floor_jobs (id INTEGER PRIMARY KEY, payload TEXT NOT NULL, status INTEGER NOT NULL DEFAULT 0,
  locked_by TEXT);
CREATE INDEX IF NOT EXISTS floor_jobs_ready ON floor_jobs (id) WHERE status = 0;`;

async function openSqlite(file: string): Promise<any> {
  const bs = await loadPeer("better-sqlite3");
  const db = new (bs.default ?? bs)(file);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("busy_timeout = 10000");
  db.exec(SQLITE_DDL);
  return db;
}

async function sqliteAdapter(t: Targets): Promise<Adapter> {
  let dir = "";
  let db: any;
  let insert: any;
  return {
    name: "floor (sqlite)",
    backend: "sqlite",
    durable: true,
    notes: `one table, two batched row writes per job (claims of ${CLAIM} in one UPDATE … RETURNING, one UPDATE completing the batch), one commit each; WAL, synchronous NORMAL`,
    skips: SKIPS,
    async setup() {
      dir = mkdtempSync(join(t.tmpDir, "bench-floor-"));
      db = await openSqlite(join(dir, "floor.db"));
      insert = db.prepare("INSERT INTO floor_jobs (payload) VALUES (?)");
    },
    ref: () => ({ file: join(dir, "floor.db") }),
    async enqueueOne(p: Payload) {
      insert.run(JSON.stringify(p));
    },
    async enqueueBatch(ps: Payload[]) {
      db.transaction(() => {
        for (const p of ps) insert.run(JSON.stringify(p));
      })();
    },
    async remaining() {
      return db.prepare("SELECT count(*) AS n FROM floor_jobs WHERE status < 2").get().n;
    },
    async teardown() {
      db?.close();
      db = undefined;
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function sqliteWorker(_t: Targets, ref: StoreRef, { onJob }: WorkerOptions) {
  const db = await openSqlite(ref.file!);
  const me = `floor-${process.pid}-${rand()}`;
  const claim = db.prepare(
    `UPDATE floor_jobs SET status = 1, locked_by = ? WHERE id IN
       (SELECT id FROM floor_jobs WHERE status = 0 ORDER BY id LIMIT ${CLAIM}) RETURNING id, payload`,
  );
  const complete = db.prepare(
    "UPDATE floor_jobs SET status = 2 WHERE id IN (SELECT value FROM json_each(?))",
  );
  const claimTx = db.transaction(() => claim.all(me)).immediate;
  let stopping = false;
  const loop = (async () => {
    while (!stopping) {
      const rows = claimTx() as { id: number; payload: string }[];
      if (rows.length === 0) {
        await sleep(POLL_MS);
        continue;
      }
      for (const r of rows) onJob(JSON.parse(r.payload) as Payload);
      complete.run(JSON.stringify(rows.map((r) => r.id)));
      // Let the driver's messages and timers in between batches, as an engine's event loop would.
      await new Promise<void>((r) => setImmediate(r));
    }
  })();
  return {
    async stop() {
      stopping = true;
      await loop;
      db.close();
    },
  };
}

// -------------------------------------------------------------------------------- PostgreSQL

type PgKind = "plain" | "lease";

/** A claimed job: its id (bigint, as text) and, for the lease floor, the epoch and claim time that fence it. */
type PgJob = { id: string; epoch?: number; claimed_at?: string; payload: string };

/**
 * What each PostgreSQL floor runs (floor-sql.ts), `t` the quoted table: its table, its inserts, and
 * the claim and completion of its worker, each as a query on a client given.
 */
const PG_SQL: Record<
  PgKind,
  {
    schema: (t: string) => string[];
    insert: (t: string) => string;
    one: (t: string) => string;
    claim: (c: any, t: string, me: string) => Promise<{ rows: PgJob[] }>;
    complete: (c: any, t: string, jobs: PgJob[]) => Promise<unknown>;
    notes: string;
  }
> = {
  plain: {
    schema: floorPgSchema,
    insert: floorPgInsert,
    one: (t) => `INSERT INTO ${t} (payload) VALUES ($1)`,
    claim: (c, t, me) => c.query({ name: "floor-claim", text: floorPgClaim(t, CLAIM), values: [me] }),
    complete: (c, t, jobs) =>
      c.query({ name: "floor-complete", text: floorPgComplete(t), values: [jobs.map((j) => j.id)] }),
    notes: `one table, two batched row writes per job (claims of ${CLAIM} in one UPDATE … FOR UPDATE SKIP LOCKED … RETURNING, one UPDATE completing the batch on a second connection, overlapping the next claim), one commit each; server defaults (synchronous_commit on)`,
  },
  lease: {
    schema: floorLeaseSchema,
    insert: floorLeaseInsert,
    one: (t) =>
      `INSERT INTO ${t} (order_key, payload) VALUES ((extract(epoch from now()) * 1000)::bigint, $1)`,
    claim: (c, t, me) =>
      c.query({ name: "floor-lease-claim", text: floorLeaseClaim(t, CLAIM), values: [me, Date.now()] }),
    complete: (c, t, jobs) => {
      // Ids ascending, for the binary search of each row's epoch.
      const sorted = jobs
        .map((j) => ({ id: Number(j.id), epoch: j.epoch!, at: j.claimed_at! }))
        .sort((a, b) => a.id - b.id);
      return c.query({
        name: "floor-lease-complete",
        text: floorLeaseComplete(t),
        values: [sorted.map((j) => j.id), sorted.map((j) => j.epoch), Date.now(), sorted.map((j) => j.at)],
      });
    },
    notes: `floor-pg plus Ratchet's rules for a claim and a completion: claim order (queue, order key, id), attempts, a fencing epoch, a lease with its partial index, the fenced completion (epoch and claim time) keeping the row with its result and end time; claims of ${CLAIM} that commit without waiting for their flush (as Ratchet's, spec §13.8), completions on a second connection`,
  },
};

async function pgAdapter(t: Targets, kind: PgKind): Promise<Adapter> {
  let schema = "";
  let c: any;
  const sql = PG_SQL[kind];
  const table = () => `"${schema}".floor_jobs`;
  return {
    name: kind === "plain" ? "floor (postgres)" : "floor with leases (postgres)",
    backend: "postgres",
    durable: true,
    notes: sql.notes,
    skips: SKIPS,
    async setup() {
      schema = `bench_floor_${rand()}`;
      c = await pgClient(t.pgUrl);
      await c.query(`CREATE SCHEMA "${schema}"`);
      for (const q of sql.schema(table())) await c.query(q);
    },
    ref: () => ({ schema }),
    async enqueueOne(p: Payload) {
      await c.query(sql.one(table()), [JSON.stringify(p)]);
    },
    async enqueueBatch(ps: Payload[]) {
      await c.query(sql.insert(table()), [ps.map((p) => JSON.stringify(p))]);
    },
    async remaining() {
      const r = await c.query(`SELECT count(*)::int AS n FROM ${table()} WHERE status < 2`);
      return r.rows[0].n;
    },
    async teardown() {
      if (c) {
        await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
        await c.end().catch(() => {});
      }
      c = undefined;
    },
  };
}

async function pgWorker(t: Targets, ref: StoreRef, { onJob }: WorkerOptions, kind: PgKind) {
  const sql = PG_SQL[kind];
  const claimer = await pgClient(t.pgUrl);
  const completer = await pgClient(t.pgUrl);
  const s = `"${ref.schema}".floor_jobs`;
  const me = `floor-${process.pid}-${rand()}`;
  let stopping = false;
  let completing: Promise<unknown> = Promise.resolve();
  const loop = (async () => {
    while (!stopping) {
      const { rows } = await sql.claim(claimer, s, me);
      if (rows.length === 0) {
        await sleep(POLL_MS);
        continue;
      }
      for (const r of rows) onJob(JSON.parse(r.payload) as Payload);
      // One completion in flight at a time, overlapping the next claim.
      await completing;
      completing = sql.complete(completer, s, rows);
    }
    await completing;
  })();
  return {
    async stop() {
      stopping = true;
      await loop;
      await claimer.end();
      await completer.end();
    },
  };
}

export const floorSqlite: QueueEngine = { adapter: sqliteAdapter, startWorker: sqliteWorker };
export const floorPg: QueueEngine = {
  adapter: (t) => pgAdapter(t, "plain"),
  startWorker: (t, ref, o) => pgWorker(t, ref, o, "plain"),
};
export const floorLeasePg: QueueEngine = {
  adapter: (t) => pgAdapter(t, "lease"),
  startWorker: (t, ref, o) => pgWorker(t, ref, o, "lease"),
};
