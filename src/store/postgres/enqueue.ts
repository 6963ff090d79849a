/** Enqueue (spec §2): one SQL function call per entry without needs; the general path for entries with needs. */
import type pg from "pg";
import { fromJson, type StoredError } from "../../core/json.js";
import type { Outcome } from "../../core/model.js";
import {
  InvalidStateError,
  NotFoundError,
  QueueFullError,
  RatchetError,
  StoreError,
  ValidationError,
} from "../../errors.js";
import { flowAfter, flowBefore } from "../flow.js";
import { applyGates } from "../gates.js";
import type { Enqueued, EnqueueOptions, NewTask, TaskRecord } from "../store.js";
import type { Client, PgCore } from "./core.js";
import { types, upstreamError } from "./core.js";
import { bind } from "./named.js";
import { T } from "./sql.js";

/** spec §2.2–§2.8: the whole batch in one transaction. */
export async function enqueue(
  core: PgCore,
  batch: readonly NewTask[],
  opts: EnqueueOptions,
): Promise<Enqueued[]> {
  // The one-round-trip functions know neither needs, scopes, flow keys nor gates; those entries take the general path.
  if (batch.every((t) => t.needs.length === 0 && (t.scope ?? null) === null && !t.flow && !t.gates))
    return enqueueSimple(core, batch, opts);
  return core.tx(async (c) => {
    const queues = [...new Set(batch.map((t) => t.queue))].sort();
    // Admission control is exact: enqueues of one queue serialise on its advisory lock.
    for (const q of queues)
      await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`ratchet-queue:${core.schema}:${q}`]);
    const out: Enqueued[] = [];
    const added = new Map<string, number>();
    let anyPending = false;
    for (const t of batch) {
      if (t.flow) {
        // spec §14.6–§14.7: a throttled or debounced call may resolve to an existing task.
        const hit = await core.inTx(c, flowBefore(t.queue, t.flow, t.input));
        if (hit) {
          out.push({ id: hit.id, deduped: true, status: hit.status });
          continue;
        }
      }
      const needIds: number[] = [];
      for (const ref of t.needs) {
        let id: number | undefined;
        if ("id" in ref) id = ref.id;
        else if ("index" in ref) id = out[ref.index]?.id;
        else {
          const hit = await core.findDedupe(c, ref.queue, ref.dedupe);
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
        const hit = await core.findDedupe(c, t.queue, t.dedupe);
        if (hit) {
          out.push({ id: hit.id, deduped: true, status: hit.status });
          continue;
        }
      }
      let pending = 0;
      let upstream: number | null = null;
      if (needIds.length > 0) {
        // FOR SHARE: a predecessor cannot settle between this read and our commit.
        const deps = await core.run<{
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
      const rows = await core.run<{ id: number; status: TaskRecord["status"] }>(
        c,
        `
        INSERT INTO ${T} (queue, name, version, input, status, outcome, error, priority, order_key, max_ms, max_attempts,
          run_after, wake_at, needs_pending, dedupe_key, job, created_at, updated_at, ended_at, scope)
        SELECT :queue::text, :name::text, :version::int, :input::text, s.status, :outcome::text, :error::text, :priority::int,
          :now - :priority::bigint * 360000, :max_ms::bigint, :max_attempts::int, :now + :delay::bigint,
          CASE WHEN s.status = 'waiting' AND :pending::int = 0 THEN :now + :delay::bigint END,
          :pending::int, :dedupe::text, :job::text, :now, :now, CASE WHEN :upstream::bigint IS NOT NULL THEN :now END, :scope::text
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
          scope: t.scope ?? null,
        },
      );
      const row = rows[0];
      if (!row) {
        // A concurrent enqueue took the key first; it is the task for this entry (spec §2.3).
        const hit = await core.findDedupe(c, t.queue, t.dedupe!);
        if (!hit) throw new StoreError("dedupe conflict without a holder");
        out.push({ id: hit.id, deduped: true, status: hit.status });
        continue;
      }
      if (needIds.length > 0) {
        await core.run(
          c,
          `INSERT INTO {s}.ratchet_deps (needs_id, task_id) SELECT unnest(:needs::bigint[]), :id ON CONFLICT DO NOTHING`,
          { needs: needIds, id: row.id },
        );
        await core.run(c, `UPDATE ${T} SET dependents = dependents + 1 WHERE id = ANY(:needs)`, {
          needs: needIds,
        });
      }
      if (t.flow) await core.inTx(c, flowAfter(t.queue, t.flow, row.id));
      if (t.gates) await core.inTx(c, applyGates(row.id, t.queue, t.priority, t.gates));
      if (row.status !== "terminal") added.set(t.queue, (added.get(t.queue) ?? 0) + 1);
      if (row.status === "pending") anyPending = true;
      out.push({ id: row.id, deduped: false, status: row.status });
    }
    for (const q of queues) {
      const n = added.get(q) ?? 0;
      if (n === 0) continue;
      const depth = await queueLive(core, c, q);
      const max = opts.maxDepth(q);
      if (depth + n > max) throw new QueueFullError(q, depth, max, n);
      await core.bumpLive(c, new Map([[q, n]]));
    }
    if (anyPending) await core.notify(c);
    return out;
  });
}

/**
 * Entries without needs go through the enqueue_one function: one round trip
 * each. A single entry runs as its own statement (an implicit transaction);
 * a batch runs them in one transaction, so a full queue rolls back all.
 */
export async function enqueueSimple(
  core: PgCore,
  batch: readonly NewTask[],
  opts: EnqueueOptions,
): Promise<Enqueued[]> {
  const call = async (c: Client | pg.Pool, t: NewTask): Promise<Enqueued> => {
    const c2 =
      core.c(`SELECT task_id, deduped, task_status FROM {s}.enqueue_one(:queue, :name, :version, :input, :priority,
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
      shard: core.shard,
      now_override: core.clock ? core.clock.now() : null,
      channel: core.channel,
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
    if (core.closed) throw new StoreError("the store is closed");
    try {
      return [await call(core.pool, batch[0]!)];
    } catch (err) {
      if (err instanceof RatchetError) throw err;
      throw new StoreError(`PostgreSQL: ${(err as Error).message}`, { cause: err });
    }
  }
  return core.tx(async (c) => {
    const c2 =
      core.c(`SELECT task_id, deduped, task_status FROM {s}.enqueue_batch(:queue::text[], :name::text[],
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
      shard: core.shard,
      now_override: core.clock ? core.clock.now() : null,
      channel: core.channel,
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

export async function queueLive(core: PgCore, c: Client, queue: string): Promise<number> {
  const r = await core.run<{ n: number | null }>(
    c,
    "SELECT sum(live) AS n FROM {s}.ratchet_queue_counts WHERE queue = :queue",
    { queue },
  );
  return r[0]?.n ?? 0;
}
