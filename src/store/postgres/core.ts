/**
 * The PostgreSQL store's shared machinery: the pool, named statements, "now",
 * transactions with retries, and the helpers several operation families use
 * (live counters, events, fences, cascades). The operations themselves live in
 * enqueue.ts, claim.ts, holder.ts, operations.ts, reads.ts and listen.ts.
 */
import pg from "pg";
import { planUpstreamFailure } from "../../core/cascade.js";
import type { Clock } from "../../core/clock.js";
import type { StoredError } from "../../core/json.js";
import type { Outcome } from "../../core/model.js";
import {
  AbortedError,
  ConfigError,
  LeaseLostError,
  RatchetError,
  SchemaTooNewError,
  StoreError,
} from "../../errors.js";
import {
  type EventKind,
  type Fence,
  type FencedFields,
  refusedForMark,
  type TaskId,
  type TaskRecord,
} from "../store.js";
import { FenceRefused } from "../tree/ops.js";
import { type Op, type Program, pgSql, runAsync } from "../tree/program.js";
import { queueLive } from "./enqueue.js";
import { releaseDependents } from "./holder.js";
import { PG_LATEST_VERSION, PG_MIGRATIONS } from "./migrations.js";
import { bind, type Compiled, compile } from "./named.js";
import { T } from "./sql.js";

export interface PostgresStoreOptions {
  connectionString?: string;
  /** Use this pool instead of creating one (the store will not end it). */
  pool?: pg.Pool;
  /** Schema holding Ratchet's tables. Default "ratchet". */
  schema?: string;
  /** Pool size when the store creates the pool. Default 10. */
  poolMax?: number;
  /** Test clock; production leaves it unset and uses the database clock. */
  clock?: Clock;
}

export type Client = pg.PoolClient;
const SHARDS = 16;
const RETRYABLE = new Set(["40001", "40P01"]);
const SCHEMA_RE = /^[a-z_][a-z0-9_]{0,62}$/;
/** Clients that already carry an error listener. */
const guarded = new WeakSet<object>();

/**
 * A checked-out client whose connection dies between queries emits "error";
 * without a listener Node would crash the process. The failure still reaches
 * the caller through the next query's rejection.
 */
function guard(client: Client): Client {
  if (!guarded.has(client)) {
    client.on("error", () => {});
    guarded.add(client);
  }
  return client;
}

/** bigint (int8) and numeric come back as strings by default; our values fit in a double. */
export const types = {
  getTypeParser: (oid: number, format?: string) => {
    if (oid === 20 || oid === 1700) return (v: string) => (v === null ? null : Number(v));
    return (pg.types.getTypeParser as (o: number, f?: string) => unknown)(oid, format as "text");
  },
};

export class PgCore {
  /** Runs a task-tree program (src/store/tree) in one transaction. */
  async program<R>(p: () => Program<R>): Promise<R> {
    return this.tx((c) => this.inTx(c, p()));
  }

  /** Runs a program inside the caller's transaction. */
  async inTx<R>(c: Client, p: Program<R>): Promise<R> {
    try {
      return await runAsync(p, (op) => this.exec(c, op));
    } catch (e) {
      if (e instanceof FenceRefused) {
        if (e.result === "abort_marked") throw new AbortedError(e.fence.taskId);
        throw new LeaseLostError(e.fence.taskId, e.fence.token);
      }
      throw e;
    }
  }

  async exec(c: Client, op: Op): Promise<unknown> {
    switch (op.op) {
      case "q":
        return this.run(c, pgSql(op.sql), op.p);
      case "bump":
        await this.bumpLive(c, new Map([[op.queue, op.n]]));
        return undefined;
      case "event":
        await this.event(c, op.id, op.kind, op.attempt, op.detail);
        return undefined;
      case "ended":
        if (op.completed) {
          if (await releaseDependents(this, c, op.id)) await this.notify(c);
        } else await this.cascade(c, op.id);
        return undefined;
      case "lock":
        await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`ratchet-${op.key}:${this.schema}`]);
        return undefined;
      case "notify":
        await this.notify(c);
        return undefined;
      case "live":
        await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [
          `ratchet-queue:${this.schema}:${op.queue}`,
        ]);
        return queueLive(this, c, op.queue);
    }
  }

  readonly schema: string;
  readonly pool: pg.Pool;
  readonly ownPool: boolean;
  readonly clock: Clock | undefined;
  readonly q = new Map<string, Compiled>();
  readonly quoted: string;
  readonly channel: string;
  readonly shard = Math.floor(Math.random() * SHARDS);
  closed = false;
  listeners = new Set<{ stop: () => Promise<void> }>();
  /** Round-robin start over a worker's queues. */
  rr = 0;
  /** Queues whose last one-queue claim here found at most a small claim's worth (see claim.ts). */
  readonly short = new Set<string>();

  constructor(o: PostgresStoreOptions) {
    const schema = o.schema ?? "ratchet";
    if (!SCHEMA_RE.test(schema)) {
      throw new ConfigError(`postgres schema must match ${SCHEMA_RE} (got ${JSON.stringify(schema)})`);
    }
    this.schema = schema;
    this.quoted = `"${schema}"`;
    this.channel = `ratchet_${schema}`;
    this.clock = o.clock;
    if (o.pool) {
      this.pool = o.pool;
      this.ownPool = false;
    } else {
      if (!o.connectionString) throw new ConfigError("postgres store needs a connectionString or a pool");
      this.pool = new pg.Pool({
        connectionString: o.connectionString,
        max: o.poolMax ?? 10,
        types: types as never,
      });
      this.ownPool = true;
    }
    // An idle client that loses its connection (e.g. a server restart) emits here; without a
    // listener Node would crash the process. The next query gets a fresh connection.
    this.pool.on("error", () => {});
  }

  c(sql: string): Compiled {
    let c = this.q.get(sql);
    if (!c) {
      c = compile(sql, this.quoted);
      this.q.set(sql, c);
    }
    return c;
  }

  async run<R = Record<string, unknown>>(
    client: Client,
    sql: string,
    values: Record<string, unknown> = {},
  ): Promise<R[]> {
    const c = this.c(sql);
    const args = bind(c, {
      ...values,
      now: c.params.includes("now") ? (this.clock ? this.clock.now() : null) : undefined,
    });
    const res = await client.query({ name: c.name, text: c.text, values: args, types: types as never });
    return res.rows as R[];
  }

  /** One transaction with retries of deadlocks/serialization failures (known to have had no effect). */
  async tx<T>(fn: (c: Client) => Promise<T>): Promise<T> {
    return this.#attempts(fn, true);
  }

  /**
   * One statement in its own implicit transaction (no BEGIN, no COMMIT: one round trip where `tx`
   * takes three), with `tx`'s retries: a statement that failed had no effect. `fn` must send exactly
   * one statement that writes.
   */
  async autocommit<T>(fn: (c: Client) => Promise<T>): Promise<T> {
    return this.#attempts(fn, false);
  }

  async #attempts<T>(fn: (c: Client) => Promise<T>, block: boolean): Promise<T> {
    if (this.closed) throw new StoreError("the store is closed");
    for (let attempt = 1; ; attempt++) {
      let client: Client;
      try {
        client = guard(await this.pool.connect());
      } catch (err) {
        throw new StoreError(`PostgreSQL: cannot connect: ${(err as Error).message}`, { cause: err });
      }
      let broken = false;
      try {
        if (block) await client.query("BEGIN");
        const out = await fn(client);
        if (block) await client.query("COMMIT");
        return out;
      } catch (err) {
        if (block)
          await client.query("ROLLBACK").catch(() => {
            broken = true;
          });
        const code = (err as { code?: string }).code;
        if (code && RETRYABLE.has(code) && attempt < 8) {
          await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 10 * 2 ** attempt)));
          continue;
        }
        if (err instanceof RatchetError) throw err;
        broken = true;
        throw new StoreError(`PostgreSQL: ${(err as Error).message}`, { cause: err });
      } finally {
        client.release(broken);
      }
    }
  }

  async read<T>(fn: (c: Client) => Promise<T>): Promise<T> {
    if (this.closed) throw new StoreError("the store is closed");
    let client: Client;
    try {
      client = guard(await this.pool.connect());
    } catch (err) {
      throw new StoreError(`PostgreSQL: cannot connect: ${(err as Error).message}`, { cause: err });
    }
    let broken = false;
    try {
      return await fn(client);
    } catch (err) {
      if (err instanceof RatchetError) throw err;
      // A driver error may mean a dead connection: do not hand this client out again.
      broken = true;
      throw new StoreError(`PostgreSQL: ${(err as Error).message}`, { cause: err });
    } finally {
      client.release(broken);
    }
  }

  async now(): Promise<number> {
    return this.read((c) => this.nowIn(c));
  }

  /** The transaction's clock. */
  async nowIn(c: Client): Promise<number> {
    return (await this.run<{ t: number }>(c, "SELECT :now AS t"))[0]!.t;
  }

  /**
   * spec §10.1: migrations run under a transaction-scoped advisory lock, so concurrent opens
   * serialise. A schema already at the latest version is told by one read without the lock (a
   * version, once committed, only grows): one round trip where the locked check takes six (BEGIN,
   * the lock, two CREATE … IF NOT EXISTS, the read, COMMIT). `node dist/bench/startup.js --runs 3`
   * (a fresh worker on 20,000 tasks), three sets alternating with the build before, together with
   * reconcile's guard of its failFast statement (tree/ops.ts): open 57–58 → 43–51 ms, the first
   * handler 93–98 → 80–89 ms. Opening two more connections of the pool meanwhile, for the first
   * claim and settle batch, made open slower (60 → 69 ms): on two cores the backends' start-up
   * competes with the open's own statements.
   */
  async migrate(): Promise<void> {
    if ((await this.#versionIfExists()) === PG_LATEST_VERSION) return;
    await this.#migrateLocked();
  }

  /** The schema's version, or null where its version table does not exist yet. */
  async #versionIfExists(): Promise<number | null> {
    try {
      return (await this.read((c) => c.query(`SELECT max(version) AS v FROM ${this.quoted}.ratchet_schema`)))
        .rows[0].v as number | null;
    } catch (e) {
      // undefined_table, invalid_schema_name: a new schema, for the locked path.
      const code = (e as { cause?: { code?: string } }).cause?.code;
      if (code === "42P01" || code === "3F000") return null;
      throw e;
    }
  }

  async #migrateLocked(): Promise<void> {
    await this.tx(async (c) => {
      await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`ratchet-migrate:${this.schema}`]);
      await c.query(`CREATE SCHEMA IF NOT EXISTS ${this.quoted}`);
      await c.query(`CREATE TABLE IF NOT EXISTS ${this.quoted}.ratchet_schema (version integer NOT NULL)`);
      const cur = (await c.query(`SELECT max(version) AS v FROM ${this.quoted}.ratchet_schema`)).rows[0].v as
        | number
        | null;
      const current = cur ?? 0;
      if (current > PG_LATEST_VERSION) throw new SchemaTooNewError(current, PG_LATEST_VERSION);
      for (const m of PG_MIGRATIONS) {
        if (m.version <= current) continue;
        await c.query(m.sql.replaceAll("{s}", this.quoted).replaceAll("{n}", this.schema));
        await c.query(`INSERT INTO ${this.quoted}.ratchet_schema (version) VALUES ($1)`, [m.version]);
      }
    });
  }

  async schemaVersion(): Promise<number> {
    return this.read(
      async (c) =>
        (await c.query(`SELECT max(version) AS v FROM ${this.quoted}.ratchet_schema`)).rows[0].v as number,
    );
  }

  async notify(c: Client): Promise<void> {
    await c.query("SELECT pg_notify($1, '')", [this.channel]);
  }

  async findDedupe(c: Client, queue: string, key: string) {
    const rows = await this.run<{ id: number; status: TaskRecord["status"] }>(
      c,
      `SELECT id, status FROM ${T} WHERE queue = :queue AND dedupe_key = :key AND (status <> 'terminal' OR outcome = 'completed')`,
      { queue, key },
    );
    return rows[0];
  }

  /** Adds to the live counters; queues in sorted order so two transactions lock shards in one order. */
  async bumpLive(c: Client, deltas: Map<string, number>): Promise<void> {
    for (const q of [...deltas.keys()].sort()) {
      const n = deltas.get(q)!;
      if (n === 0) continue;
      await this.run(
        c,
        `INSERT INTO {s}.ratchet_queue_counts (queue, shard, live) VALUES (:queue, :shard, :n)
        ON CONFLICT (queue, shard) DO UPDATE SET live = {s}.ratchet_queue_counts.live + excluded.live`,
        { queue: q, shard: this.shard, n },
      );
    }
  }

  async refused(c: Client, fence: Fence): Promise<never> {
    const rows = await this.run<FencedFields>(
      c,
      `SELECT status, epoch, claimed_at, abort_requested FROM ${T} WHERE id = :id`,
      { id: fence.taskId },
    );
    if (refusedForMark(rows[0], fence)) throw new AbortedError(fence.taskId);
    throw new LeaseLostError(fence.taskId, fence.token);
  }

  async dependentsOf(c: Client, root: TaskId) {
    const rows = await this.run<{
      id: number;
      status: TaskRecord["status"];
      outcome: Outcome | null;
      queue: string;
      needs: number[];
    }>(
      c,
      `
      WITH RECURSIVE d(id) AS (
        SELECT task_id FROM {s}.ratchet_deps WHERE needs_id = :root
        UNION SELECT dep.task_id FROM {s}.ratchet_deps dep JOIN d ON dep.needs_id = d.id)
      SELECT t.id, t.status, t.outcome, t.queue,
        (SELECT coalesce(array_agg(needs_id), '{}') FROM {s}.ratchet_deps WHERE task_id = t.id) AS needs
      FROM ${T} t WHERE t.id IN (SELECT id FROM d)`,
      { root },
    );
    return rows.map((r) => ({ ...r, needs: (r.needs as unknown[]).map(Number) }));
  }

  /** spec §6.1. */
  async cascade(c: Client, root: TaskId): Promise<void> {
    const nodes = await this.dependentsOf(c, root);
    const ids = planUpstreamFailure(root, nodes);
    if (ids.length === 0) return;
    const rows = await this.run<{ queue: string }>(
      c,
      `UPDATE ${T} SET status = 'terminal', outcome = 'upstream_failed', error = :error,
      wake_at = NULL, ended_at = :now, updated_at = :now WHERE id = ANY(:ids) AND status = 'waiting' RETURNING queue`,
      { ids, error: upstreamError(root) },
    );
    const deltas = new Map<string, number>();
    for (const r of rows) deltas.set(r.queue, (deltas.get(r.queue) ?? 0) - 1);
    await this.bumpLive(c, deltas);
  }

  async event(
    c: Client,
    taskId: TaskId,
    kind: EventKind,
    attempt: number | null,
    detail: unknown,
  ): Promise<void> {
    await this.run(
      c,
      "INSERT INTO {s}.ratchet_events (task_id, at, kind, attempt, detail) VALUES (:id, :now, :kind, :attempt, :detail)",
      {
        id: taskId,
        kind,
        attempt,
        detail: detail === null || detail === undefined ? null : JSON.stringify(detail),
      },
    );
  }
}

export function upstreamError(root: TaskId): string {
  const e: StoredError = { name: "UpstreamFailed", message: `upstream task ${root} failed`, upstream: root };
  return JSON.stringify(e);
}
