/**
 * The PostgreSQL store: many worker processes on many machines share one
 * database. spec §13.
 *
 * - Claims lock candidates with FOR UPDATE SKIP LOCKED and take them with one
 *   conditional UPDATE … RETURNING, so concurrent workers take disjoint rows.
 * - "Now" is the database clock (now_ms), so leases, timers and aging do not
 *   depend on worker clocks (spec §11.1). Tests may pass a Clock to override it.
 * - Every method is one transaction. Deadlocks and serialization failures
 *   (which PostgreSQL guarantees had no effect) are retried with backoff;
 *   other driver errors surface as StoreError with the driver error as cause.
 * - Wake-ups: enqueue and settle NOTIFY on the schema's channel at commit;
 *   `subscribe` LISTENs on a dedicated connection that reconnects with backoff.
 */
import pg from "pg";
import { decideReclaim } from "../../core/backoff.js";
import { planRetrySubtree, planUpstreamFailure } from "../../core/cascade.js";
import type { Clock } from "../../core/clock.js";
import { fromJson, type StoredError } from "../../core/json.js";
import { isRetryableOutcome, type Outcome } from "../../core/model.js";
import {
  AbortedError,
  ConfigError,
  InvalidStateError,
  LeaseLostError,
  NotFoundError,
  QueueFullError,
  RatchetError,
  SchemaTooNewError,
  StoreError,
  ValidationError,
} from "../../errors.js";
import { type TaskRow, toRecord } from "../rows.js";
import type {
  AbortResult,
  ClaimedTask,
  ClaimRequest,
  Enqueued,
  EnqueueOptions,
  EventKind,
  Fence,
  JobStatus,
  ListFilter,
  NewTask,
  QueueStats,
  Settlement,
  SettleResult,
  StepRecord,
  StepWrite,
  Store,
  TaskEvent,
  TaskId,
  TaskRecord,
} from "../store.js";
import { PG_LATEST_VERSION, PG_MIGRATIONS } from "./migrations.js";
import { bind, type Compiled, compile } from "./named.js";
import { CLAIM_ONE, CLAIM_PENDING, FENCE, LIST_READY, PROMOTE_DUE, READY, SELECT_EXPIRED, T } from "./sql.js";

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

type Client = pg.PoolClient;
const SHARDS = 16;
const PROMOTE_BATCH = 1000;
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
const types = {
  getTypeParser: (oid: number, format?: string) => {
    if (oid === 20 || oid === 1700) return (v: string) => (v === null ? null : Number(v));
    return (pg.types.getTypeParser as (o: number, f?: string) => unknown)(oid, format as "text");
  },
};

export class PostgresStore implements Store {
  readonly schema: string;
  readonly pool: pg.Pool;
  readonly #ownPool: boolean;
  readonly #clock: Clock | undefined;
  readonly #q = new Map<string, Compiled>();
  readonly #quoted: string;
  readonly #channel: string;
  readonly #shard = Math.floor(Math.random() * SHARDS);
  #closed = false;
  #listeners = new Set<{ stop: () => Promise<void> }>();

  constructor(o: PostgresStoreOptions) {
    const schema = o.schema ?? "ratchet";
    if (!SCHEMA_RE.test(schema)) {
      throw new ConfigError(`postgres schema must match ${SCHEMA_RE} (got ${JSON.stringify(schema)})`);
    }
    this.schema = schema;
    this.#quoted = `"${schema}"`;
    this.#channel = `ratchet_${schema}`;
    this.#clock = o.clock;
    if (o.pool) {
      this.pool = o.pool;
      this.#ownPool = false;
    } else {
      if (!o.connectionString) throw new ConfigError("postgres store needs a connectionString or a pool");
      this.pool = new pg.Pool({
        connectionString: o.connectionString,
        max: o.poolMax ?? 10,
        types: types as never,
      });
      this.#ownPool = true;
    }
    // An idle client that loses its connection (e.g. a server restart) emits here; without a
    // listener Node would crash the process. The next query gets a fresh connection.
    this.pool.on("error", () => {});
  }

  #c(sql: string): Compiled {
    let c = this.#q.get(sql);
    if (!c) {
      c = compile(sql, this.#quoted);
      this.#q.set(sql, c);
    }
    return c;
  }

  async #run<R = Record<string, unknown>>(
    client: Client,
    sql: string,
    values: Record<string, unknown> = {},
  ): Promise<R[]> {
    const c = this.#c(sql);
    const args = bind(c, {
      ...values,
      now: c.params.includes("now") ? (this.#clock ? this.#clock.now() : null) : undefined,
    });
    const res = await client.query({ name: c.name, text: c.text, values: args, types: types as never });
    return res.rows as R[];
  }

  /** One transaction with retries of deadlocks/serialization failures (known to have had no effect). */
  async #tx<T>(fn: (c: Client) => Promise<T>): Promise<T> {
    if (this.#closed) throw new StoreError("the store is closed");
    for (let attempt = 1; ; attempt++) {
      let client: Client;
      try {
        client = guard(await this.pool.connect());
      } catch (err) {
        throw new StoreError(`PostgreSQL: cannot connect: ${(err as Error).message}`, { cause: err });
      }
      let broken = false;
      try {
        await client.query("BEGIN");
        const out = await fn(client);
        await client.query("COMMIT");
        return out;
      } catch (err) {
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

  async #read<T>(fn: (c: Client) => Promise<T>): Promise<T> {
    if (this.#closed) throw new StoreError("the store is closed");
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
    return this.#read(async (c) => (await this.#run<{ t: number }>(c, "SELECT :now AS t"))[0]!.t);
  }

  /** spec §10.1: migrations run under a transaction-scoped advisory lock, so concurrent opens serialise. */
  async migrate(): Promise<void> {
    await this.#tx(async (c) => {
      await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`ratchet-migrate:${this.schema}`]);
      await c.query(`CREATE SCHEMA IF NOT EXISTS ${this.#quoted}`);
      await c.query(`CREATE TABLE IF NOT EXISTS ${this.#quoted}.ratchet_schema (version integer NOT NULL)`);
      const cur = (await c.query(`SELECT max(version) AS v FROM ${this.#quoted}.ratchet_schema`)).rows[0].v as
        | number
        | null;
      const current = cur ?? 0;
      if (current > PG_LATEST_VERSION) throw new SchemaTooNewError(current, PG_LATEST_VERSION);
      for (const m of PG_MIGRATIONS) {
        if (m.version <= current) continue;
        await c.query(m.sql.replaceAll("{s}", this.#quoted).replaceAll("{n}", this.schema));
        await c.query(`INSERT INTO ${this.#quoted}.ratchet_schema (version) VALUES ($1)`, [m.version]);
      }
    });
  }

  async schemaVersion(): Promise<number> {
    return this.#read(
      async (c) =>
        (await c.query(`SELECT max(version) AS v FROM ${this.#quoted}.ratchet_schema`)).rows[0].v as number,
    );
  }

  async #notify(c: Client): Promise<void> {
    await c.query("SELECT pg_notify($1, '')", [this.#channel]);
  }

  // ---------------------------------------------------------------- enqueue

  /** spec §2.2–§2.8: the whole batch in one transaction. */
  async enqueue(batch: readonly NewTask[], opts: EnqueueOptions): Promise<Enqueued[]> {
    if (batch.every((t) => t.needs.length === 0)) return this.#enqueueSimple(batch, opts);
    return this.#tx(async (c) => {
      const queues = [...new Set(batch.map((t) => t.queue))].sort();
      // Admission control is exact: enqueues of one queue serialise on its advisory lock.
      for (const q of queues)
        await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`ratchet-queue:${this.schema}:${q}`]);
      const out: Enqueued[] = [];
      const added = new Map<string, number>();
      let anyPending = false;
      for (const t of batch) {
        const needIds: number[] = [];
        for (const ref of t.needs) {
          let id: number | undefined;
          if ("id" in ref) id = ref.id;
          else if ("index" in ref) id = out[ref.index]?.id;
          else {
            const hit = await this.#findDedupe(c, ref.queue, ref.dedupe);
            if (!hit) {
              throw new ValidationError(
                `needs "${ref.dedupe}" is neither a key of this batch nor the dedupe key of a live or completed task in queue "${ref.queue}"`,
              );
            }
            id = hit.id;
          }
          if (id === undefined) throw new InvalidStateError("needs refers to a later entry of the batch");
          if (!needIds.includes(id)) needIds.push(id);
        }
        if (t.dedupe !== null) {
          const hit = await this.#findDedupe(c, t.queue, t.dedupe);
          if (hit) {
            out.push({ id: hit.id, deduped: true, status: hit.status });
            continue;
          }
        }
        let pending = 0;
        let upstream: number | null = null;
        if (needIds.length > 0) {
          // FOR SHARE: a predecessor cannot settle between this read and our commit.
          const deps = await this.#run<{
            id: number;
            status: string;
            outcome: Outcome | null;
            error: string | null;
          }>(c, `SELECT id, status, outcome, error FROM ${T} WHERE id = ANY(:ids) ORDER BY id FOR SHARE`, {
            ids: needIds,
          });
          for (const id of needIds) {
            const dep = deps.find((d) => d.id === id);
            if (!dep) throw new NotFoundError(`task ${id} (named in needs)`);
            if (dep.status !== "terminal") pending++;
            else if (dep.outcome !== "completed" && upstream === null) {
              upstream =
                dep.outcome === "upstream_failed"
                  ? (fromJson<StoredError | null>(dep.error)?.upstream ?? id)
                  : id;
            }
          }
        }
        const rows = await this.#run<{ id: number; status: TaskRecord["status"] }>(
          c,
          `
          INSERT INTO ${T} (queue, name, version, input, status, outcome, error, priority, order_key, max_ms, max_attempts,
            run_after, wake_at, needs_pending, dedupe_key, job, created_at, updated_at, ended_at)
          SELECT :queue::text, :name::text, :version::int, :input::text, s.status, :outcome::text, :error::text, :priority::int,
            :now - :priority::bigint * 360000, :max_ms::bigint, :max_attempts::int, :now + :delay::bigint,
            CASE WHEN s.status = 'waiting' AND :pending::int = 0 THEN :now + :delay::bigint END,
            :pending::int, :dedupe::text, :job::text, :now, :now, CASE WHEN :upstream::bigint IS NOT NULL THEN :now END
          FROM (SELECT CASE WHEN :upstream::bigint IS NOT NULL THEN 'terminal'
                            WHEN :pending::int > 0 OR :delay::bigint > 0 THEN 'waiting' ELSE 'pending' END AS status) s
          ON CONFLICT (queue, dedupe_key) WHERE dedupe_key IS NOT NULL AND (status <> 'terminal' OR outcome = 'completed') DO NOTHING
          RETURNING id, status`,
          {
            queue: t.queue,
            name: t.name,
            version: t.version,
            input: t.input,
            priority: t.priority,
            max_ms: t.maxMs,
            max_attempts: t.maxAttempts,
            delay: Math.max(0, Math.round(t.delayMs)),
            pending,
            dedupe: t.dedupe,
            job: t.job,
            upstream,
            outcome: upstream !== null ? "upstream_failed" : null,
            error: upstream !== null ? upstreamError(upstream) : null,
          },
        );
        const row = rows[0];
        if (!row) {
          // A concurrent enqueue took the key first; it is the task for this entry (spec §2.3).
          const hit = await this.#findDedupe(c, t.queue, t.dedupe!);
          if (!hit) throw new StoreError("dedupe conflict without a holder");
          out.push({ id: hit.id, deduped: true, status: hit.status });
          continue;
        }
        if (needIds.length > 0) {
          await this.#run(
            c,
            `INSERT INTO {s}.ratchet_deps (needs_id, task_id) SELECT unnest(:needs::bigint[]), :id ON CONFLICT DO NOTHING`,
            { needs: needIds, id: row.id },
          );
          await this.#run(c, `UPDATE ${T} SET dependents = dependents + 1 WHERE id = ANY(:needs)`, {
            needs: needIds,
          });
        }
        if (row.status !== "terminal") added.set(t.queue, (added.get(t.queue) ?? 0) + 1);
        if (row.status === "pending") anyPending = true;
        out.push({ id: row.id, deduped: false, status: row.status });
      }
      for (const q of queues) {
        const n = added.get(q) ?? 0;
        if (n === 0) continue;
        const depth = await this.#queueLive(c, q);
        const max = opts.maxDepth(q);
        if (depth + n > max) throw new QueueFullError(q, depth, max, n);
        await this.#bumpLive(c, new Map([[q, n]]));
      }
      if (anyPending) await this.#notify(c);
      return out;
    });
  }

  /**
   * Entries without needs go through the enqueue_one function: one round trip
   * each. A single entry runs as its own statement (an implicit transaction);
   * a batch runs them in one transaction, so a full queue rolls back all.
   */
  async #enqueueSimple(batch: readonly NewTask[], opts: EnqueueOptions): Promise<Enqueued[]> {
    const call = async (c: Client | pg.Pool, t: NewTask): Promise<Enqueued> => {
      const c2 =
        this.#c(`SELECT task_id, deduped, task_status FROM {s}.enqueue_one(:queue, :name, :version, :input, :priority,
        :max_ms, :max_attempts, :delay, :dedupe, :job, :max_depth, :shard, :now_override, :channel)`);
      const values = bind(c2, {
        queue: t.queue,
        name: t.name,
        version: t.version,
        input: t.input,
        priority: t.priority,
        max_ms: t.maxMs,
        max_attempts: t.maxAttempts,
        delay: Math.max(0, Math.round(t.delayMs)),
        dedupe: t.dedupe,
        job: t.job,
        max_depth: opts.maxDepth(t.queue),
        shard: this.#shard,
        now_override: this.#clock ? this.#clock.now() : null,
        channel: this.#channel,
      });
      try {
        const res = await c.query({ name: c2.name, text: c2.text, values, types: types as never });
        const row = res.rows[0] as { task_id: number; deduped: boolean; task_status: TaskRecord["status"] };
        return { id: row.task_id, deduped: row.deduped, status: row.task_status };
      } catch (err) {
        if ((err as { code?: string }).code === "RQ001") {
          throw new QueueFullError(
            t.queue,
            Number((err as { detail?: string }).detail ?? 0),
            opts.maxDepth(t.queue),
            1,
          );
        }
        throw err;
      }
    };
    if (batch.length === 1) {
      if (this.#closed) throw new StoreError("the store is closed");
      try {
        return [await call(this.pool, batch[0]!)];
      } catch (err) {
        if (err instanceof RatchetError) throw err;
        throw new StoreError(`PostgreSQL: ${(err as Error).message}`, { cause: err });
      }
    }
    return this.#tx(async (c) => {
      const c2 =
        this.#c(`SELECT task_id, deduped, task_status FROM {s}.enqueue_batch(:queue::text[], :name::text[],
        :version::int[], :input::text[], :priority::int[], :max_ms::bigint[], :max_attempts::int[], :delay::bigint[],
        :dedupe::text[], :job::text[], :max_depth::bigint[], :shard, :now_override, :channel)`);
      const col = <K extends keyof NewTask>(k: K) => batch.map((t) => t[k]);
      const values = bind(c2, {
        queue: col("queue"),
        name: col("name"),
        version: col("version"),
        input: col("input"),
        priority: col("priority"),
        max_ms: col("maxMs"),
        max_attempts: col("maxAttempts"),
        delay: batch.map((t) => Math.max(0, Math.round(t.delayMs))),
        dedupe: col("dedupe"),
        job: col("job"),
        max_depth: batch.map((t) => opts.maxDepth(t.queue)),
        shard: this.#shard,
        now_override: this.#clock ? this.#clock.now() : null,
        channel: this.#channel,
      });
      try {
        const res = await c.query({ name: c2.name, text: c2.text, values, types: types as never });
        return (res.rows as { task_id: number; deduped: boolean; task_status: TaskRecord["status"] }[]).map(
          (r) => ({
            id: r.task_id,
            deduped: r.deduped,
            status: r.task_status,
          }),
        );
      } catch (err) {
        if ((err as { code?: string }).code === "RQ001") {
          const q = batch[0]!.queue;
          throw new QueueFullError(
            q,
            Number((err as { detail?: string }).detail ?? 0),
            opts.maxDepth(q),
            batch.length,
          );
        }
        throw err;
      }
    });
  }

  async #findDedupe(c: Client, queue: string, key: string) {
    const rows = await this.#run<{ id: number; status: TaskRecord["status"] }>(
      c,
      `SELECT id, status FROM ${T} WHERE queue = :queue AND dedupe_key = :key AND (status <> 'terminal' OR outcome = 'completed')`,
      { queue, key },
    );
    return rows[0];
  }

  async #queueLive(c: Client, queue: string): Promise<number> {
    const r = await this.#run<{ n: number | null }>(
      c,
      "SELECT sum(live) AS n FROM {s}.ratchet_queue_counts WHERE queue = :queue",
      { queue },
    );
    return r[0]?.n ?? 0;
  }

  /** Adds to the live counters; queues in sorted order so two transactions lock shards in one order. */
  async #bumpLive(c: Client, deltas: Map<string, number>): Promise<void> {
    for (const q of [...deltas.keys()].sort()) {
      const n = deltas.get(q)!;
      if (n === 0) continue;
      await this.#run(
        c,
        `INSERT INTO {s}.ratchet_queue_counts (queue, shard, live) VALUES (:queue, :shard, :n)
        ON CONFLICT (queue, shard) DO UPDATE SET live = {s}.ratchet_queue_counts.live + excluded.live`,
        { queue: q, shard: this.#shard, n },
      );
    }
  }

  // ------------------------------------------------------------------ claim

  async claim(req: ClaimRequest): Promise<ClaimedTask[]> {
    if (req.limit <= 0 || req.names.length === 0 || req.queues.length === 0) return [];
    return this.#tx(async (c) => {
      await this.#run(c, PROMOTE_DUE, { limit: PROMOTE_BATCH });
      const base = { grace: req.leaseGraceMs, worker: req.workerId };
      const out: ClaimedTask[] = [];
      const lost: Map<string, number> = new Map();
      const expired = await this.#run<{
        id: number;
        locked_by: string | null;
        lease_until: number;
        attempts: number;
        max_attempts: number;
      }>(c, SELECT_EXPIRED, { names: req.names, queues: req.queues, limit: req.limit });
      for (const e of expired) {
        if (decideReclaim(e.attempts, e.max_attempts) === "fail") {
          const q = await this.#failDeadHolder(c, e.id, e.attempts, e.locked_by);
          if (q) lost.set(q, (lost.get(q) ?? 0) - 1);
          continue;
        }
        const rows = await this.#run<TaskRow>(c, CLAIM_ONE, { ...base, id: e.id });
        if (!rows[0]) continue;
        out.push({ ...toRecord(rows[0]), reclaimed: true });
        await this.#event(c, e.id, "reclaimed", rows[0].attempts, {
          previousHolder: e.locked_by,
          leaseUntil: e.lease_until,
        });
      }
      const start = this.#rr++ % req.queues.length;
      for (let i = 0; i < req.queues.length && out.length < req.limit; i++) {
        const queue = req.queues[(start + i) % req.queues.length]!;
        const rows = await this.#run<TaskRow>(c, CLAIM_PENDING, {
          ...base,
          queue,
          names: req.names,
          limit: req.limit - out.length,
        });
        rows.sort((a, b) => a.order_key - b.order_key || a.id - b.id);
        for (const r of rows) out.push({ ...toRecord(r), reclaimed: false });
      }
      await this.#bumpLive(c, lost);
      return out;
    });
  }
  #rr = 0;

  /** spec §5.4. Returns the queue of the failed task (its live count drops). */
  async #failDeadHolder(
    c: Client,
    id: TaskId,
    attempts: number,
    holder: string | null,
  ): Promise<string | null> {
    const error: StoredError = {
      name: "AttemptsExhausted",
      message: `gave up after ${attempts} attempts: each holder stopped without settling (crash or kill); last holder ${holder ?? "unknown"}`,
    };
    const rows = await this.#run<{ queue: string; dependents: number }>(
      c,
      `UPDATE ${T} SET status = 'terminal', outcome = 'failed',
        error = :error, ended_at = :now, lease_until = NULL, locked_by = NULL, updated_at = :now
      WHERE id = :id AND status = 'running' AND lease_until <= :now RETURNING queue, dependents`,
      { id, error: JSON.stringify(error) },
    );
    const row = rows[0];
    if (!row) return null;
    await this.#event(c, id, "failed", attempts, { error });
    if (row.dependents > 0) await this.#cascade(c, id);
    return row.queue;
  }

  async listReady(queue: string, limit: number): Promise<TaskRecord[]> {
    return this.#read(async (c) => (await this.#run<TaskRow>(c, LIST_READY, { queue, limit })).map(toRecord));
  }

  // ---------------------------------------------------------- holder writes

  async #refused(c: Client, fence: Fence): Promise<never> {
    const rows = await this.#run<{ status: string; epoch: number; abort_requested: number }>(
      c,
      `SELECT status, epoch, abort_requested FROM ${T} WHERE id = :id`,
      { id: fence.taskId },
    );
    const row = rows[0];
    if (row && row.status === "running" && row.epoch === fence.token && row.abort_requested === 1)
      throw new AbortedError(fence.taskId);
    throw new LeaseLostError(fence.taskId, fence.token);
  }

  async loadSteps(taskId: TaskId): Promise<Map<string, unknown>> {
    return this.#read(async (c) => {
      const rows = await this.#run<{ name: string; result: string }>(
        c,
        "SELECT name, result FROM {s}.ratchet_steps WHERE task_id = :id",
        { id: taskId },
      );
      return new Map(rows.map((r) => [r.name, fromJson(r.result)]));
    });
  }

  /** spec §4.2. ON CONFLICT makes a repeat of an ambiguous commit harmless. */
  async commitStep(fence: Fence, name: string, result: string): Promise<void> {
    const [r] = await this.commitSteps([{ fence, name, result }]);
    if (r === "abort_marked") throw new AbortedError(fence.taskId);
    if (r !== "ok") throw new LeaseLostError(fence.taskId, fence.token);
  }

  /**
   * spec §4.2. One statement for the whole group, so one round trip and one
   * commit: the fenced touches and the inserts land together or not at all.
   * Measured: a commit per step held W4 at the fsync rate (~1.8k steps/s here).
   */
  async commitSteps(items: readonly StepWrite[]): Promise<SettleResult[]> {
    if (items.length === 0) return [];
    return this.#read(async (c) => {
      const rows = await this.#run<{ id: number; epoch: number }>(
        c,
        `WITH v AS (SELECT * FROM unnest(:ids::bigint[], :tokens::int[], :names::text[], :results::text[])
                      WITH ORDINALITY AS v(id, token, name, result, ord)),
         f AS (UPDATE ${T} t SET updated_at = :now FROM (SELECT DISTINCT id, token FROM v) d
               WHERE t.id = d.id AND t.status = 'running' AND t.epoch = d.token AND t.abort_requested = 0
               RETURNING t.id, t.epoch, t.attempts),
         ins AS (INSERT INTO {s}.ratchet_steps (task_id, name, result, attempt, created_at)
                 SELECT v.id, v.name, v.result, f.attempts, :now FROM v JOIN f ON f.id = v.id AND f.epoch = v.token
                 ORDER BY v.ord ON CONFLICT (task_id, name) DO NOTHING RETURNING 1)
         SELECT id, epoch FROM f`,
        {
          ids: items.map((w) => w.fence.taskId),
          tokens: items.map((w) => w.fence.token),
          names: items.map((w) => w.name),
          results: items.map((w) => w.result),
        },
      );
      const held = new Set(rows.map((r) => `${r.id}:${r.epoch}`));
      const out: SettleResult[] = [];
      for (const w of items) {
        if (held.has(`${w.fence.taskId}:${w.fence.token}`)) {
          out.push("ok");
          continue;
        }
        try {
          await this.#refused(c, w.fence);
        } catch (e) {
          out.push(e instanceof AbortedError ? "abort_marked" : "lease_lost");
        }
      }
      return out;
    });
  }

  async heartbeat(fence: Fence, maxMs: number, leaseGraceMs: number): Promise<void> {
    await this.#tx(async (c) => {
      const rows = await this.#run(
        c,
        `UPDATE ${T} SET lease_until = :now + :ms::bigint, updated_at = :now WHERE ${FENCE} AND abort_requested = 0 RETURNING id`,
        { id: fence.taskId, token: fence.token, ms: maxMs + leaseGraceMs },
      );
      if (!rows[0]) await this.#refused(c, fence);
    });
  }

  async progress(fence: Fence, fraction: number, note: string | null): Promise<void> {
    await this.#tx(async (c) => {
      const rows = await this.#run(
        c,
        `UPDATE ${T} SET progress = :p, progress_note = :note, updated_at = :now WHERE ${FENCE} AND abort_requested = 0 RETURNING id`,
        { id: fence.taskId, token: fence.token, p: fraction, note },
      );
      if (!rows[0]) await this.#refused(c, fence);
    });
  }

  async settle(items: readonly Settlement[]): Promise<SettleResult[]> {
    if (items.length === 0) return [];
    return this.#tx(async (c) => {
      const out: SettleResult[] = [];
      const deltas = new Map<string, number>();
      let wake = false;
      // Lock order by id keeps concurrent batches from deadlocking on each other.
      const order = items
        .map((s, i) => [s, i] as const)
        .sort((a, b) => a[0].fence.taskId - b[0].fence.taskId);
      const results = new Array<SettleResult>(items.length);
      // Completions (the common case) are applied by one multi-row statement; what it
      // did not match, and every other kind, goes through #settleOne.
      const completes = order.filter(([s]) => s.kind === "complete");
      const applied = await this.#completeMany(
        c,
        completes.map(([s]) => s as Extract<Settlement, { kind: "complete" }>),
      );
      for (const [s, i] of order) {
        const hit = s.kind === "complete" ? applied.get(`${s.fence.taskId}:${s.fence.token}`) : undefined;
        if (hit) {
          results[i] = "ok";
          deltas.set(hit.queue, (deltas.get(hit.queue) ?? 0) - 1);
          if (hit.dependents > 0) wake = (await this.#releaseDependents(c, s.fence.taskId)) || wake;
          continue;
        }
        const r = await this.#settleOne(c, s, deltas);
        results[i] = r.result;
        wake ||= r.wake;
      }
      out.push(...results);
      await this.#bumpLive(c, deltas);
      if (wake) await this.#notify(c);
      return out;
    });
  }

  /** Fenced completion of many tasks in one statement; returns the rows it changed by id. */
  async #completeMany(
    c: Client,
    items: Extract<Settlement, { kind: "complete" }>[],
  ): Promise<Map<string, { queue: string; dependents: number }>> {
    /** Keyed by id:token, so two settlements of one task in a batch are told apart by their fence. */
    const out = new Map<string, { queue: string; dependents: number }>();
    if (items.length === 0) return out;
    const rows = await this.#run<{ id: number; token: number; queue: string; dependents: number }>(
      c,
      `UPDATE ${T} t SET status = 'terminal', outcome = 'completed', result = v.result, ended_at = :now,
         lease_until = NULL, locked_by = NULL, updated_at = :now
       FROM unnest(:ids::bigint[], :tokens::int[], :results::text[]) AS v(id, token, result)
       WHERE t.id = v.id AND t.status = 'running' AND t.epoch = v.token AND t.abort_requested = 0
       RETURNING t.id, v.token, t.queue, t.dependents`,
      {
        ids: items.map((s) => s.fence.taskId),
        tokens: items.map((s) => s.fence.token),
        results: items.map((s) => s.result),
      },
    );
    for (const r of rows) out.set(`${r.id}:${r.token}`, { queue: r.queue, dependents: r.dependents });
    return out;
  }

  async #settleOne(
    c: Client,
    s: Settlement,
    deltas: Map<string, number>,
  ): Promise<{ result: SettleResult; wake: boolean }> {
    const p = { id: s.fence.taskId, token: s.fence.token };
    const guard = s.kind === "aborted" || s.kind === "release" ? "" : "AND abort_requested = 0";
    const end = "lease_until = NULL, locked_by = NULL, updated_at = :now";
    type Row = { queue: string; dependents: number; attempts: number; wake_at: number | null };
    const why = async (): Promise<{ result: SettleResult; wake: boolean }> => {
      try {
        await this.#refused(c, s.fence);
      } catch (e) {
        return { result: e instanceof AbortedError ? "abort_marked" : "lease_lost", wake: false };
      }
      return { result: "lease_lost", wake: false };
    };
    let row: Row | undefined;
    switch (s.kind) {
      case "complete":
        row = (
          await this.#run<Row>(
            c,
            `UPDATE ${T} SET status = 'terminal', outcome = 'completed', result = :result, ended_at = :now, ${end}
          WHERE ${FENCE} ${guard} RETURNING queue, dependents, attempts, wake_at`,
            { ...p, result: s.result },
          )
        )[0];
        break;
      case "retry":
        row = (
          await this.#run<Row>(
            c,
            `UPDATE ${T} SET status = 'waiting', wake_at = :now + :delay::bigint, error = :error, ${end}
          WHERE ${FENCE} ${guard} RETURNING queue, dependents, attempts, wake_at`,
            { ...p, delay: Math.round(s.delayMs), error: JSON.stringify(s.error) },
          )
        )[0];
        if (!row) return why();
        await this.#event(c, s.fence.taskId, "attempt_failed", row.attempts, {
          error: s.error,
          retryAt: row.wake_at,
        });
        return { result: "ok", wake: false };
      case "sleep":
        row = (
          await this.#run<Row>(
            c,
            `UPDATE ${T} SET status = 'waiting', wake_at = :now + :delay::bigint, attempts = attempts - 1, ${end}
          WHERE ${FENCE} ${guard} RETURNING queue, dependents, attempts, wake_at`,
            { ...p, delay: Math.round(s.delayMs) },
          )
        )[0];
        if (!row) return why();
        await this.#run(
          c,
          `INSERT INTO {s}.ratchet_steps (task_id, name, result, attempt, created_at) VALUES (:id, :name, :result, :attempt, :now)
          ON CONFLICT (task_id, name) DO NOTHING`,
          {
            id: s.fence.taskId,
            name: s.step,
            result: JSON.stringify({ until: row.wake_at }),
            attempt: row.attempts,
          },
        );
        return { result: "ok", wake: false };
      case "release":
        row = (
          await this.#run<Row>(
            c,
            `UPDATE ${T} SET status = 'pending', attempts = attempts - 1, ${end}
          WHERE ${FENCE} RETURNING queue, dependents, attempts, wake_at`,
            p,
          )
        )[0];
        if (!row) return why();
        await this.#event(c, s.fence.taskId, "released", row.attempts + 1, null);
        return { result: "ok", wake: true };
      case "fail":
      case "aborted": {
        const outcome = s.kind === "fail" ? s.outcome : "aborted";
        row = (
          await this.#run<Row>(
            c,
            `UPDATE ${T} SET status = 'terminal', outcome = :outcome, error = :error, ended_at = :now, ${end}
          WHERE ${FENCE} ${guard} RETURNING queue, dependents, attempts, wake_at`,
            { ...p, outcome, error: s.error ? JSON.stringify(s.error) : null },
          )
        )[0];
        if (row)
          await this.#event(c, s.fence.taskId, outcome === "aborted" ? "aborted" : outcome, row.attempts, {
            error: s.error,
          });
        break;
      }
    }
    if (!row) return why();
    deltas.set(row.queue, (deltas.get(row.queue) ?? 0) - 1);
    let wake = false;
    if (row.dependents > 0) {
      if (s.kind === "complete") wake = await this.#releaseDependents(c, s.fence.taskId);
      else await this.#cascade(c, s.fence.taskId);
    }
    return { result: "ok", wake };
  }

  /** spec §6.2. Returns true when some dependent became pending. */
  async #releaseDependents(c: Client, id: TaskId): Promise<boolean> {
    const rows = await this.#run<{ status: string }>(
      c,
      `UPDATE ${T} t SET needs_pending = t.needs_pending - 1,
        status = CASE WHEN t.needs_pending = 1 THEN (CASE WHEN t.run_after <= :now THEN 'pending' ELSE 'waiting' END) ELSE t.status END,
        wake_at = CASE WHEN t.needs_pending = 1 AND t.run_after > :now THEN t.run_after ELSE t.wake_at END,
        updated_at = :now
      FROM (SELECT task_id FROM {s}.ratchet_deps WHERE needs_id = :id ORDER BY task_id) d
      WHERE t.id = d.task_id AND t.status = 'waiting' AND t.needs_pending > 0 RETURNING t.status`,
      { id },
    );
    return rows.some((r) => r.status === "pending");
  }

  async #dependentsOf(c: Client, root: TaskId) {
    const rows = await this.#run<{
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
  async #cascade(c: Client, root: TaskId): Promise<void> {
    const nodes = await this.#dependentsOf(c, root);
    const ids = planUpstreamFailure(root, nodes);
    if (ids.length === 0) return;
    const rows = await this.#run<{ queue: string }>(
      c,
      `UPDATE ${T} SET status = 'terminal', outcome = 'upstream_failed', error = :error,
      wake_at = NULL, ended_at = :now, updated_at = :now WHERE id = ANY(:ids) AND status = 'waiting' RETURNING queue`,
      { ids, error: upstreamError(root) },
    );
    const deltas = new Map<string, number>();
    for (const r of rows) deltas.set(r.queue, (deltas.get(r.queue) ?? 0) - 1);
    await this.#bumpLive(c, deltas);
  }

  async #event(
    c: Client,
    taskId: TaskId,
    kind: EventKind,
    attempt: number | null,
    detail: unknown,
  ): Promise<void> {
    await this.#run(
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

  // ------------------------------------------------------------ operations

  async retry(id: TaskId): Promise<TaskRecord> {
    return this.#tx(async (c) => {
      const row = (await this.#run<TaskRow>(c, `SELECT * FROM ${T} WHERE id = :id FOR UPDATE`, { id }))[0];
      if (!row) throw new NotFoundError(`task ${id}`);
      if (row.status !== "terminal")
        throw new InvalidStateError(`task ${id} is ${row.status}; only a terminal task can be retried`);
      const outcome = row.outcome!;
      if (outcome === "completed")
        throw new InvalidStateError(`task ${id} completed; enqueue it again instead`);
      if (outcome === "upstream_failed") {
        const root = fromJson<StoredError | null>(row.error)?.upstream ?? "?";
        throw new InvalidStateError(
          `task ${id} did not run because upstream task ${root} failed; retry task ${root} instead`,
        );
      }
      if (!isRetryableOutcome(outcome))
        throw new InvalidStateError(`task ${id} ended ${outcome} and cannot be retried`);
      const needs = await this.#run<{ id: number; status: string; outcome: Outcome | null }>(
        c,
        `SELECT t.id, t.status, t.outcome FROM {s}.ratchet_deps d JOIN ${T} t ON t.id = d.needs_id WHERE d.task_id = :id`,
        { id },
      );
      const bad = needs.find((n) => n.status === "terminal" && n.outcome !== "completed");
      if (bad)
        throw new InvalidStateError(
          `task ${id} needs task ${bad.id}, which ended ${bad.outcome}; retry task ${bad.id} first`,
        );
      if (row.dedupe_key !== null) {
        const taken = await this.#findDedupe(c, row.queue, row.dedupe_key);
        if (taken && taken.id !== id)
          throw new InvalidStateError(
            `task ${id}'s dedupe key "${row.dedupe_key}" is now held by task ${taken.id}`,
          );
      }
      const live = needs.filter((n) => n.status !== "terminal").length;
      await this.#run(
        c,
        `UPDATE ${T} SET status = :status, outcome = NULL, result = NULL, error = NULL, attempts = 0, abort_requested = 0,
          needs_pending = :pending, wake_at = NULL, run_after = :now, ended_at = NULL, progress = NULL, progress_note = NULL, updated_at = :now
        WHERE id = :id`,
        { id, pending: live, status: live > 0 ? "waiting" : "pending" },
      );
      const deltas = new Map([[row.queue, 1]]);
      await this.#event(c, id, "retried", null, { previous: outcome });
      const nodes = await this.#dependentsOf(c, id);
      const known = new Map(nodes.map((n) => [n.id, n.outcome]));
      const others = [...new Set(nodes.flatMap((n) => n.needs))].filter((n) => !known.has(n) && n !== id);
      if (others.length > 0) {
        for (const r of await this.#run<{ id: number; outcome: Outcome | null }>(
          c,
          `SELECT id, outcome FROM ${T} WHERE id = ANY(:ids)`,
          { ids: others },
        )) {
          known.set(r.id, r.outcome);
        }
      }
      const plan = planRetrySubtree(id, nodes, (n) => known.get(n) ?? null);
      const queueOf = new Map(nodes.map((n) => [n.id, n.queue]));
      for (const r of plan) {
        const upd = await this.#run(
          c,
          `UPDATE ${T} SET status = 'waiting', outcome = NULL, error = NULL, needs_pending = :pending,
          wake_at = NULL, ended_at = NULL, attempts = 0, updated_at = :now WHERE id = :id AND outcome = 'upstream_failed' RETURNING id`,
          { id: r.id, pending: r.needsPending },
        );
        if (upd[0]) deltas.set(queueOf.get(r.id)!, (deltas.get(queueOf.get(r.id)!) ?? 0) + 1);
      }
      await this.#bumpLive(c, deltas);
      if (live === 0) await this.#notify(c);
      return toRecord((await this.#run<TaskRow>(c, `SELECT * FROM ${T} WHERE id = :id`, { id }))[0]!);
    });
  }

  async abort(id: TaskId): Promise<AbortResult> {
    return this.#tx(async (c) => {
      const row = (await this.#run<TaskRow>(c, `SELECT * FROM ${T} WHERE id = :id FOR UPDATE`, { id }))[0];
      if (!row) throw new NotFoundError(`task ${id}`);
      if (row.status === "terminal") return { state: "terminal", outcome: row.outcome! };
      if (row.status === "running" || row.status === "completing") {
        if (row.abort_requested === 0) {
          await this.#run(c, `UPDATE ${T} SET abort_requested = 1, updated_at = :now WHERE id = :id`, { id });
          await this.#event(c, id, "abort_requested", row.attempts, null);
        }
        return { state: "marked" };
      }
      const error: StoredError = { name: "Aborted", message: "aborted before it ran to the end" };
      await this.#run(
        c,
        `UPDATE ${T} SET status = 'terminal', outcome = 'aborted', abort_requested = 1, error = :error, wake_at = NULL,
        ended_at = :now, updated_at = :now WHERE id = :id`,
        { id, error: JSON.stringify(error) },
      );
      await this.#event(c, id, "aborted", row.attempts, null);
      await this.#bumpLive(c, new Map([[row.queue, -1]]));
      if (row.dependents > 0) await this.#cascade(c, id);
      return { state: "aborted" };
    });
  }

  async prune(olderThanMs: number, limit: number): Promise<number> {
    return this.#tx(async (c) => {
      const ids = (
        await this.#run<{ id: number }>(
          c,
          `SELECT id FROM ${T} WHERE status = 'terminal' AND ended_at < :now - :age::bigint
        ORDER BY ended_at LIMIT :limit FOR UPDATE SKIP LOCKED`,
          { age: olderThanMs, limit },
        )
      ).map((r) => r.id);
      if (ids.length === 0) return 0;
      await this.#run(c, "DELETE FROM {s}.ratchet_steps WHERE task_id = ANY(:ids)", { ids });
      await this.#run(c, "DELETE FROM {s}.ratchet_events WHERE task_id = ANY(:ids)", { ids });
      await this.#run(c, "DELETE FROM {s}.ratchet_deps WHERE task_id = ANY(:ids) OR needs_id = ANY(:ids)", {
        ids,
      });
      return (await this.#run(c, `DELETE FROM ${T} WHERE id = ANY(:ids) RETURNING id`, { ids })).length;
    });
  }

  // ----------------------------------------------------------------- reads

  async get(id: TaskId): Promise<TaskRecord | null> {
    return this.#read(async (c) => {
      const r = (await this.#run<TaskRow>(c, `SELECT * FROM ${T} WHERE id = :id`, { id }))[0];
      return r ? toRecord(r) : null;
    });
  }

  async needsOf(id: TaskId): Promise<TaskId[]> {
    return this.#read(async (c) =>
      (
        await this.#run<{ needs_id: number }>(
          c,
          "SELECT needs_id FROM {s}.ratchet_deps WHERE task_id = :id ORDER BY needs_id",
          { id },
        )
      ).map((r) => r.needs_id),
    );
  }

  async steps(id: TaskId): Promise<StepRecord[]> {
    return this.#read(async (c) =>
      (
        await this.#run<{
          task_id: number;
          name: string;
          result: string;
          attempt: number;
          created_at: number;
        }>(c, "SELECT * FROM {s}.ratchet_steps WHERE task_id = :id ORDER BY id", { id })
      ).map((r) => ({
        taskId: r.task_id,
        name: r.name,
        result: fromJson(r.result),
        attempt: r.attempt,
        createdAt: r.created_at,
      })),
    );
  }

  async events(id: TaskId): Promise<TaskEvent[]> {
    return this.#read(async (c) =>
      (
        await this.#run<{
          task_id: number;
          at: number;
          kind: EventKind;
          attempt: number | null;
          detail: string | null;
        }>(c, "SELECT * FROM {s}.ratchet_events WHERE task_id = :id ORDER BY id", { id })
      ).map((r) => ({
        taskId: r.task_id,
        at: r.at,
        kind: r.kind,
        attempt: r.attempt,
        detail: fromJson(r.detail),
      })),
    );
  }

  async list(f: ListFilter): Promise<TaskRecord[]> {
    return this.#read(async (c) => {
      const where: string[] = [];
      const p: Record<string, unknown> = { limit: f.limit };
      // Column names are fixed here; only values are bound.
      const filters = {
        status: f.status,
        outcome: f.outcome,
        queue: f.queue,
        job: f.job,
        name: f.name,
      } as const;
      for (const [col, value] of Object.entries(filters)) {
        if (value === undefined) continue;
        where.push(`${col} = :${col}`);
        p[col] = value;
      }
      if (f.before !== undefined) {
        where.push("id < :before");
        p.before = f.before;
      }
      const sql = `SELECT * FROM ${T} ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY id DESC LIMIT :limit`;
      return (await this.#run<TaskRow>(c, sql, p)).map(toRecord);
    });
  }

  async jobStatus(job: string): Promise<JobStatus> {
    return this.#read(async (c) => {
      const rows = await this.#run<{ status: TaskRecord["status"]; outcome: Outcome | null; n: number }>(
        c,
        `SELECT status, outcome, count(*)::bigint AS n FROM ${T} WHERE job = :job GROUP BY status, outcome`,
        { job },
      );
      const out: JobStatus = { job, total: 0, byStatus: {}, byOutcome: {}, settled: true };
      for (const r of rows) {
        out.total += r.n;
        out.byStatus[r.status] = (out.byStatus[r.status] ?? 0) + r.n;
        if (r.outcome) out.byOutcome[r.outcome] = (out.byOutcome[r.outcome] ?? 0) + r.n;
        if (r.status !== "terminal") out.settled = false;
      }
      return out;
    });
  }

  async stats(): Promise<QueueStats[]> {
    return this.#read(async (c) => {
      const rows = await this.#run<{
        queue: string;
        status: TaskRecord["status"];
        outcome: Outcome | null;
        n: number;
      }>(
        c,
        `SELECT queue, status, outcome, count(*)::bigint AS n FROM ${T} GROUP BY queue, status, outcome ORDER BY queue`,
      );
      const byQueue = new Map<string, QueueStats>();
      for (const r of rows) {
        let q = byQueue.get(r.queue);
        if (!q) {
          q = { queue: r.queue, byStatus: {}, byOutcome: {} };
          byQueue.set(r.queue, q);
        }
        q.byStatus[r.status] = (q.byStatus[r.status] ?? 0) + r.n;
        if (r.outcome) q.byOutcome[r.outcome] = (q.byOutcome[r.outcome] ?? 0) + r.n;
      }
      return [...byQueue.values()];
    });
  }

  async nextRunAt(): Promise<number | null> {
    return this.#read(async (c) => {
      const r = await this.#run<{ t: number | null }>(
        c,
        `SELECT CASE WHEN EXISTS (SELECT 1 FROM ${T} WHERE status = 'pending') THEN :now
        ELSE least((SELECT min(wake_at) FROM ${T} WHERE status = 'waiting' AND wake_at IS NOT NULL),
                   (SELECT min(lease_until) FROM ${T} WHERE status = 'running')) END AS t`,
      );
      return r[0]?.t ?? null;
    });
  }

  async countReady(queues: readonly string[], names: readonly string[], cap: number): Promise<number> {
    if (names.length === 0 || queues.length === 0) return 0;
    return this.#read(async (c) => {
      const r = await this.#run<{ n: number }>(
        c,
        `SELECT count(*)::bigint AS n FROM (SELECT 1 FROM ${T} WHERE status = 'pending'
        AND queue = ANY(:queues) AND name = ANY(:names) LIMIT :cap) x`,
        { queues, names, cap },
      );
      return r[0]!.n;
    });
  }

  /**
   * LISTEN for wake-ups (enqueue of due work, dependents released, retries).
   * The listener reconnects with backoff and calls onWake after each
   * reconnect, since notifications sent while disconnected are lost (the
   * worker's poll is the fallback either way).
   */
  async subscribe(onWake: () => void): Promise<() => Promise<void>> {
    let stopped = false;
    let current: pg.Client | undefined;
    let delay = 100;
    // One loop owns the connection: it connects, LISTENs, and on loss starts over.
    // It runs in the background, so a worker starts (and polls) while the server is down.
    const loop = async (): Promise<void> => {
      while (!stopped) {
        const cl = new pg.Client({ ...(this.pool.options as pg.ClientConfig), types: types as never });
        cl.on("error", () => {});
        const ended = new Promise<void>((resolve) => cl.once("end", () => resolve()));
        try {
          await cl.connect();
          await cl.query(`LISTEN "${this.#channel}"`);
        } catch {
          await cl.end().catch(() => {});
          await new Promise((r) => setTimeout(r, delay));
          delay = Math.min(delay * 2, 5_000);
          continue;
        }
        if (stopped) {
          await cl.end().catch(() => {});
          return;
        }
        current = cl;
        delay = 100;
        cl.on("notification", () => onWake());
        // Notifications sent while we were not listening are lost: poll once now.
        onWake();
        await ended;
        current = undefined;
        if (!stopped) onWake();
      }
    };
    void loop();
    const handle = {
      stop: async () => {
        stopped = true;
        this.#listeners.delete(handle);
        await current?.end().catch(() => {});
      },
    };
    this.#listeners.add(handle);
    return handle.stop;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const l of [...this.#listeners]) await l.stop();
    if (this.#ownPool) await this.pool.end();
  }
}

function upstreamError(root: TaskId): string {
  const e: StoredError = { name: "UpstreamFailed", message: `upstream task ${root} failed`, upstream: root };
  return JSON.stringify(e);
}

export { READY };
