/**
 * The task-tree rules (spec §12), written once as programs (see program.ts)
 * that both stores run inside one transaction each.
 *
 * Durable marks are the intent: every derived change (cascade marks, failFast
 * marks, drains, finalization, wake-ups) is recomputed by `reconcile` from the
 * rows alone, so a crash between any two commits loses nothing — the next
 * reconcile (after any settlement, at open, and periodically) repeats it.
 * Every statement is idempotent and re-checks its own condition, so several
 * workers reconciling at once cannot double-apply a change.
 */
import type { StoredError } from "../../core/json.js";
import type { Outcome } from "../../core/model.js";
import {
  InvalidStateError,
  NotFoundError,
  QueueFullError,
  ValidationError,
  WaitError,
} from "../../errors.js";
import { applyGates, gateExplain } from "../gates.js";
import { type TaskRow, toRecord } from "../rows.js";
import {
  type AbortResult,
  type BlockedInfo,
  type DefinitionInfo,
  type EventKind,
  type EventWaitResult,
  type ExplainRows,
  type Fence,
  holds,
  type InspectRows,
  type NewChild,
  type NewTask,
  type Settlement,
  type SettleResult,
  type TaskId,
  type TaskRecord,
  type WaitPolicy,
  type WaitResult,
} from "../store.js";
import { TURN_MARK } from "./keys.js";
import { one, type Program, q } from "./program.js";

const T = "{s}.ratchet_tasks";
const W = "{s}.ratchet_waits";
const SIG = "{s}.ratchet_signals";
const DEF = "{s}.ratchet_definitions";

/** Bounds (spec §12.11). */
export const MAX_WAIT_MEMBERS = 1000;
export const MAX_CHILDREN = 10_000;
/** Children one spawnMany writes at most (as many as one wait may name). */
export const MAX_SPAWN_BATCH = MAX_WAIT_MEMBERS;
const MAX_ROUNDS = 10_000;
const MAX_CYCLE_VISITS = 100_000;

/** A live child that ordinary traversal reaches: not background, not terminal (spec §12.2). */
const KID = "background = 0 AND status <> 'terminal'";

/** The event an outcome writes (completed writes none: the hot path logs only exceptions). */
function eventFor(outcome: Exclude<Outcome, "completed" | "upstream_failed">): EventKind {
  return outcome;
}

/** Does `id` own live ordinary work? Locks what it finds (PostgreSQL), so a child settling concurrently is ordered with this check. */
export function* hasLiveKids(id: TaskId): Program<boolean> {
  const r = yield* one(`SELECT id FROM ${T} WHERE owner_id = :id AND ${KID} LIMIT 1 @share`, { id });
  return r !== undefined;
}

/**
 * Writes an outcome (spec §12.4): `completing` with the outcome held while
 * ordinary owned work is live, `terminal` otherwise. Returns what it wrote.
 */
export function* finish(
  id: TaskId,
  outcome: Outcome,
  result: string | null,
  error: StoredError | null,
  attempt: number | null,
): Program<"held" | "terminal" | "gone"> {
  const err = error ? JSON.stringify(error) : null;
  if (outcome !== "orphaned" && outcome !== "upstream_failed" && (yield* hasLiveKids(id))) {
    const held = yield* q(
      `UPDATE ${T} SET status = 'completing', held_outcome = :outcome, result = :result, error = :error,
         lease_until = NULL, locked_by = NULL, wake_at = NULL, wait_on = NULL, wait_policy = NULL, updated_at = :now
       WHERE id = :id AND status <> 'terminal' AND status <> 'completing' RETURNING id`,
      { id, outcome, result, error: err },
    );
    if (held.length === 0) return "gone";
    yield { op: "event", id, kind: "held", attempt, detail: { outcome } };
    return "held";
  }
  const row = yield* one<{ queue: string; dependents: number }>(
    `UPDATE ${T} SET status = 'terminal', outcome = :outcome, held_outcome = NULL, result = :result, error = :error,
       lease_until = NULL, locked_by = NULL, wake_at = NULL, wait_on = NULL, wait_policy = NULL,
       ended_at = :now, updated_at = :now
     WHERE id = :id AND status <> 'terminal' RETURNING queue, dependents`,
    { id, outcome, result, error: err },
  );
  if (!row) return "gone";
  yield { op: "bump", queue: row.queue, n: -1 };
  if (outcome !== "completed" && outcome !== "upstream_failed")
    yield { op: "event", id, kind: eventFor(outcome), attempt, detail: { error } };
  if (row.dependents > 0) yield { op: "ended", id, completed: outcome === "completed" };
  yield* q(`DELETE FROM ${W} WHERE waiter_id = :id`, { id });
  return "terminal";
}

/** Logs an abort_requested event per newly marked row; returns their ids. */
function* logMarks(rows: readonly { id: number; attempts: number }[], detail: unknown): Program<TaskId[]> {
  for (const r of rows) yield { op: "event", id: r.id, kind: "abort_requested", attempt: r.attempts, detail };
  return rows.map((r) => r.id);
}

interface MarkedRow {
  id: number;
  status: string;
  wait_on: string | null;
  started_at: number | null;
  attempts: number;
  blocked: string | null;
  known: number;
  has_abort: number | null;
}

/**
 * Derives everything the durable state implies (spec §12.4–§12.6), in rounds
 * until nothing changes. `seeds`: tasks that just changed (their waiters are
 * checked); null: check every waiter (at open and periodically).
 * Returns the ids that received an abort mark, so running invocations in this
 * process can be signalled at once.
 */
export function* reconcile(seeds: TaskId[] | null): Program<TaskId[]> {
  const marked: TaskId[] = [];
  const touched = new Set<TaskId>(seeds ?? []);
  for (let round = 0; round < MAX_ROUNDS; round++) {
    let changed = false;
    const fresh: TaskId[] = [];
    // R1 cascade, one level per round: live ordinary children of live owners with intent (a mark,
    // or a held outcome other than completed). A terminal owner never cascades (spec §12.5).
    // First asked of the two partial indexes (ratchet_tasks_marked, ratchet_tasks_completing), which
    // are empty on most passes: PostgreSQL planned the UPDATE, on a table without statistics yet
    // (20,000 tasks just enqueued), as a join over a scan of the whole table, 11 ms at every open and
    // maintenance pass until the table was analyzed (0.07 ms after).
    // The same question of the waits for R2 below: without a wait member no failFast can mark one
    // (its UPDATE joined the tasks to the empty waits in 4.5 ms at a worker's open, on PostgreSQL).
    const intent = yield* q<{ any: number; waits: number }>(
      `SELECT CASE WHEN EXISTS (SELECT 1 FROM ${T} WHERE abort_requested = 1 AND status <> 'terminal')
         OR EXISTS (SELECT 1 FROM ${T} WHERE status = 'completing') THEN 1 ELSE 0 END AS any,
         CASE WHEN EXISTS (SELECT 1 FROM ${W}) THEN 1 ELSE 0 END AS waits`,
    );
    const cascaded =
      intent[0]?.any === 1
        ? yield* q<{ id: number; attempts: number }>(
            `UPDATE ${T} SET abort_requested = 1, updated_at = :now
       WHERE abort_requested = 0 AND status <> 'terminal' AND background = 0 AND owner_id IN (
         SELECT id FROM ${T} WHERE abort_requested = 1 AND status <> 'terminal'
         UNION SELECT id FROM ${T} WHERE status = 'completing' AND held_outcome <> 'completed')
       RETURNING id, attempts`,
          )
        : [];
    marked.push(...(yield* logMarks(cascaded, { cascade: true })));
    // R2 failFast (spec §12.3): the first member that holds or ends other than completed marks the other live members.
    const scope =
      seeds === null ? "" : `AND v.id IN (SELECT waiter_id FROM ${W} WHERE member_id IN @ids(seeds))`;
    const ff =
      intent[0]?.waits === 1
        ? yield* q<{ id: number; attempts: number }>(
            `UPDATE ${T} SET abort_requested = 1, updated_at = :now
       WHERE abort_requested = 0 AND status <> 'terminal' AND id IN (
         SELECT w.member_id FROM ${W} w JOIN ${T} v ON v.id = w.waiter_id
         WHERE v.status = 'waiting' AND v.wait_on = 'tasks' AND v.wait_policy = 'failFast' ${scope}
           AND EXISTS (SELECT 1 FROM ${W} w2 JOIN ${T} m ON m.id = w2.member_id WHERE w2.waiter_id = v.id
             AND ((m.status = 'terminal' AND m.outcome <> 'completed') OR (m.status = 'completing' AND m.held_outcome <> 'completed'))))
       RETURNING id, attempts`,
            seeds === null ? {} : { seeds: [...touched] },
          )
        : [];
    marked.push(...(yield* logMarks(ff, { failFast: true })));
    changed ||= cascaded.length > 0 || ff.length > 0;
    // R3 marked tasks that hold no worker: leave their wait, drain owned work, then run the abort
    // handler (pending, claimed in abort mode), end aborted, or end orphaned when no code can take them.
    // `status <> 'terminal'` repeats the partial index's own condition (ratchet_tasks_marked): SQLite
    // uses a partial index only when the query states its terms; without it this read scanned the
    // table on every maintenance pass (13 ms per pass with 200k waiting tasks, 0.14 ms with it).
    const rows = yield* q<MarkedRow>(
      `SELECT t.id, t.status, t.wait_on, t.started_at, t.attempts, t.blocked,
         CASE WHEN d.name IS NULL THEN 0 ELSE 1 END AS known, d.has_abort
       FROM ${T} t LEFT JOIN ${DEF} d ON d.name = t.name
       WHERE t.abort_requested = 1 AND t.status <> 'terminal' AND t.status IN ('pending', 'waiting') ORDER BY t.id`,
    );
    for (const r of rows) {
      if (r.status === "waiting" && r.wait_on === "abort") continue; // the abort handler's own backoff
      if (yield* hasLiveKids(r.id)) {
        if (r.status === "waiting" && r.wait_on === "drain") continue;
        yield* q(
          `UPDATE ${T} SET status = 'waiting', wait_on = 'drain', wait_policy = NULL, wake_at = NULL, updated_at = :now
           WHERE id = :id AND abort_requested = 1 AND status IN ('pending', 'waiting')`,
          { id: r.id },
        );
        yield* q(`DELETE FROM ${W} WHERE waiter_id = :id`, { id: r.id });
        changed = true;
        continue;
      }
      const aborted: StoredError = { name: "Aborted", message: "aborted" };
      let end: Outcome | null = null;
      let error: StoredError = aborted;
      if (r.wait_on === "blocked" || r.known === 0) {
        const reason = r.known === 0 ? "missing_definition" : (JSON.parse(r.blocked!) as BlockedInfo).reason;
        end = "orphaned";
        error = {
          name: "Orphaned",
          message: `aborted while no code could take it (${reason})`,
          code: reason,
        };
      } else if (r.started_at === null || r.has_abort !== 1) {
        end = "aborted";
      }
      if (end) {
        const w = yield* finish(r.id, end, null, error, r.attempts);
        if (w === "terminal") fresh.push(r.id);
        changed ||= w !== "gone";
      } else if (r.status === "waiting") {
        yield* q(
          `UPDATE ${T} SET status = 'pending', wait_on = NULL, wait_policy = NULL, wake_at = NULL, updated_at = :now
           WHERE id = :id AND status = 'waiting' AND abort_requested = 1`,
          { id: r.id },
        );
        yield* q(`DELETE FROM ${W} WHERE waiter_id = :id`, { id: r.id });
        yield { op: "notify" };
        changed = true;
      }
    }
    // R4 finalize (spec §12.4): a held outcome becomes terminal once no ordinary owned work is live.
    const done = yield* q<{ id: number; held_outcome: Outcome; attempts: number }>(
      `SELECT id, held_outcome, attempts FROM ${T} t WHERE status = 'completing'
         AND NOT EXISTS (SELECT 1 FROM ${T} k WHERE k.owner_id = t.id AND k.background = 0 AND k.status <> 'terminal')
       ORDER BY id`,
    );
    for (const r of done) {
      const row = yield* one<{ queue: string; dependents: number }>(
        `UPDATE ${T} SET status = 'terminal', outcome = held_outcome, held_outcome = NULL, ended_at = :now, updated_at = :now
         WHERE id = :id AND status = 'completing' RETURNING queue, dependents`,
        { id: r.id },
      );
      if (!row) continue;
      yield { op: "bump", queue: row.queue, n: -1 };
      if (row.dependents > 0) yield { op: "ended", id: r.id, completed: r.held_outcome === "completed" };
      fresh.push(r.id);
      changed = true;
    }
    // R5 wake waiters whose members are all terminal (spec §12.3).
    for (const id of fresh) touched.add(id);
    const only =
      seeds === null ? "" : `AND id IN (SELECT waiter_id FROM ${W} WHERE member_id IN @ids(seeds))`;
    const woken = yield* q<{ id: number }>(
      `UPDATE ${T} SET status = 'pending', wait_on = NULL, wait_policy = NULL, updated_at = :now
       WHERE status = 'waiting' AND wait_on = 'tasks' AND abort_requested = 0 ${only}
         AND NOT EXISTS (SELECT 1 FROM ${W} w JOIN ${T} m ON m.id = w.member_id
                         WHERE w.waiter_id = ${T}.id AND m.status <> 'terminal')
       RETURNING id`,
      seeds === null ? {} : { seeds: [...touched] },
    );
    if (woken.length > 0) {
      yield* q(`DELETE FROM ${W} WHERE waiter_id IN @ids(woken)`, { woken: woken.map((r) => r.id) });
      yield { op: "notify" };
      changed = true;
    }
    if (!changed) break;
  }
  return marked;
}

// ------------------------------------------------------------ holder side

interface FencedRow {
  id: number;
  status: string;
  epoch: number;
  claimed_at: number;
  abort_requested: number;
  attempts: number;
  queue: string;
  owner_id: number | null;
  scope: string | null;
  detached: number;
}

/** Reads and locks the fenced row; the reason it does not hold, or the row. */
function* fenced(fence: Fence): Program<FencedRow | SettleResult> {
  const r = yield* one<FencedRow>(
    `SELECT id, status, epoch, claimed_at, abort_requested, attempts, queue, owner_id, scope, detached FROM ${T} WHERE id = :id @update`,
    { id: fence.taskId },
  );
  if (!holds(r, fence)) return "lease_lost";
  const abortMode = fence.mode === "abort";
  if (!abortMode && r.abort_requested === 1) return "abort_marked";
  if (abortMode && r.abort_requested !== 1) return "lease_lost";
  return r;
}

function refusal(r: SettleResult, fence: Fence): never {
  throw new FenceRefused(r, fence);
}

/** Thrown inside a program when a fence does not hold; stores turn it into LeaseLostError / AbortedError. */
export class FenceRefused extends Error {
  constructor(
    readonly result: SettleResult,
    readonly fence: Fence,
  ) {
    super(result);
  }
}

/**
 * Settlement of a task that owns children, runs its abort handler, or was
 * interrupted by an abort mark (spec §12.4–§12.5). Plain tasks take the
 * stores' faster paths.
 */
export function* settleTree(s: Settlement): Program<SettleResult> {
  const row = yield* one<FencedRow>(
    `SELECT id, status, epoch, claimed_at, abort_requested, attempts, queue, owner_id, scope, detached FROM ${T} WHERE id = :id @update`,
    { id: s.fence.taskId },
  );
  if (!holds(row, s.fence)) return "lease_lost";
  const marked = row.abort_requested === 1;
  if (s.fence.mode === "abort" && !marked) return "lease_lost";
  // spec §4.5: a run-mode holder may not commit after the mark, except to report the interruption or release.
  if (s.fence.mode !== "abort" && marked && s.kind !== "aborted" && s.kind !== "release")
    return "abort_marked";
  return yield* settleFenced(s, row);
}

function* settleFenced(s: Settlement, row: FencedRow): Program<SettleResult> {
  const id = row.id;
  const abortMode = s.fence.mode === "abort";
  const end = "lease_until = NULL, locked_by = NULL, updated_at = :now";
  switch (s.kind) {
    case "complete":
      yield* finish(
        id,
        abortMode ? "aborted" : "completed",
        s.result,
        abortMode ? { name: "Aborted", message: "aborted; the abort handler finished" } : null,
        row.attempts,
      );
      break;
    case "fail":
      yield* finish(id, s.outcome, null, s.error, row.attempts);
      break;
    case "aborted":
      if (s.handler && row.abort_requested === 1 && !abortMode) {
        // spec §12.5: the abort handler runs later, in a fresh invocation, once owned work drained.
        const kids = yield* hasLiveKids(id);
        yield* q(`UPDATE ${T} SET status = :status, wait_on = :on, wake_at = NULL, ${end} WHERE id = :id`, {
          id,
          status: kids ? "waiting" : "pending",
          on: kids ? "drain" : null,
        });
        if (!kids) yield { op: "notify" };
      } else {
        yield* finish(id, "aborted", null, s.error, row.attempts);
      }
      break;
    case "retry":
      yield* q(
        `UPDATE ${T} SET status = 'waiting', wake_at = :now + CAST(:delay AS bigint), error = :error, wait_on = :on,
           attempts = attempts - CAST(:refund AS integer), ${end} WHERE id = :id`,
        {
          id,
          delay: Math.round(s.delayMs),
          error: JSON.stringify(s.error),
          on: abortMode ? "abort" : null,
          refund: s.refund ? 1 : 0,
        },
      );
      yield {
        op: "event",
        id,
        kind: s.refund ? "rate_limited" : "attempt_failed",
        attempt: row.attempts,
        detail: { error: s.error },
      };
      return "ok";
    case "sleep": {
      const w = yield* one<{ wake_at: number; attempts: number }>(
        `UPDATE ${T} SET status = 'waiting', wake_at = :now + CAST(:delay AS bigint), attempts = attempts - 1, wait_on = :on, ${end}
         WHERE id = :id RETURNING wake_at, attempts`,
        // An abort handler's own timers ('abort') are kept; any other wait of a marked task is cut short (R3).
        { id, delay: Math.round(s.delayMs), on: abortMode ? "abort" : null },
      );
      yield* q(
        `INSERT INTO {s}.ratchet_steps (task_id, name, result, attempt, created_at) VALUES (:id, :name, :result, :attempt, :now)
         ON CONFLICT (task_id, name) DO NOTHING`,
        { id, name: s.step, result: JSON.stringify({ until: w!.wake_at }), attempt: w!.attempts },
      );
      return "ok";
    }
    case "release":
      yield* q(`UPDATE ${T} SET status = 'pending', attempts = attempts - 1, ${end} WHERE id = :id`, { id });
      yield { op: "event", id, kind: "released", attempt: row.attempts, detail: null };
      yield { op: "notify" };
      return "ok";
  }
  yield* reconcile([id]);
  return "ok";
}

/**
 * A marked task whose holder died, found at reclaim (spec §12.5): while it
 * still owns live ordinary work it may not be claimed into its abort handler,
 * so it parks to drain instead. Returns whether it parked.
 */
export function* parkForDrain(id: TaskId, previousHolder: string | null): Program<boolean> {
  if (!(yield* hasLiveKids(id))) return false;
  const r = yield* one<{ attempts: number }>(
    `UPDATE ${T} SET status = 'waiting', wait_on = 'drain', wait_policy = NULL, wake_at = NULL,
       lease_until = NULL, locked_by = NULL, updated_at = :now
     WHERE id = :id AND status = 'running' AND abort_requested = 1 AND lease_until <= :now RETURNING attempts`,
    { id },
  );
  if (!r) return false;
  yield {
    op: "event",
    id,
    kind: "lease_lost",
    attempt: r.attempts,
    detail: { previousHolder, parked: "drain" },
  };
  return true;
}

/** spec §12.1: idempotent by (owner, spawn name); the owner must hold its claim and carry no mark. */
export function* spawn(
  fence: Fence,
  child: NewChild,
  maxDepth: number,
): Program<{ id: TaskId; created: boolean }> {
  if (fence.mode === "abort")
    throw new InvalidStateError(
      "an abort handler cannot spawn children (spec §12.1): its task is being aborted",
    );
  const owner = yield* fenced(fence);
  if (typeof owner === "string") refusal(owner, fence);
  const found = yield* one<{ id: number }>(`SELECT id FROM ${T} WHERE owner_id = :id AND spawn_name = :n`, {
    id: owner.id,
    n: child.spawnName,
  });
  if (found) return { id: found.id, created: false };
  const count = yield* one<{ n: number }>(`SELECT count(*) AS n FROM ${T} WHERE owner_id = :id`, {
    id: owner.id,
  });
  if (Number(count?.n ?? 0) >= MAX_CHILDREN)
    throw new ValidationError(
      `task ${owner.id} already has ${MAX_CHILDREN} children, the most one task may own`,
    );
  const id = yield* insertOwned(
    child.task,
    {
      owner: owner.id,
      scope: owner.scope ?? String(owner.id),
      background: child.background,
      detached: owner.detached === 1 || child.background,
      spawnName: child.spawnName,
    },
    maxDepth,
  );
  return { id, created: true };
}

/**
 * spec §12.1: several spawns of one holder in one transaction, in order, set-wise: one fence check,
 * one lookup of the names already spawned, one admission per queue (spec §2.7) and one insert per
 * new child. A round of 8 tool calls was 8 transactions of ~11 statements each on PostgreSQL (a
 * round trip and, per commit, a WAL flush each); a rerun that finds them all is one lookup.
 * A refusal or a full queue rolls back all.
 */
export function* spawnMany(
  fence: Fence,
  children: readonly NewChild[],
  maxDepth: (queue: string) => number,
): Program<{ id: TaskId; created: boolean }[]> {
  if (children.length > MAX_SPAWN_BATCH)
    throw new ValidationError(`at most ${MAX_SPAWN_BATCH} children per spawnMany (got ${children.length})`);
  if (fence.mode === "abort")
    throw new InvalidStateError(
      "an abort handler cannot spawn children (spec §12.1): its task is being aborted",
    );
  const owner = yield* fenced(fence);
  if (typeof owner === "string") refusal(owner, fence);
  if (children.length === 0) return [];
  const names = [...new Set(children.map((c) => c.spawnName))];
  const found = yield* q<{ id: number; spawn_name: string }>(
    `SELECT id, spawn_name FROM ${T} WHERE owner_id = :id AND spawn_name IN @texts(names)`,
    { id: owner.id, names },
  );
  const ids = new Map(found.map((r) => [r.spawn_name, Number(r.id)]));
  const fresh: NewChild[] = [];
  for (const c of children)
    if (!ids.has(c.spawnName)) {
      ids.set(c.spawnName, -1);
      fresh.push(c);
    }
  const made = new Set<string>();
  if (fresh.length > 0) {
    const count = yield* one<{ n: number }>(`SELECT count(*) AS n FROM ${T} WHERE owner_id = :id`, {
      id: owner.id,
    });
    if (Number(count?.n ?? 0) + fresh.length > MAX_CHILDREN)
      throw new ValidationError(`task ${owner.id} may own at most ${MAX_CHILDREN} children`);
    yield* admit(
      fresh.map((c) => c.task.queue),
      maxDepth,
    );
    const at = { owner: owner.id, scope: owner.scope ?? String(owner.id), admitted: true };
    for (const c of fresh) {
      const detached = owner.detached === 1 || c.background;
      const id = yield* insertOwned(
        c.task,
        { ...at, background: c.background, detached, spawnName: c.spawnName },
        0,
      );
      ids.set(c.spawnName, id);
      made.add(c.spawnName);
    }
    yield* q(`UPDATE ${T} SET owns = 1 WHERE id = :id AND owns = 0`, { id: owner.id });
    if (fresh.some((c) => c.task.delayMs <= 0)) yield { op: "notify" };
  }
  // A name given twice in one call is one child: created for its first place only.
  return children.map((c) => {
    const first = made.delete(c.spawnName);
    return { id: ids.get(c.spawnName)!, created: first };
  });
}

/** spec §2.7: the new tasks per queue against each queue's maxDepth, then its live counter. */
function* admit(queues: readonly string[], maxDepth: (queue: string) => number): Program<void> {
  const added = new Map<string, number>();
  for (const qn of queues) added.set(qn, (added.get(qn) ?? 0) + 1);
  for (const [queue, n] of [...added].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const live = (yield { op: "live", queue }) as number;
    const max = maxDepth(queue);
    if (live + n > max) throw new QueueFullError(queue, live, max, n);
    yield { op: "bump", queue, n };
  }
}

/**
 * Writes a task that is not enqueued from outside — a spawned child (spec §12.1), a task a
 * conversation's commit creates (spec §17.4) — in the caller's transaction: counted by admission like
 * any task of its queue (spec §2.7), due now or waiting for its delay, its flow gates applied, its
 * owner (if any) marked as owning. Dedupe keys and needs are `enqueue`'s.
 */
export function* insertOwned(
  t: NewTask,
  at: {
    owner: TaskId | null;
    scope: string | null;
    background: boolean;
    detached: boolean;
    spawnName: string | null;
    /** Admission (spec §2.7), the owner's mark and the notify are the caller's (spawnMany). */
    admitted?: boolean;
  },
  maxDepth: number,
): Program<TaskId> {
  if (!at.admitted) {
    const live = (yield { op: "live", queue: t.queue }) as number;
    if (live + 1 > maxDepth) throw new QueueFullError(t.queue, live, maxDepth, 1);
  }
  const delay = Math.max(0, t.delayMs);
  const row = yield* one<{ id: number }>(
    `INSERT INTO ${T} (queue, name, version, input, status, priority, order_key, max_ms, max_attempts, run_after, wake_at,
        job, created_at, updated_at, owner_id, scope, background, detached, spawn_name)
     VALUES (:queue, :name, :version, :input, :status, :priority, :now - CAST(:prio AS bigint) * 360000, :max_ms, :max_attempts,
        :now + CAST(:delay AS bigint), NULL, :job, :now, :now, :owner, :scope, :bg, :detached, :spawn)
     RETURNING id`,
    {
      queue: t.queue,
      name: t.name,
      version: t.version,
      input: t.input,
      status: delay > 0 ? "waiting" : "pending",
      priority: t.priority,
      prio: t.priority,
      max_ms: t.maxMs,
      max_attempts: t.maxAttempts,
      delay,
      job: t.job,
      owner: at.owner,
      scope: at.scope,
      bg: at.background ? 1 : 0,
      detached: at.detached ? 1 : 0,
      spawn: at.spawnName,
    },
  );
  const id = Number(row!.id);
  if (delay > 0) yield* q(`UPDATE ${T} SET wake_at = run_after WHERE id = :id`, { id });
  if (t.gates) yield* applyGates(id, t.queue, t.priority, t.gates);
  if (at.admitted) return id;
  if (at.owner !== null) yield* q(`UPDATE ${T} SET owns = 1 WHERE id = :id AND owns = 0`, { id: at.owner });
  yield { op: "bump", queue: t.queue, n: 1 };
  if (delay === 0) yield { op: "notify" };
  return id;
}

/** spec §12.3: validation, then either the terminal members or a parked waiter. */
export function* waitTasks(
  fence: Fence,
  members: readonly TaskId[],
  policy: WaitPolicy,
): Program<WaitResult> {
  if (fence.mode === "abort") throw new WaitError("an abort handler cannot wait (spec §12.3)");
  const me = yield* fenced(fence);
  if (typeof me === "string") refusal(me, fence);
  const ids = [...new Set(members)];
  // spec §12.3: an empty wait is over at once; the fence and the abort-handler rule still apply.
  if (ids.length === 0) return { state: "ready", members: [] };
  if (ids.includes(me.id)) throw new WaitError(`task ${me.id} cannot wait for itself`);
  yield { op: "lock", key: "waits" };
  const rows = yield* q<TaskRow>(`SELECT * FROM ${T} WHERE id IN @ids(ids) ORDER BY id @share`, { ids });
  if (rows.length !== ids.length) {
    const have = new Set(rows.map((r) => r.id));
    throw new WaitError(`cannot wait for task ${ids.find((i) => !have.has(i))}: no such task`);
  }
  // Owner chain: an owner cannot finish before the task it owns (spec §12.3).
  let up = me.owner_id;
  for (let depth = 0; up !== null && depth < MAX_ROUNDS; depth++) {
    if (ids.includes(up)) throw new WaitError(`task ${me.id} cannot wait for task ${up}, which owns it`);
    const r: { owner_id: number | null } | undefined = yield* one<{ owner_id: number | null }>(
      `SELECT owner_id FROM ${T} WHERE id = :id`,
      { id: up },
    );
    up = r?.owner_id ?? null;
  }
  if (policy === "failFast") {
    const foreign = rows.find((r) => r.owner_id !== me.id);
    if (foreign)
      throw new WaitError(
        `failFast needs tasks that task ${me.id} owns; task ${foreign.id} is not its child (use allSettled)`,
      );
  }
  const live = rows.filter((r) => r.status !== "terminal");
  if (live.length === 0) return { state: "ready", members: rows.map(toRecord) };
  const path = yield* findWaitCycle(
    me.id,
    live.map((r) => r.id),
  );
  if (path) throw new WaitError(`waiting would close a wait-for cycle: ${path.join(" -> ")}`);
  const parked = yield* q(
    `UPDATE ${T} SET status = 'waiting', wait_on = 'tasks', wait_policy = :policy, wake_at = NULL, attempts = attempts - 1,
       lease_until = NULL, locked_by = NULL, updated_at = :now WHERE id = :id RETURNING id`,
    { id: me.id, policy },
  );
  if (parked.length !== 1) refusal("lease_lost", fence);
  for (const m of ids) {
    yield* q(`INSERT INTO ${W} (waiter_id, member_id) VALUES (:w, :m) ON CONFLICT DO NOTHING`, {
      w: me.id,
      m,
    });
  }
  yield* q(`UPDATE ${T} SET watched = 1 WHERE id IN @ids(ids) AND watched = 0`, { ids });
  yield* reconcile(ids);
  return { state: "waiting" };
}

/**
 * Would `waiter` waiting on `members` close a cycle? Edges run from a task to
 * the tasks it waits on and to its live ordinary children (spec §12.3).
 * Returns the path back to the waiter, or null.
 */
function* findWaitCycle(waiter: TaskId, members: TaskId[]): Program<TaskId[] | null> {
  const parent = new Map<TaskId, TaskId>();
  let frontier = members.filter((m) => m !== waiter);
  for (const m of frontier) parent.set(m, waiter);
  let visits = 0;
  while (frontier.length > 0 && visits < MAX_CYCLE_VISITS) {
    visits += frontier.length;
    const edges = yield* q<{ src: number; dst: number }>(
      `SELECT w.waiter_id AS src, w.member_id AS dst FROM ${W} w JOIN ${T} v ON v.id = w.waiter_id
         WHERE w.waiter_id IN @ids(f) AND v.status = 'waiting' AND v.wait_on = 'tasks'
       UNION ALL
       SELECT owner_id AS src, id AS dst FROM ${T} WHERE owner_id IN @ids(f) AND ${KID}`,
      { f: frontier },
    );
    const next: TaskId[] = [];
    for (const e of edges) {
      if (e.dst === waiter) {
        const path = [waiter];
        for (let x: TaskId | undefined = e.src; x !== undefined && x !== waiter; x = parent.get(x))
          path.push(x);
        path.push(waiter);
        return path.reverse();
      }
      if (!parent.has(e.dst)) {
        parent.set(e.dst, e.src);
        next.push(e.dst);
      }
    }
    frontier = next;
  }
  return null;
}

/** spec §12.7. `stepKey` holds the durable deadline, written once by the store's clock. */
export function* waitEvent(
  fence: Fence,
  name: string,
  stepKey: string,
  timeoutMs: number,
): Program<EventWaitResult> {
  if (fence.mode === "abort") throw new WaitError("an abort handler cannot wait (spec §12.3)");
  yield { op: "lock", key: `signal:${name}` };
  const me = yield* fenced(fence);
  if (typeof me === "string") refusal(me, fence);
  const sig = yield* one<{ payload: string }>(`SELECT payload FROM ${SIG} WHERE name = :name`, { name });
  if (sig) return { state: "signalled", payload: JSON.parse(sig.payload) as unknown };
  let until = yield* one<{ result: string }>(
    `SELECT result FROM {s}.ratchet_steps WHERE task_id = :id AND name = :key`,
    { id: me.id, key: stepKey },
  );
  if (!until) {
    const now = yield* one<{ t: number }>("SELECT :now + CAST(:ms AS bigint) AS t", {
      ms: Math.round(timeoutMs),
    });
    yield* q(
      `INSERT INTO {s}.ratchet_steps (task_id, name, result, attempt, created_at) VALUES (:id, :key, :result, :attempt, :now)`,
      { id: me.id, key: stepKey, result: JSON.stringify(Number(now!.t)), attempt: me.attempts },
    );
    until = { result: JSON.stringify(Number(now!.t)) };
  }
  const deadline = JSON.parse(until.result) as number;
  const due = yield* one<{ due: number }>(
    "SELECT CASE WHEN :now >= CAST(:d AS bigint) THEN 1 ELSE 0 END AS due",
    {
      d: deadline,
    },
  );
  if (Number(due!.due) === 1) return { state: "timeout" };
  yield* q(
    `UPDATE ${T} SET status = 'waiting', wait_on = 'event', event_name = :name, wake_at = CAST(:d AS bigint),
       attempts = attempts - 1, lease_until = NULL, locked_by = NULL, updated_at = :now WHERE id = :id`,
    { id: me.id, name, d: deadline },
  );
  return { state: "waiting" };
}

/** spec §12.7: the first signal per name is kept; waiters wake in the same transaction. */
export function* signal(name: string, payload: string): Program<{ first: boolean; woken: number }> {
  yield { op: "lock", key: `signal:${name}` };
  const ins = yield* q(
    `INSERT INTO ${SIG} (name, payload, created_at) VALUES (:name, :payload, :now) ON CONFLICT (name) DO NOTHING RETURNING name`,
    { name, payload },
  );
  const woken = yield* q(
    `UPDATE ${T} SET status = 'pending', wait_on = NULL, event_name = NULL, wake_at = NULL, updated_at = :now
     WHERE status = 'waiting' AND wait_on = 'event' AND event_name = :name RETURNING id`,
    { name },
  );
  if (woken.length > 0) yield { op: "notify" };
  return { first: ins.length === 1, woken: woken.length };
}

/** spec §12.5: a durable mark, then whatever it implies. */
export function* abort(id: TaskId): Program<AbortResult> {
  const row = yield* one<{
    status: string;
    outcome: Outcome | null;
    abort_requested: number;
    attempts: number;
  }>(`SELECT status, outcome, abort_requested, attempts FROM ${T} WHERE id = :id @update`, { id });
  if (!row) throw new NotFoundError(`task ${id}`);
  if (row.status === "terminal") return { state: "terminal", outcome: row.outcome!, marked: [] };
  if (row.abort_requested === 0) {
    yield* q(`UPDATE ${T} SET abort_requested = 1, updated_at = :now WHERE id = :id`, { id });
    yield { op: "event", id, kind: "abort_requested", attempt: row.attempts, detail: null };
  }
  const marked = yield* reconcile([id]);
  const after = yield* one<{ status: string; outcome: Outcome | null }>(
    `SELECT status, outcome FROM ${T} WHERE id = :id`,
    {
      id,
    },
  );
  if (after!.status !== "terminal") return { state: "marked", marked: [id, ...marked] };
  if (after!.outcome === "aborted") return { state: "aborted", marked };
  if (after!.outcome === "orphaned") return { state: "orphaned", marked };
  return { state: "terminal", outcome: after!.outcome!, marked };
}

/** A scope id: a named scope, or a top-level task's own id (its default scope). */
function scopeMatch(scope: string): { sql: string; p: Record<string, unknown> } {
  const own = /^[1-9][0-9]{0,15}$/.test(scope) ? Number(scope) : -1;
  return { sql: "(scope = :scope OR (scope IS NULL AND id = :own))", p: { scope, own } };
}

/** spec §12.5: marks every live task of the scope; with background, also background subtrees. */
export function* abortScope(scope: string, background: boolean): Program<TaskId[]> {
  const m = scopeMatch(scope);
  const rows = yield* q<{ id: number; attempts: number }>(
    `UPDATE ${T} SET abort_requested = 1, updated_at = :now
     WHERE status <> 'terminal' AND abort_requested = 0 AND ${m.sql} ${background ? "" : "AND detached = 0"}
     RETURNING id, attempts`,
    m.p,
  );
  const ids = yield* logMarks(rows, { scope });
  const more = yield* reconcile(ids);
  return [...ids, ...more];
}

/**
 * spec §12.10, §12.12: live tasks of the scope (null: of every scope) that ordinary traversal
 * reaches. Store-wide this reads every task row (no index covers "not terminal"); the engine asks
 * only when the depth counters (§9.5) say some task is live.
 */
export function* scopeLive(scope: string | null): Program<number> {
  const m = scope === null ? { sql: "1 = 1", p: {} } : scopeMatch(scope);
  const r = yield* one<{ n: number }>(
    `SELECT count(*) AS n FROM ${T} WHERE status <> 'terminal' AND detached = 0 AND ${m.sql}`,
    m.p,
  );
  return Number(r?.n ?? 0);
}

export function* registerDefinitions(defs: readonly DefinitionInfo[]): Program<void> {
  for (const d of defs) {
    yield* q(
      `INSERT INTO ${DEF} (name, version, has_abort, updated_at) VALUES (:name, :version, :abort, :now)
       ON CONFLICT (name) DO UPDATE SET version = excluded.version, has_abort = excluded.has_abort, updated_at = excluded.updated_at`,
      { name: d.name, version: d.version, abort: d.hasAbort ? 1 : 0 },
    );
  }
}

/** spec §12.9: park the fenced task as blocked; in abort mode nothing can clean up, so it is orphaned. */
export function* block(fence: Fence, info: BlockedInfo): Program<void> {
  const me = yield* fenced(fence);
  if (typeof me === "string") refusal(me, fence);
  if (fence.mode === "abort") {
    yield* finish(
      me.id,
      "orphaned",
      null,
      {
        name: "Orphaned",
        message: `aborted while no code could take it (${info.reason})`,
        code: info.reason,
      },
      me.attempts,
    );
    yield* reconcile([me.id]);
    return;
  }
  yield* q(
    `UPDATE ${T} SET status = 'waiting', wait_on = 'blocked', blocked = :b, wake_at = NULL, attempts = attempts - 1,
       lease_until = NULL, locked_by = NULL, updated_at = :now WHERE id = :id`,
    { id: me.id, b: JSON.stringify(info) },
  );
  yield { op: "event", id: me.id, kind: "blocked", attempt: me.attempts, detail: info };
}

export function* unblock(names: readonly string[]): Program<number> {
  let n = 0;
  for (const name of names) {
    const rows = yield* q(
      `UPDATE ${T} SET status = 'pending', wait_on = NULL, blocked = NULL, updated_at = :now
       WHERE status = 'waiting' AND wait_on = 'blocked' AND name = :name RETURNING id`,
      { name },
    );
    n += rows.length;
  }
  if (n > 0) yield { op: "notify" };
  return n;
}

export function* migrated(
  fence: Fence,
  version: number,
  input: string,
  checkpoint: string | null,
): Program<void> {
  const me = yield* fenced(fence);
  if (typeof me === "string") refusal(me, fence);
  yield* q(
    `UPDATE ${T} SET version = :version, input = :input, checkpoint = :cp, blocked = NULL, updated_at = :now WHERE id = :id`,
    {
      id: me.id,
      version,
      input,
      cp: checkpoint,
    },
  );
  yield { op: "event", id: me.id, kind: "migrated", attempt: me.attempts, detail: { version } };
}

export function* setCheckpoint(fence: Fence, checkpoint: string, keep: string): Program<void> {
  const me = yield* fenced(fence);
  if (typeof me === "string") refusal(me, fence);
  yield* q(`UPDATE ${T} SET checkpoint = :cp, updated_at = :now WHERE id = :id`, {
    id: me.id,
    cp: checkpoint,
  });
  // Steps of earlier turns can never replay again: the checkpoint replaced them (spec §12.8).
  yield* q(
    `DELETE FROM {s}.ratchet_steps WHERE task_id = :id AND substr(name, 1, 1) = :mark
       AND substr(name, 1, CAST(:len AS integer)) <> :keep`,
    { id: me.id, mark: TURN_MARK, len: keep.length, keep },
  );
}

export function* subtree(id: TaskId, limit: number): Program<TaskRecord[]> {
  const rows = yield* q<TaskRow>(
    `WITH RECURSIVE sub(id, depth) AS (
       SELECT CAST(:id AS bigint), 0
       UNION ALL SELECT t.id, sub.depth + 1 FROM ${T} t JOIN sub ON t.owner_id = sub.id WHERE sub.depth < 256)
     SELECT * FROM ${T} WHERE id IN (SELECT id FROM sub) ORDER BY id LIMIT :limit`,
    { id, limit },
  );
  return rows.map(toRecord);
}

export function* inspectRows(limit: number): Program<InspectRows> {
  const rows = yield* q<TaskRow>(`SELECT * FROM ${T} WHERE status <> 'terminal' ORDER BY id LIMIT :limit`, {
    limit: limit + 1,
  });
  const truncated = rows.length > limit;
  const tasks = rows.slice(0, limit).map(toRecord);
  const ids = tasks.map((t) => t.id);
  const waits = ids.length
    ? yield* q<{ waiter_id: number; member_id: number }>(
        `SELECT waiter_id, member_id FROM ${W} WHERE waiter_id IN @ids(ids) ORDER BY waiter_id, member_id`,
        { ids },
      )
    : [];
  const defs = yield* q<{ name: string; version: number; has_abort: number }>(
    `SELECT name, version, has_abort FROM ${DEF} ORDER BY name`,
  );
  return {
    tasks,
    waits: waits.map((w) => ({ waiter: w.waiter_id, member: w.member_id })),
    definitions: defs.map((d) => ({ name: d.name, version: d.version, hasAbort: d.has_abort === 1 })),
    truncated,
  };
}

export function* waitMembers(id: TaskId): Program<TaskId[]> {
  const rows = yield* q<{ member_id: number }>(
    `SELECT member_id FROM ${W} WHERE waiter_id = :id ORDER BY member_id`,
    {
      id,
    },
  );
  return rows.map((r) => r.member_id);
}

export function* markedAmong(ids: readonly TaskId[]): Program<TaskId[]> {
  if (ids.length === 0) return [];
  const rows = yield* q<{ id: number }>(
    `SELECT id FROM ${T} WHERE id IN @ids(ids) AND abort_requested = 1 AND status = 'running'`,
    { ids: [...ids] },
  );
  return rows.map((r) => r.id);
}

/**
 * retry(id) of an owned task (spec §12.1, §12.5): refused while its owner is
 * being aborted or holds an outcome — new live work below it would either be
 * aborted at once or keep a decided owner from ending.
 */
export function* checkRetryOwner(id: TaskId, ownerId: TaskId | null): Program<void> {
  if (ownerId === null) return;
  const o = yield* one<{ status: string; abort_requested: number }>(
    `SELECT status, abort_requested FROM ${T} WHERE id = :id @share`,
    { id: ownerId },
  );
  if (!o) return;
  if (o.status === "completing" || (o.status !== "terminal" && o.abort_requested === 1))
    throw new InvalidStateError(
      `task ${id} is owned by task ${ownerId}, which is ${o.status === "completing" ? "completing" : "being aborted"}; it cannot get new live work`,
    );
}

/** Signals are pruned with the tasks (spec §10.3): a signal older than the cutoff is forgotten. */
export function* pruneSignals(olderThanMs: number): Program<number> {
  const rows = yield* q(`DELETE FROM ${SIG} WHERE created_at < :now - CAST(:age AS bigint) RETURNING name`, {
    age: olderThanMs,
  });
  return rows.length;
}

export function* children(id: TaskId): Program<TaskRecord[]> {
  const rows = yield* q<TaskRow>(`SELECT * FROM ${T} WHERE owner_id = :id ORDER BY id LIMIT :limit`, {
    id,
    limit: MAX_CHILDREN,
  });
  return rows.map(toRecord);
}

/**
 * The `ctx.sleep` a waiting task's timer belongs to (spec §14.5): a sleep commits its step
 * `{ until: wake_at }` at the attempt count it leaves, so the step of this attempt whose `until` is
 * the timer is it. A retry's timer (spec §5.2, §14.8) matches no step: the error the task keeps
 * from an earlier attempt does not make a sleep a backoff.
 */
function* sleepOf(row: TaskRow): Program<string | null> {
  if (row.status !== "waiting" || row.wake_at === null || (row.wait_on !== null && row.wait_on !== "abort"))
    return null;
  const steps = yield* q<{ name: string; result: string }>(
    `SELECT name, result FROM {s}.ratchet_steps WHERE task_id = :id AND attempt = :attempt ORDER BY id DESC LIMIT 20`,
    { id: row.id, attempt: row.attempts },
  );
  const wake = Number(row.wake_at);
  for (const s of steps) {
    const r = JSON.parse(s.result) as { until?: unknown } | null;
    if (r !== null && typeof r === "object" && Number(r.until) === wake) return s.name;
  }
  return null;
}

/** Raw material of explain() (spec §14.5): the task and what holds it, read in one transaction. */
export function* explainRows(id: TaskId): Program<ExplainRows | null> {
  const row = yield* one<TaskRow>(`SELECT * FROM ${T} WHERE id = :id`, { id });
  if (!row) return null;
  const task = toRecord(row);
  const ahead =
    row.status === "pending"
      ? Number(
          (yield* one<{ n: number }>(
            `SELECT count(*) AS n FROM ${T} WHERE queue = :queue AND status = 'pending'
               AND (order_key < :ok OR (order_key = :ok AND id < :id))`,
            { queue: row.queue, ok: row.order_key, id },
          ))!.n,
        )
      : 0;
  const members = (yield* q<{ id: number }>(
    `SELECT m.id FROM ${W} w JOIN ${T} m ON m.id = w.member_id WHERE w.waiter_id = :id AND m.status <> 'terminal' ORDER BY m.id LIMIT 100`,
    { id },
  )).map((r) => r.id);
  const kids = (yield* q<{ id: number }>(
    `SELECT id FROM ${T} WHERE owner_id = :id AND ${KID} ORDER BY id LIMIT 100`,
    { id },
  )).map((r) => r.id);
  const needs = (yield* q<{ id: number }>(
    `SELECT t.id FROM {s}.ratchet_deps d JOIN ${T} t ON t.id = d.needs_id WHERE d.task_id = :id AND t.status <> 'terminal' ORDER BY t.id LIMIT 100`,
    { id },
  )).map((r) => r.id);
  const def = yield* one<{ name: string; version: number; has_abort: number }>(
    `SELECT name, version, has_abort FROM ${DEF} WHERE name = :name`,
    { name: row.name },
  );
  const now = yield* one<{ t: number }>("SELECT :now AS t");
  return {
    task,
    sleep: yield* sleepOf(row),
    ahead,
    liveMembers: members,
    liveChildren: kids,
    liveNeeds: needs,
    definition: def ? { name: def.name, version: def.version, hasAbort: def.has_abort === 1 } : null,
    now: Number(now!.t),
    ...(yield* gateExplain(row.seat, row.rate, Number(now!.t))),
  };
}
