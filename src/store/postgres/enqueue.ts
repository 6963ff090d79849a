/** Enqueue (spec §2): one SQL function call per entry without needs; the general path for entries with needs. */
import { fromJson, type StoredError } from "../../core/json.js";
import type { Outcome } from "../../core/model.js";
import { AGING_STEP_MS } from "../../core/priority.js";
import {
  InvalidStateError,
  NotFoundError,
  QueueFullError,
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
  if (batch.length > 1 && batch.every(linkable)) return enqueueLinked(core, batch, opts);
  return core.tx(async (c) => {
    const queues = [...new Set(batch.map((t) => t.queue))].sort();
    await lockQueues(core, c, queues);
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
            upstream = rootOf(dep, id);
          }
        }
      }
      const rows = await core.run<{ id: number; status: TaskRecord["status"] }>(
        c,
        `
        INSERT INTO ${T} (queue, name, version, input, status, outcome, error, priority, order_key, max_ms, max_attempts,
          run_after, wake_at, needs_pending, dedupe_key, job, created_at, updated_at, ended_at, scope)
        SELECT :queue::text, :name::text, :version::int, :input::text, s.status, :outcome::text, :error::text, :priority::int,
          :now - :priority::bigint * ${AGING_STEP_MS}, :max_ms::bigint, :max_attempts::int, :now + :delay::bigint,
          CASE WHEN s.status = 'waiting' AND :pending::int = 0 THEN :now + :delay::bigint END,
          :pending::int, :dedupe::text, :job::text, :now, :now, CASE WHEN :upstream::bigint IS NOT NULL THEN :now END, :scope::text
        FROM (SELECT CASE WHEN :upstream::bigint IS NOT NULL THEN 'terminal'
                          WHEN :pending::int > 0 OR :delay::bigint > 0 THEN 'waiting' ELSE 'pending' END AS status) s
        ON CONFLICT (queue, dedupe_key) WHERE dedupe_key IS NOT NULL AND (status <> 'terminal' OR outcome = 'completed') DO NOTHING
        RETURNING id, status`,
        {
          ...entryValues(t),
          pending,
          dedupe: t.dedupe,
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
    await admit(core, c, queues, added, opts, anyPending);
    return out;
  });
}

/** Admission control is exact: enqueues of one queue serialise on its advisory lock, taken in name order. */
async function lockQueues(core: PgCore, c: Client, queues: readonly string[]): Promise<void> {
  for (const q of queues)
    await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`ratchet-queue:${core.schema}:${q}`]);
}

/** spec §2.7: the batch's live tasks per queue against maxDepth (a full queue throws, rolling back all); then the counters and the notify. */
async function admit(
  core: PgCore,
  c: Client,
  queues: readonly string[],
  added: ReadonlyMap<string, number>,
  opts: EnqueueOptions,
  anyPending: boolean,
): Promise<void> {
  for (const q of queues) {
    const n = added.get(q) ?? 0;
    if (n === 0) continue;
    const depth = await queueLive(core, c, q);
    const max = opts.maxDepth(q);
    if (depth + n > max) throw new QueueFullError(q, depth, max, n);
    await core.bumpLive(c, new Map([[q, n]]));
  }
  if (anyPending) await core.notify(c);
}

/** The root to name for a need that ended other than completed: an upstream_failed one carries its own (spec §6.1). */
function rootOf(dep: { outcome: Outcome | null; error: string | null }, id: number): number {
  return dep.outcome === "upstream_failed" ? (fromJson<StoredError | null>(dep.error)?.upstream ?? id) : id;
}

/** One entry's columns, bound to the statements that insert one task. */
function entryValues(t: NewTask) {
  return {
    queue: t.queue,
    name: t.name,
    version: t.version,
    input: t.input,
    priority: t.priority,
    max_ms: t.maxMs,
    max_attempts: t.maxAttempts,
    delay: Math.max(0, Math.round(t.delayMs)),
    job: t.job,
  };
}

/** The batch's columns as arrays, bound to the set-based statements (unnest). */
function columns(batch: readonly NewTask[]) {
  const col = <K extends keyof NewTask>(k: K) => batch.map((t) => t[k]);
  return {
    queue: col("queue"),
    name: col("name"),
    version: col("version"),
    input: col("input"),
    priority: col("priority"),
    max_ms: col("maxMs"),
    max_attempts: col("maxAttempts"),
    delay: batch.map((t) => Math.max(0, Math.round(t.delayMs))),
    job: col("job"),
  };
}

/** An entry the set-based path takes: needs by id or by earlier batch index, and nothing else special. */
function linkable(t: NewTask): boolean {
  return (
    t.dedupe === null &&
    (t.scope ?? null) === null &&
    !t.flow &&
    !t.gates &&
    t.needs.every((r) => "id" in r || "index" in r)
  );
}

/**
 * A batch with needs (spec §2.4, §6.1), none by dedupe key, and no dedupe keys, scopes, flow keys or
 * gates, in set form: one locking read of every predecessor outside the batch, one INSERT of every
 * row, one INSERT of every edge, one `dependents` update per predecessor. The general path below
 * paid four statements per entry, and every entry needing one task updated that task's row once
 * more: 1,000 versions of one row per batch, each update walking the chain of the ones before it,
 * so 70,000 tasks behind one blocker took 12 minutes (peers harness, W5b).
 *
 * Same rules as the general path: a predecessor outside the batch is read FOR SHARE, so it cannot
 * settle before we commit; a need on a task that ended other than completed makes the entry
 * upstream_failed at once, naming the first such need's root (spec §6.3); ids increase in batch
 * order (rows are inserted ORDER BY position, and identity values are drawn in that order), so an
 * entry's batch-index needs resolve to ids known once the INSERT returns.
 */
async function enqueueLinked(
  core: PgCore,
  batch: readonly NewTask[],
  opts: EnqueueOptions,
): Promise<Enqueued[]> {
  return core.tx(async (c) => {
    const queues = [...new Set(batch.map((t) => t.queue))].sort();
    await lockQueues(core, c, queues);
    const outside = [...new Set(batch.flatMap((t) => t.needs.flatMap((r) => ("id" in r ? [r.id] : []))))];
    const known = new Map<number, { status: string; outcome: Outcome | null; error: string | null }>();
    if (outside.length > 0) {
      const rows = await core.run<{
        id: number;
        status: string;
        outcome: Outcome | null;
        error: string | null;
      }>(c, `SELECT id, status, outcome, error FROM ${T} WHERE id = ANY(:ids) ORDER BY id FOR SHARE`, {
        ids: outside,
      });
      for (const r of rows) known.set(r.id, r);
    }
    // Per entry, in batch order: its needs (a number: a task id; a string "#k": entry k of the batch),
    // how many are unfinished, and the root of the first failed one.
    type Need = number | `#${number}`;
    const plan: { needs: Need[]; pending: number; upstream: number | null }[] = [];
    for (let i = 0; i < batch.length; i++) {
      const needs: Need[] = [];
      let pending = 0;
      let upstream: number | null = null;
      for (const ref of batch[i]!.needs) {
        const need: Need = "id" in ref ? ref.id : `#${(ref as { index: number }).index}`;
        if (typeof need === "string" && Number(need.slice(1)) >= i)
          throw new InvalidStateError("needs refers to a later entry of the batch");
        if (needs.includes(need)) continue;
        needs.push(need);
        if (typeof need === "number") {
          const dep = known.get(need);
          if (!dep) throw new NotFoundError(`task ${need} (named in needs)`);
          if (dep.status !== "terminal") pending++;
          else if (dep.outcome !== "completed" && upstream === null) {
            upstream = rootOf(dep, need);
          }
        } else {
          // An entry of this batch is new: unfinished, unless it is upstream_failed already.
          const k = Number(need.slice(1));
          const up = plan[k]!.upstream;
          if (up === null) pending++;
          else if (upstream === null) upstream = up;
        }
      }
      plan.push({ needs, pending, upstream });
    }
    const inserted = await core.run<{ id: number; status: TaskRecord["status"] }>(
      c,
      `
      WITH x AS (
        SELECT * FROM unnest(:queue::text[], :name::text[], :version::int[], :input::text[], :priority::int[],
          :max_ms::bigint[], :max_attempts::int[], :delay::bigint[], :pending::int[], :upstream::bigint[], :error::text[], :job::text[])
          WITH ORDINALITY AS x(q, nm, v, inp, pr, mm, ma, dl, pe, up, er, jb, ord)
      ), y AS (
        SELECT x.*, CASE WHEN x.up IS NOT NULL THEN 'terminal' WHEN x.pe > 0 OR x.dl > 0 THEN 'waiting'
          ELSE 'pending' END AS st, :now AS t FROM x
      ), ins AS (
        INSERT INTO ${T} (queue, name, version, input, status, outcome, error, priority, order_key, max_ms, max_attempts,
          run_after, wake_at, needs_pending, job, created_at, updated_at, ended_at)
        SELECT y.q, y.nm, y.v, y.inp, y.st, CASE WHEN y.up IS NOT NULL THEN 'upstream_failed' END,
          y.er,
          y.pr, y.t - y.pr::bigint * ${AGING_STEP_MS}, y.mm, y.ma, y.t + y.dl,
          CASE WHEN y.st = 'waiting' AND y.pe = 0 THEN y.t + y.dl END, y.pe, y.jb, y.t, y.t,
          CASE WHEN y.up IS NOT NULL THEN y.t END
        FROM y ORDER BY y.ord
        RETURNING id, status)
      SELECT id, status FROM ins ORDER BY id`,
      {
        ...columns(batch),
        pending: plan.map((p) => p.pending),
        upstream: plan.map((p) => p.upstream),
        error: plan.map((p) => (p.upstream === null ? null : upstreamError(p.upstream))),
      },
    );
    if (inserted.length !== batch.length) throw new StoreError("enqueue inserted fewer rows than the batch");
    const ids = inserted.map((r) => r.id);
    const from: number[] = [];
    const to: number[] = [];
    plan.forEach((p, i) => {
      for (const n of p.needs) {
        from.push(typeof n === "number" ? n : ids[Number(n.slice(1))]!);
        to.push(ids[i]!);
      }
    });
    if (from.length > 0) {
      await core.run(
        c,
        `INSERT INTO {s}.ratchet_deps (needs_id, task_id) SELECT * FROM unnest(:from::bigint[], :to::bigint[])
          ON CONFLICT DO NOTHING`,
        { from, to },
      );
      // One update per predecessor, however many entries need it.
      await core.run(
        c,
        `UPDATE ${T} SET dependents = ${T}.dependents + d.n
          FROM (SELECT k, count(*) AS n FROM unnest(:from::bigint[]) AS k GROUP BY k) d WHERE ${T}.id = d.k`,
        { from },
      );
    }
    const added = new Map<string, number>();
    let anyPending = false;
    inserted.forEach((r, i) => {
      const q = batch[i]!.queue;
      if (r.status !== "terminal") added.set(q, (added.get(q) ?? 0) + 1);
      if (r.status === "pending") anyPending = true;
    });
    await admit(core, c, queues, added, opts, anyPending);
    return inserted.map((r) => ({ id: r.id, deduped: false, status: r.status }));
  });
}

/** One simple entry through enqueue_one (spec §2.3, §2.7): a full queue throws QueueFullError. */
async function enqueueOne(core: PgCore, c: Client, t: NewTask, max: number): Promise<Enqueued> {
  const c2 =
    core.c(`SELECT task_id, deduped, task_status FROM {s}.enqueue_one(:queue, :name, :version, :input, :priority,
    :max_ms, :max_attempts, :delay, :dedupe, :job, :max_depth, :shard, :now_override, :channel)`);
  const values = bind(c2, {
    ...entryValues(t),
    dedupe: t.dedupe,
    max_depth: max,
    shard: core.shard,
    now_override: core.clock ? core.clock.now() : null,
    channel: core.channel,
  });
  try {
    const res = await c.query({ name: c2.name, text: c2.text, values, types: types as never });
    const row = res.rows[0] as { task_id: number; deduped: boolean; task_status: TaskRecord["status"] };
    return { id: row.task_id, deduped: row.deduped, status: row.task_status };
  } catch (err) {
    if ((err as { code?: string }).code === "RQ001")
      throw new QueueFullError(t.queue, Number((err as { detail?: string }).detail ?? 0), max, 1);
    throw err;
  }
}

/**
 * A call of one of the array functions (enqueue_batch, enqueue_each: their parameters are the same)
 * over `batch`, `maxDepths` the limit of each entry's queue.
 */
function arrayCall(
  core: PgCore,
  fn: "enqueue_batch" | "enqueue_each",
  batch: readonly NewTask[],
  maxDepths: readonly number[],
) {
  const c2 = core.c(`SELECT * FROM {s}.${fn}(:queue::text[], :name::text[], :version::int[], :input::text[],
    :priority::int[], :max_ms::bigint[], :max_attempts::int[], :delay::bigint[], :dedupe::text[], :job::text[],
    :max_depth::bigint[], :shard, :now_override, :channel)`);
  const values = bind(c2, {
    ...columns(batch),
    dedupe: batch.map((t) => t.dedupe),
    max_depth: maxDepths,
    shard: core.shard,
    now_override: core.clock ? core.clock.now() : null,
    channel: core.channel,
  });
  return { name: c2.name, text: c2.text, values, types: types as never };
}

/** A row of enqueue_each: a task, or (task_id NULL) a full queue and the depth found. */
interface EachRow {
  task_id: number | null;
  deduped: boolean;
  task_status: TaskRecord["status"];
  full_live: number | null;
}

/** Each store's single enqueues in flight (see Singles). */
const SINGLES = new WeakMap<PgCore, Singles>();
/** Single enqueues that go out together, at most this many per statement. */
const SINGLES_BATCH = 500;

/**
 * Single enqueues of simple tasks (enqueueSimple's kind) from one store: the first goes out at once,
 * as one call of enqueue_one; those that arrive while one is in flight wait for it and then go out
 * together, as one call of enqueue_each (migration 9), each still its own enqueue (spec §2.3, §2.7:
 * deduped or admitted on its own, in the order called; a full queue refuses that one alone). A
 * queue's lock is held through the commit, so single enqueues to one queue committed one after
 * another: 1,592 / 1,966 / 1,844 enqueues/s for 1 / 4 / 16 callers, and during a slow fsync every
 * later one queued on the lock and then paid a commit of its own (migration 9). Grouped: 1,488 /
 * 2,225 / 4,418 (`node dist/bench/enqueues.js --callers 1,4,16 --rounds 3 --base …`, bench/README.md).
 * A failure of the statement itself (a lost connection) fails every enqueue it carried.
 */
class Singles {
  #waiting: { t: NewTask; max: number; done: (err: unknown, r?: Enqueued) => void }[] = [];
  #busy = false;

  constructor(private readonly core: PgCore) {}

  submit(t: NewTask, max: number): Promise<Enqueued> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ t, max, done: (err, r) => (err === undefined ? resolve(r!) : reject(err)) });
      if (!this.#busy) void this.#run();
    });
  }

  /** Sends what waits until nothing does; never rejects (every failure goes to its enqueues). */
  async #run(): Promise<void> {
    this.#busy = true;
    while (this.#waiting.length > 0) {
      const group = this.#waiting.splice(0, SINGLES_BATCH);
      if (group.length === 1) {
        const g = group[0]!;
        await this.core
          .autocommit((c) => enqueueOne(this.core, c, g.t, g.max))
          .then(
            (r) => g.done(undefined, r),
            (err) => g.done(err),
          );
        continue;
      }
      let rows: EachRow[];
      try {
        // One statement in its own implicit transaction, with the store's retries (spec §13.7).
        const call = arrayCall(
          this.core,
          "enqueue_each",
          group.map((g) => g.t),
          group.map((g) => g.max),
        );
        rows = (await this.core.autocommit((c) => c.query(call))).rows as EachRow[];
        if (rows.length !== group.length)
          throw new StoreError(`enqueue_each answered ${rows.length} rows for ${group.length} entries`);
      } catch (err) {
        for (const g of group) g.done(err);
        continue;
      }
      group.forEach((g, i) => {
        const r = rows[i]!;
        if (r.task_id === null) g.done(new QueueFullError(g.t.queue, r.full_live ?? 0, g.max, 1));
        else g.done(undefined, { id: r.task_id, deduped: r.deduped, status: r.task_status });
      });
    }
    this.#busy = false;
  }
}

/**
 * Entries without needs go through the SQL functions: a single entry through Singles (enqueue_one,
 * or enqueue_each with the single enqueues that overlapped it); a batch through enqueue_batch in one
 * statement, its own implicit transaction, so a full queue (the function raises) rolls back all of
 * it (spec §2.2, §2.7). One round trip where BEGIN, the call and COMMIT took three: batches of 1,000
 * from one caller (`node dist/bench/enqueues.js --batch 1000 --callers 1,4 --rounds 6 --seconds 3
 * --base …`, two sets) 62.0k → 70.3k and 53.8k → 62.7k tasks/s, four callers 69.5k → 82.1k; the
 * peers harness's W1 batch (`--runs 5 --only ratchet-pg,graphile-worker --figures w1-batch`, two
 * builds alternating, twice) 50.5k / 51.9k → 56.8k / 55.4k, 1.21× / 1.21× → 1.37× / 1.24×
 * graphile-worker's addJobs.
 */
export async function enqueueSimple(
  core: PgCore,
  batch: readonly NewTask[],
  opts: EnqueueOptions,
): Promise<Enqueued[]> {
  if (batch.length === 1) {
    let singles = SINGLES.get(core);
    if (!singles) {
      singles = new Singles(core);
      SINGLES.set(core, singles);
    }
    return [await singles.submit(batch[0]!, opts.maxDepth(batch[0]!.queue))];
  }
  const call = arrayCall(
    core,
    "enqueue_batch",
    batch,
    batch.map((t) => opts.maxDepth(t.queue)),
  );
  return core.autocommit(async (c) => {
    try {
      const res = await c.query(call);
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
