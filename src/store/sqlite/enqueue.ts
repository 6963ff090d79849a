/** Enqueue for the SQLite store: dedupe, predecessor resolution and admission. spec §2.2–§2.8. */
import type Database from "better-sqlite3";
import { fromJson, type StoredError } from "../../core/json.js";
import type { Outcome } from "../../core/model.js";
import { orderKey } from "../../core/priority.js";
import { InvalidStateError, NotFoundError, QueueFullError, ValidationError } from "../../errors.js";
import { flowAfter, flowBefore } from "../flow.js";
import { applyGates } from "../gates.js";
import { claimedFromRaw } from "../rows.js";
import type { Enqueued, EnqueueOptions, HandoffRequest, NeedRef, NewTask, TaskRecord } from "../store.js";
import { type SqliteCore, upstreamError } from "./core.js";
import { ANY_DUE, ANY_EXPIRED, claimIn } from "./sql.js";

/** spec §2.2–§2.8. The whole batch is one transaction; any throw rolls it back. */
export function enqueue(c: SqliteCore, batch: readonly NewTask[], opts: EnqueueOptions): Enqueued[] {
  return c.tx(() => {
    const now = c.now();
    const out: Enqueued[] = [];
    const added = new Map<string, number>();
    const findDedupe = c.s(
      "SELECT id, status FROM ratchet_tasks WHERE queue = ? AND dedupe_key = ? AND (status <> 'terminal' OR outcome = 'completed')",
    );
    const getDep = c.s("SELECT id, status, outcome, error FROM ratchet_tasks WHERE id = ?");
    const insert = c.s(`INSERT INTO ratchet_tasks
        (queue, name, version, input, status, outcome, error, priority, order_key, max_ms, max_attempts, run_after, wake_at,
         needs_pending, dedupe_key, job, created_at, updated_at, ended_at, scope)
        VALUES (:queue, :name, :version, :input, :status, :outcome, :error, :priority, :order_key, :max_ms, :max_attempts, :run_after,
         :wake_at, :needs_pending, :dedupe, :job, :now, :now, :ended_at, :scope)`);
    const addDep = c.s("INSERT OR IGNORE INTO ratchet_deps (needs_id, task_id) VALUES (?, ?)");
    const bumpDependents = c.s("UPDATE ratchet_tasks SET dependents = dependents + 1 WHERE id = ?");
    for (let i = 0; i < batch.length; i++) {
      const t = batch[i]!;
      const run = plainRun(batch, i);
      if (run > 1) {
        // spec §2.2: a run of plain entries is one INSERT of many rows, in the batch's transaction.
        insertRun(c, batch, i, run, now, out);
        added.set(t.queue, (added.get(t.queue) ?? 0) + run);
        i += run - 1;
        continue;
      }
      if (t.flow) {
        // spec §14.6–§14.7: a throttled or debounced call may resolve to an existing task.
        const hit = c.inTx(flowBefore(t.queue, t.flow, t.input));
        if (hit) {
          out.push({ id: hit.id, deduped: true, status: hit.status });
          continue;
        }
      }
      if (t.dedupe !== null) {
        const hit = findDedupe.get(t.queue, t.dedupe) as
          | { id: number; status: TaskRecord["status"] }
          | undefined;
        if (hit) {
          out.push({ id: hit.id, deduped: true, status: hit.status });
          continue;
        }
      }
      const needIds = resolveNeeds(t.needs, out, findDedupe);
      const { pending, upstream } = needsState(needIds, getDep);
      const runAfter = now + Math.max(0, t.delayMs);
      const status = upstream !== null ? "terminal" : pending > 0 || runAfter > now ? "waiting" : "pending";
      const info = insert.run({
        queue: t.queue,
        name: t.name,
        version: t.version,
        input: t.input,
        status,
        outcome: upstream !== null ? "upstream_failed" : null,
        error: upstream !== null ? upstreamError(upstream) : null,
        priority: t.priority,
        order_key: orderKey(now, t.priority),
        max_ms: t.maxMs,
        max_attempts: t.maxAttempts,
        run_after: runAfter,
        wake_at: status === "waiting" && pending === 0 ? runAfter : null,
        needs_pending: pending,
        dedupe: t.dedupe,
        job: t.job,
        now,
        ended_at: upstream !== null ? now : null,
        scope: t.scope ?? null,
      });
      const id = Number(info.lastInsertRowid);
      if (t.flow) c.inTx(flowAfter(t.queue, t.flow, id));
      if (t.gates) c.inTx(applyGates(id, t.queue, t.priority, t.gates));
      for (const n of needIds) {
        addDep.run(n, id);
        bumpDependents.run(n);
      }
      if (status !== "terminal") added.set(t.queue, (added.get(t.queue) ?? 0) + 1);
      out.push({ id, deduped: false, status });
    }
    for (const [queue, n] of added) {
      const depth = c.queueLive(queue);
      const max = opts.maxDepth(queue);
      if (depth + n > max) throw new QueueFullError(queue, depth, max, n);
      c.bumpLive(queue, n);
    }
    if (opts.handoff && batch.length === 1) handoff(c, batch[0]!, out[0]!, opts.handoff, now);
    return out;
  });
}

/** A plain entry: nothing to look up or to write beside its row (no flow key, dedupe key, needs or gates). */
function isPlain(t: NewTask): boolean {
  return !t.flow && t.dedupe === null && t.needs.length === 0 && !t.gates;
}

/** Rows of one multi-row INSERT: its inputs are one bound JSON text, which SQLite splits (json_each). */
const RUN_MAX = 1_000;

/**
 * How many entries from `i` on are plain and alike in every column but their input, so one INSERT
 * writes them all (at most RUN_MAX). A batch of 1,000 no-ops written one statement per row spent
 * ~11 µs per row in SQLite against ~3 for the INSERT of many (issue 43, W1).
 */
function plainRun(batch: readonly NewTask[], i: number): number {
  const a = batch[i]!;
  if (!isPlain(a)) return 0;
  let n = 1;
  while (n < RUN_MAX && i + n < batch.length) {
    const b = batch[i + n]!;
    if (!isPlain(b) || b.queue !== a.queue || b.name !== a.name || b.version !== a.version) break;
    if (b.priority !== a.priority || b.maxMs !== a.maxMs || b.maxAttempts !== a.maxAttempts) break;
    if (b.delayMs !== a.delayMs || b.job !== a.job || (b.scope ?? null) !== (a.scope ?? null)) break;
    n++;
  }
  return n;
}

/**
 * Writes `n` alike plain entries from `i` on with one statement (spec §2.2, §2.8): the columns they
 * share are bound once, their inputs as a JSON array of the input texts, inserted in the array's
 * order. Their ids are consecutive: AUTOINCREMENT gives each row the largest id ever used plus one,
 * and the transaction holds the write lock (spec §1.4).
 * The order is json_each's rowid, which walks a top-level array in order (its rowid is the element's
 * index) and which json_each itself delivers sorted, so SQLite skips the sort: `ORDER BY j.key` made
 * it copy every row into a temporary B-tree first (EXPLAIN QUERY PLAN: USE TEMP B-TREE FOR ORDER BY),
 * ~0.5 of ~2.9 µs per row of the write (better-sqlite3 on Ratchet's schema, 20 × 1,000 rows per fresh
 * file, main-thread CPU, medians of 13 alternating: 2.94 → 2.52, issue 43 W1).
 */
function insertRun(
  c: SqliteCore,
  batch: readonly NewTask[],
  i: number,
  n: number,
  now: number,
  out: Enqueued[],
) {
  const t = batch[i]!;
  const inputs = new Array<string>(n);
  for (let k = 0; k < n; k++) inputs[k] = batch[i + k]!.input;
  const runAfter = now + Math.max(0, t.delayMs);
  const status = runAfter > now ? "waiting" : "pending";
  const info = c
    .s(`INSERT INTO ratchet_tasks
        (queue, name, version, input, status, priority, order_key, max_ms, max_attempts, run_after, wake_at,
         needs_pending, job, created_at, updated_at, scope)
        SELECT :queue, :name, :version, j.value, :status, :priority, :order_key, :max_ms, :max_attempts, :run_after,
         :wake_at, 0, :job, :now, :now, :scope FROM json_each(:inputs) AS j ORDER BY j.rowid`)
    .run({
      queue: t.queue,
      name: t.name,
      version: t.version,
      status,
      priority: t.priority,
      order_key: orderKey(now, t.priority),
      max_ms: t.maxMs,
      max_attempts: t.maxAttempts,
      run_after: runAfter,
      wake_at: status === "waiting" ? runAfter : null,
      job: t.job,
      now,
      scope: t.scope ?? null,
      inputs: JSON.stringify(inputs),
    });
  const last = Number(info.lastInsertRowid);
  if (info.changes !== n)
    throw new InvalidStateError(`a multi-row insert wrote ${info.changes} of ${n} rows`);
  for (let k = 0; k < n; k++) out.push({ id: last - n + 1 + k, deduped: false, status });
}

/**
 * spec §8.8: claims the task just enqueued for a worker of this process, in the enqueue's own
 * transaction, when that worker would claim it next anyway: a plain task (no needs, delay, gates,
 * flow key) of a queue and name it serves, with nothing ahead of it in claim order (§3.5): no
 * pending task of its queue before it, no expired lease (reclaimed first), no due timer (promoted
 * first). One transaction instead of two (the enqueue, then the woken worker's claim): a task
 * enqueued beside an idle worker started ~0.56 ms after the enqueue began, of which ~0.23 ms was that
 * claim (W3 in the enqueuer's process, 200/s).
 */
function handoff(c: SqliteCore, t: NewTask, e: Enqueued, h: HandoffRequest, now: number): void {
  if (e.deduped || e.status !== "pending" || t.gates || t.flow) return;
  if (!h.queues.includes(t.queue) || !h.names.includes(t.name)) return;
  const ahead = c
    .s(
      `SELECT 1 FROM ratchet_tasks WHERE queue = :queue AND status = 'pending' AND (order_key, id) < (:ok, :id) LIMIT 1`,
    )
    .get({ queue: t.queue, ok: orderKey(now, t.priority), id: e.id });
  if (ahead) return;
  if (c.s(ANY_DUE).get({ now })) return;
  if (c.s(ANY_EXPIRED).get({ now })) return;
  const rows = c
    .sRaw(claimIn(1))
    .all({ now, grace: h.leaseGraceMs, worker: h.workerId }, e.id) as unknown[][];
  if (rows.length !== 1) return;
  e.status = "running";
  // Inserted in this transaction: it never started (ClaimedTask.fresh).
  e.claimed = claimedFromRaw(rows[0]!, false, true);
}

/** Resolve predecessors (spec §2.5) to distinct task ids, in order. */
function resolveNeeds(needs: readonly NeedRef[], out: readonly Enqueued[], findDedupe: Database.Statement) {
  const needIds: number[] = [];
  for (const ref of needs) {
    let id: number | undefined;
    if ("id" in ref) id = ref.id;
    else if ("index" in ref) id = out[ref.index]?.id;
    else {
      const hit = findDedupe.get(ref.queue, ref.dedupe) as { id: number } | undefined;
      if (!hit) {
        throw new ValidationError(
          `needs "${ref.dedupe}" is neither a key of this batch nor the dedupe key of a live or completed task in queue "${ref.queue}"`,
        );
      }
      id = hit.id;
    }
    if (id === undefined) {
      throw new InvalidStateError(
        "needs refers to a later entry of the batch; order the batch so predecessors come first",
      );
    }
    if (!needIds.includes(id)) needIds.push(id);
  }
  return needIds;
}

/** Counts the live predecessors and finds the first failed one (the upstream root to report). */
function needsState(needIds: readonly number[], getDep: Database.Statement) {
  let pending = 0;
  let upstream: number | null = null;
  for (const id of needIds) {
    const dep = getDep.get(id) as
      | { id: number; status: string; outcome: Outcome | null; error: string | null }
      | undefined;
    if (!dep) throw new NotFoundError(`task ${id} (named in needs)`);
    if (dep.status !== "terminal") pending++;
    else if (dep.outcome !== "completed" && upstream === null) {
      // An upstream_failed need carries its root forward, so the error always names the task that failed (spec §2.5).
      upstream =
        dep.outcome === "upstream_failed" ? (fromJson<StoredError | null>(dep.error)?.upstream ?? id) : id;
    }
  }
  return { pending, upstream };
}
