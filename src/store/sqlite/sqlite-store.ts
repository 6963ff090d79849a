/**
 * The embedded SQLite store (better-sqlite3, synchronous; each method is one
 * transaction). spec §10.2.
 *
 * Durability: WAL with synchronous=NORMAL (default) keeps every committed
 * transaction through a process crash; an OS crash or power loss may lose the
 * last transactions (never corrupt the file). synchronous=FULL survives power
 * loss at the cost of an fsync per commit.
 * Concurrency: several processes may share one file; every write transaction
 * is BEGIN IMMEDIATE, so writers queue on SQLite's lock (busy_timeout) instead
 * of failing on upgrade.
 */
import Database from "better-sqlite3";
import { decideReclaim } from "../../core/backoff.js";
import { planRetrySubtree, planUpstreamFailure } from "../../core/cascade.js";
import type { Clock } from "../../core/clock.js";
import { fromJson, type StoredError } from "../../core/json.js";
import { isRetryableOutcome, type Outcome } from "../../core/model.js";
import {
  AbortedError,
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
import { LATEST_VERSION, MIGRATIONS } from "./migrations.js";
import {
  bindList,
  CLAIM_ONE,
  FENCE,
  LIST_READY,
  PROMOTE_BATCH,
  PROMOTE_DUE,
  selectExpired,
  selectPending,
} from "./sql.js";

export interface SqliteStoreOptions {
  /** File path or ":memory:". */
  path: string;
  clock: Clock;
  synchronous?: "NORMAL" | "FULL";
  busyTimeoutMs?: number;
}

type Db = Database.Database;
type Stmt = Database.Statement;

export class SqliteStore implements Store {
  readonly db: Db;
  readonly #clock: Clock;
  readonly #stmts = new Map<string, Stmt>();
  #closed = false;

  constructor(opts: SqliteStoreOptions) {
    this.#clock = opts.clock;
    try {
      this.db = new Database(opts.path);
      this.db.pragma(`busy_timeout = ${Math.max(0, Math.floor(opts.busyTimeoutMs ?? 10_000))}`);
      this.db.pragma("journal_mode = WAL");
      this.db.pragma(`synchronous = ${opts.synchronous === "FULL" ? "FULL" : "NORMAL"}`);
    } catch (err) {
      throw new StoreError(`cannot open SQLite database at ${opts.path}: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  /** Prepared statements are cached by their text. */
  #s(sql: string): Stmt {
    let st = this.#stmts.get(sql);
    if (!st) {
      st = this.db.prepare(sql);
      this.#stmts.set(sql, st);
    }
    return st;
  }

  /** Runs fn in BEGIN IMMEDIATE; wraps driver errors (principle: no raw errors reach callers). */
  #tx<T>(fn: () => T): T {
    if (this.#closed) throw new StoreError("the store is closed");
    try {
      return this.db.transaction(fn).immediate();
    } catch (err) {
      if (err instanceof RatchetError) throw err;
      throw new StoreError(`SQLite: ${(err as Error).message}`, { cause: err });
    }
  }

  #read<T>(fn: () => T): T {
    if (this.#closed) throw new StoreError("the store is closed");
    try {
      return fn();
    } catch (err) {
      if (err instanceof RatchetError) throw err;
      throw new StoreError(`SQLite: ${(err as Error).message}`, { cause: err });
    }
  }

  #now(): number {
    return this.#clock.now();
  }

  async now(): Promise<number> {
    return this.#now();
  }

  /** spec §10.1: the version check and the migration run in one IMMEDIATE transaction, so concurrent opens serialise. */
  async migrate(): Promise<void> {
    this.#tx(() => {
      this.db.exec("CREATE TABLE IF NOT EXISTS ratchet_schema (version INTEGER NOT NULL)");
      const row = this.db.prepare("SELECT max(version) AS v FROM ratchet_schema").get() as {
        v: number | null;
      };
      const current = row.v ?? 0;
      if (current > LATEST_VERSION) throw new SchemaTooNewError(current, LATEST_VERSION);
      for (const m of MIGRATIONS) {
        if (m.version <= current) continue;
        this.db.exec(m.sql);
        this.db.prepare("INSERT INTO ratchet_schema (version) VALUES (?)").run(m.version);
      }
    });
  }

  async schemaVersion(): Promise<number> {
    return this.#read(
      () => (this.db.prepare("SELECT max(version) AS v FROM ratchet_schema").get() as { v: number }).v,
    );
  }

  // ---------------------------------------------------------------- enqueue

  /** spec §2.2–§2.8. The whole batch is one transaction; any throw rolls it back. */
  async enqueue(batch: readonly NewTask[], opts: EnqueueOptions): Promise<Enqueued[]> {
    return this.#tx(() => {
      const now = this.#now();
      const out: Enqueued[] = [];
      const added = new Map<string, number>();
      const findDedupe = this.#s(
        "SELECT id, status FROM ratchet_tasks WHERE queue = ? AND dedupe_key = ? AND (status <> 'terminal' OR outcome = 'completed')",
      );
      const getDep = this.#s("SELECT id, status, outcome, error FROM ratchet_tasks WHERE id = ?");
      const insert = this.#s(`INSERT INTO ratchet_tasks
        (queue, name, version, input, status, outcome, error, priority, order_key, max_ms, max_attempts, run_after, wake_at,
         needs_pending, dedupe_key, job, created_at, updated_at, ended_at)
        VALUES (:queue, :name, :version, :input, :status, :outcome, :error, :priority, :order_key, :max_ms, :max_attempts, :run_after,
         :wake_at, :needs_pending, :dedupe, :job, :now, :now, :ended_at)`);
      const addDep = this.#s("INSERT OR IGNORE INTO ratchet_deps (needs_id, task_id) VALUES (?, ?)");
      const bumpDependents = this.#s("UPDATE ratchet_tasks SET dependents = dependents + 1 WHERE id = ?");
      for (const t of batch) {
        if (t.dedupe !== null) {
          const hit = findDedupe.get(t.queue, t.dedupe) as
            | { id: number; status: TaskRecord["status"] }
            | undefined;
          if (hit) {
            out.push({ id: hit.id, deduped: true, status: hit.status });
            continue;
          }
        }
        // Resolve predecessors (spec §2.5).
        const needIds: number[] = [];
        for (const ref of t.needs) {
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
              dep.outcome === "upstream_failed"
                ? (fromJson<StoredError | null>(dep.error)?.upstream ?? id)
                : id;
          }
        }
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
          order_key: now - t.priority * 360_000,
          max_ms: t.maxMs,
          max_attempts: t.maxAttempts,
          run_after: runAfter,
          wake_at: status === "waiting" && pending === 0 ? runAfter : null,
          needs_pending: pending,
          dedupe: t.dedupe,
          job: t.job,
          now,
          ended_at: upstream !== null ? now : null,
        });
        const id = Number(info.lastInsertRowid);
        for (const n of needIds) {
          addDep.run(n, id);
          bumpDependents.run(n);
        }
        if (status !== "terminal") added.set(t.queue, (added.get(t.queue) ?? 0) + 1);
        out.push({ id, deduped: false, status });
      }
      for (const [queue, n] of added) {
        const depth = this.#queueLive(queue);
        const max = opts.maxDepth(queue);
        if (depth + n > max) throw new QueueFullError(queue, depth, max, n);
        this.#bumpLive(queue, n);
      }
      return out;
    });
  }

  #queueLive(queue: string): number {
    const row = this.#s("SELECT live FROM ratchet_queues WHERE name = ?").get(queue) as
      | { live: number }
      | undefined;
    return row?.live ?? 0;
  }

  #bumpLive(queue: string, n: number): void {
    if (n === 0) return;
    this.#s(
      "INSERT INTO ratchet_queues (name, live) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET live = live + excluded.live",
    ).run(queue, n);
  }

  // ------------------------------------------------------------------ claim

  /** spec §3.1–§3.4, §3.6. Promotion and claim share one IMMEDIATE transaction. */
  async claim(req: ClaimRequest): Promise<ClaimedTask[]> {
    if (req.limit <= 0 || req.names.length === 0 || req.queues.length === 0) return [];
    return this.#tx(() => {
      const now = this.#now();
      this.#s(PROMOTE_DUE).run({ now, limit: PROMOTE_BATCH });
      const lists: Record<string, unknown> = {};
      bindList("n", req.names, lists);
      const claimOne = this.#s(CLAIM_ONE);
      const base = { now, grace: req.leaseGraceMs, worker: req.workerId };
      const out: ClaimedTask[] = [];
      const queueList: Record<string, unknown> = { ...lists };
      bindList("q", req.queues, queueList);
      const expired = this.#s(selectExpired(req.queues.length, req.names.length)).all({
        ...queueList,
        now,
        limit: req.limit,
      }) as {
        id: number;
        locked_by: string | null;
        lease_until: number;
        attempts: number;
        max_attempts: number;
      }[];
      for (const e of expired) {
        if (decideReclaim(e.attempts, e.max_attempts) === "fail") {
          this.#failDeadHolder(e.id, e.attempts, e.locked_by, now);
          continue;
        }
        const r = claimOne.get({ ...base, id: e.id }) as TaskRow | undefined;
        if (!r) continue;
        out.push({ ...toRecord(r), reclaimed: true });
        this.#event(r.id, now, "reclaimed", r.attempts, {
          previousHolder: e.locked_by,
          leaseUntil: e.lease_until,
        });
      }
      // Queues are served round-robin from a rotating start, each through its own index range.
      const start = this.#rr++ % req.queues.length;
      const select = this.#s(selectPending(req.names.length));
      for (let i = 0; i < req.queues.length && out.length < req.limit; i++) {
        const queue = req.queues[(start + i) % req.queues.length]!;
        const ids = select.all({ ...lists, queue, limit: req.limit - out.length }) as { id: number }[];
        for (const { id } of ids) {
          const r = claimOne.get({ ...base, id }) as TaskRow | undefined;
          if (r) out.push({ ...toRecord(r), reclaimed: false });
        }
      }
      return out;
    });
  }
  #rr = 0;

  /** spec §5.4: every attempt was used by holders that died; fail without running the code again. */
  #failDeadHolder(id: TaskId, attempts: number, holder: string | null, now: number): void {
    const error: StoredError = {
      name: "AttemptsExhausted",
      message: `gave up after ${attempts} attempts: each holder stopped without settling (crash or kill); last holder ${holder ?? "unknown"}`,
    };
    const row =
      this.#s(`UPDATE ratchet_tasks SET status = 'terminal', outcome = 'failed', error = :error, ended_at = :now,
        lease_until = NULL, locked_by = NULL, updated_at = :now
      WHERE id = :id AND status = 'running' AND lease_until <= :now RETURNING queue, dependents`).get({
        id,
        now,
        error: JSON.stringify(error),
      }) as { queue: string; dependents: number } | undefined;
    if (!row) return;
    this.#event(id, now, "failed", attempts, { error });
    this.#bumpLive(row.queue, -1);
    if (row.dependents > 0) this.#cascade(id, now);
  }

  async listReady(queue: string, limit: number): Promise<TaskRecord[]> {
    return this.#read(() =>
      (this.#s(LIST_READY).all({ now: this.#now(), queue, limit }) as TaskRow[]).map(toRecord),
    );
  }

  // ---------------------------------------------------------- holder writes

  /** Throws the reason a fenced write matched no row. */
  #refused(fence: Fence): never {
    const row = this.#s("SELECT status, epoch, abort_requested FROM ratchet_tasks WHERE id = ?").get(
      fence.taskId,
    ) as { status: string; epoch: number; abort_requested: number } | undefined;
    if (row && row.status === "running" && row.epoch === fence.token && row.abort_requested === 1)
      throw new AbortedError(fence.taskId);
    throw new LeaseLostError(fence.taskId, fence.token);
  }

  async loadSteps(taskId: TaskId): Promise<Map<string, unknown>> {
    return this.#read(() => {
      const rows = this.#s("SELECT name, result FROM ratchet_steps WHERE task_id = ?").all(taskId) as {
        name: string;
        result: string;
      }[];
      return new Map(rows.map((r) => [r.name, fromJson(r.result)]));
    });
  }

  /** spec §4.2: one row per (task, name); the fence and the insert commit together. */
  async commitStep(fence: Fence, name: string, result: string): Promise<void> {
    const [r] = await this.commitSteps([{ fence, name, result }]);
    if (r === "abort_marked") throw new AbortedError(fence.taskId);
    if (r !== "ok") throw new LeaseLostError(fence.taskId, fence.token);
  }

  /** spec §4.2: per item, the fenced touch and the insert; one transaction for all. */
  async commitSteps(items: readonly StepWrite[]): Promise<SettleResult[]> {
    if (items.length === 0) return [];
    return this.#tx(() => {
      const now = this.#now();
      const touch = this.#s(
        `UPDATE ratchet_tasks SET updated_at = :now WHERE ${FENCE} AND abort_requested = 0 RETURNING attempts`,
      );
      // OR IGNORE: repeating a commit whose acknowledgement was lost changes nothing.
      const insert = this.#s(
        "INSERT OR IGNORE INTO ratchet_steps (task_id, name, result, attempt, created_at) VALUES (?, ?, ?, ?, ?)",
      );
      return items.map((w) => {
        const row = touch.get({ id: w.fence.taskId, token: w.fence.token, now }) as
          | { attempts: number }
          | undefined;
        if (!row) return this.#why(w.fence);
        insert.run(w.fence.taskId, w.name, w.result, row.attempts, now);
        return "ok";
      });
    });
  }

  async heartbeat(fence: Fence, maxMs: number, leaseGraceMs: number): Promise<void> {
    this.#tx(() => {
      const now = this.#now();
      const r = this.#s(
        `UPDATE ratchet_tasks SET lease_until = :now + :ms, updated_at = :now WHERE ${FENCE} AND abort_requested = 0`,
      ).run({ id: fence.taskId, token: fence.token, now, ms: maxMs + leaseGraceMs });
      if (r.changes !== 1) this.#refused(fence);
    });
  }

  async progress(fence: Fence, fraction: number, note: string | null): Promise<void> {
    this.#tx(() => {
      const now = this.#now();
      const r = this.#s(
        `UPDATE ratchet_tasks SET progress = :p, progress_note = :note, updated_at = :now WHERE ${FENCE} AND abort_requested = 0`,
      ).run({ id: fence.taskId, token: fence.token, now, p: fraction, note });
      if (r.changes !== 1) this.#refused(fence);
    });
  }

  /** Applies settlements, each fenced on its own, in one transaction (one commit for a whole batch of completions). */
  async settle(items: readonly Settlement[]): Promise<SettleResult[]> {
    if (items.length === 0) return [];
    return this.#tx(() => {
      const now = this.#now();
      const deltas = new Map<string, number>();
      const out = items.map((s) => this.#settleOne(s, now, deltas));
      // One counter write per queue per batch, not per task.
      for (const [queue, n] of deltas) this.#bumpLive(queue, n);
      return out;
    });
  }

  #settleOne(s: Settlement, now: number, deltas: Map<string, number>): SettleResult {
    const p = { id: s.fence.taskId, token: s.fence.token, now };
    const guard = s.kind === "aborted" || s.kind === "release" ? "" : "AND abort_requested = 0";
    const end = "lease_until = NULL, locked_by = NULL, updated_at = :now";
    let row: { queue: string; dependents: number; attempts: number } | undefined;
    switch (s.kind) {
      case "complete":
        row =
          this.#s(`UPDATE ratchet_tasks SET status = 'terminal', outcome = 'completed', result = :result, ended_at = :now, ${end}
          WHERE ${FENCE} ${guard} RETURNING queue, dependents, attempts`).get({
            ...p,
            result: s.result,
          }) as typeof row;
        break;
      case "retry":
        row =
          this.#s(`UPDATE ratchet_tasks SET status = 'waiting', wake_at = :now + :delay, error = :error, ${end}
          WHERE ${FENCE} ${guard} RETURNING queue, dependents, attempts`).get({
            ...p,
            delay: s.delayMs,
            error: JSON.stringify(s.error),
          }) as typeof row;
        if (row)
          this.#event(s.fence.taskId, now, "attempt_failed", row.attempts, {
            error: s.error,
            retryAt: now + s.delayMs,
          });
        return row ? "ok" : this.#why(s.fence);
      case "sleep":
        row =
          this.#s(`UPDATE ratchet_tasks SET status = 'waiting', wake_at = :now + :delay, attempts = attempts - 1, ${end}
          WHERE ${FENCE} ${guard} RETURNING queue, dependents, attempts`).get({
            ...p,
            delay: s.delayMs,
          }) as typeof row;
        if (row) {
          this.#s(
            "INSERT OR IGNORE INTO ratchet_steps (task_id, name, result, attempt, created_at) VALUES (?, ?, ?, ?, ?)",
          ).run(s.fence.taskId, s.step, JSON.stringify({ until: now + s.delayMs }), row.attempts, now);
        }
        return row ? "ok" : this.#why(s.fence);
      case "release":
        // The attempt is given back: a graceful release is not a failure (spec §8.2). The epoch is not, so the old holder stays fenced.
        row = this.#s(`UPDATE ratchet_tasks SET status = 'pending', attempts = attempts - 1, ${end}
          WHERE ${FENCE} RETURNING queue, dependents, attempts`).get(p) as typeof row;
        if (row) this.#event(s.fence.taskId, now, "released", row.attempts + 1, null);
        return row ? "ok" : this.#why(s.fence);
      case "fail":
      case "aborted": {
        const outcome = s.kind === "fail" ? s.outcome : "aborted";
        row =
          this.#s(`UPDATE ratchet_tasks SET status = 'terminal', outcome = :outcome, error = :error, ended_at = :now, ${end}
          WHERE ${FENCE} ${guard} RETURNING queue, dependents, attempts`).get({
            ...p,
            outcome,
            error: s.error ? JSON.stringify(s.error) : null,
          }) as typeof row;
        if (row)
          this.#event(s.fence.taskId, now, outcome === "aborted" ? "aborted" : outcome, row.attempts, {
            error: s.error,
          });
        break;
      }
    }
    if (!row) return this.#why(s.fence);
    // Terminal from here on.
    deltas.set(row.queue, (deltas.get(row.queue) ?? 0) - 1);
    if (row.dependents > 0) {
      if (s.kind === "complete") this.#releaseDependents(s.fence.taskId, now);
      else this.#cascade(s.fence.taskId, now);
    }
    return "ok";
  }

  #why(fence: Fence): SettleResult {
    try {
      this.#refused(fence);
    } catch (e) {
      return e instanceof AbortedError ? "abort_marked" : "lease_lost";
    }
  }

  /** spec §6.2: a completed predecessor lowers each dependent's count; at zero it becomes due (or waits for its runAfter). */
  #releaseDependents(id: TaskId, now: number): void {
    this.#s(`UPDATE ratchet_tasks SET needs_pending = needs_pending - 1, updated_at = :now
      WHERE id IN (SELECT task_id FROM ratchet_deps WHERE needs_id = :id) AND status = 'waiting' AND needs_pending > 0`).run(
      { id, now },
    );
    this.#s(`UPDATE ratchet_tasks SET status = CASE WHEN run_after <= :now THEN 'pending' ELSE 'waiting' END,
        wake_at = CASE WHEN run_after <= :now THEN NULL ELSE run_after END
      WHERE id IN (SELECT task_id FROM ratchet_deps WHERE needs_id = :id) AND status = 'waiting' AND needs_pending = 0 AND wake_at IS NULL`).run(
      { id, now },
    );
  }

  /** Reads the transitive dependents of `root` with their needs (for core cascade plans). */
  #dependentsOf(root: TaskId) {
    const rows = this.#s(`WITH RECURSIVE d(id) AS (
        SELECT task_id FROM ratchet_deps WHERE needs_id = :root
        UNION SELECT dep.task_id FROM ratchet_deps dep JOIN d ON dep.needs_id = d.id)
      SELECT t.id, t.status, t.outcome, t.queue,
        (SELECT json_group_array(needs_id) FROM ratchet_deps WHERE task_id = t.id) AS needs
      FROM ratchet_tasks t WHERE t.id IN (SELECT id FROM d)`).all({ root }) as {
      id: number;
      status: TaskRecord["status"];
      outcome: Outcome | null;
      queue: string;
      needs: string;
    }[];
    return rows.map((r) => ({ ...r, needs: JSON.parse(r.needs) as number[] }));
  }

  /** spec §6.1: every live transitive dependent becomes upstream_failed, no depth limit. */
  #cascade(root: TaskId, now: number): void {
    const nodes = this.#dependentsOf(root);
    const ids = planUpstreamFailure(root, nodes);
    const queueOf = new Map(nodes.map((n) => [n.id, n.queue]));
    const error = upstreamError(root);
    const upd =
      this.#s(`UPDATE ratchet_tasks SET status = 'terminal', outcome = 'upstream_failed', error = :error,
      wake_at = NULL, ended_at = :now, updated_at = :now WHERE id = :id AND status = 'waiting'`);
    for (const id of ids) {
      if (upd.run({ id, error, now }).changes === 1) this.#bumpLive(queueOf.get(id)!, -1);
    }
  }

  #event(taskId: TaskId, at: number, kind: EventKind, attempt: number | null, detail: unknown): void {
    this.#s("INSERT INTO ratchet_events (task_id, at, kind, attempt, detail) VALUES (?, ?, ?, ?, ?)").run(
      taskId,
      at,
      kind,
      attempt,
      detail === null || detail === undefined ? null : JSON.stringify(detail),
    );
  }

  // ------------------------------------------------------------ operations

  /** spec §6.3. */
  async retry(id: TaskId): Promise<TaskRecord> {
    return this.#tx(() => {
      const now = this.#now();
      const row = this.#s("SELECT * FROM ratchet_tasks WHERE id = ?").get(id) as TaskRow | undefined;
      if (!row) throw new NotFoundError(`task ${id}`);
      if (row.status !== "terminal")
        throw new InvalidStateError(`task ${id} is ${row.status}; only a terminal task can be retried`);
      const outcome = row.outcome!;
      if (outcome === "completed")
        throw new InvalidStateError(`task ${id} completed; enqueue it again instead`);
      if (outcome === "upstream_failed") {
        const root = this.#failedRoot(id);
        throw new InvalidStateError(
          `task ${id} did not run because upstream task ${root ?? "?"} failed; retry task ${root ?? "?"} instead`,
        );
      }
      if (!isRetryableOutcome(outcome))
        throw new InvalidStateError(`task ${id} ended ${outcome} and cannot be retried`);
      const needs = this.#needsWithOutcome(id);
      const bad = needs.find((n) => n.status === "terminal" && n.outcome !== "completed");
      if (bad)
        throw new InvalidStateError(
          `task ${id} needs task ${bad.id}, which ended ${bad.outcome}; retry task ${bad.id} first`,
        );
      if (row.dedupe_key !== null) {
        const taken = this.#s(
          "SELECT id FROM ratchet_tasks WHERE queue = ? AND dedupe_key = ? AND id <> ? AND (status <> 'terminal' OR outcome = 'completed')",
        ).get(row.queue, row.dedupe_key, id) as { id: number } | undefined;
        if (taken)
          throw new InvalidStateError(
            `task ${id}'s dedupe key "${row.dedupe_key}" is now held by task ${taken.id}`,
          );
      }
      const livePreds = needs.filter((n) => n.status !== "terminal").length;
      this.#s(`UPDATE ratchet_tasks SET status = :status, outcome = NULL, result = NULL, error = NULL, attempts = 0, abort_requested = 0,
          needs_pending = :pending, wake_at = NULL, run_after = :now, ended_at = NULL, progress = NULL, progress_note = NULL, updated_at = :now
        WHERE id = :id`).run({ id, now, pending: livePreds, status: livePreds > 0 ? "waiting" : "pending" });
      this.#bumpLive(row.queue, 1);
      this.#event(id, now, "retried", null, { previous: outcome });
      const nodes = this.#dependentsOf(id);
      const outcomes = new Map(nodes.map((n) => [n.id, n.outcome]));
      const lookup = (n: number) => (outcomes.has(n) ? outcomes.get(n)! : this.#outcomeOf(n));
      const queueOf = new Map(nodes.map((n) => [n.id, n.queue]));
      const reset =
        this.#s(`UPDATE ratchet_tasks SET status = 'waiting', outcome = NULL, error = NULL, needs_pending = :pending,
        wake_at = NULL, ended_at = NULL, attempts = 0, updated_at = :now WHERE id = :id AND outcome = 'upstream_failed'`);
      for (const r of planRetrySubtree(id, nodes, lookup)) {
        if (reset.run({ id: r.id, pending: r.needsPending, now }).changes === 1)
          this.#bumpLive(queueOf.get(r.id)!, 1);
      }
      return toRecord(this.#s("SELECT * FROM ratchet_tasks WHERE id = ?").get(id) as TaskRow);
    });
  }

  #outcomeOf(id: TaskId): Outcome | null {
    const r = this.#s("SELECT outcome FROM ratchet_tasks WHERE id = ?").get(id) as
      | { outcome: Outcome | null }
      | undefined;
    return r?.outcome ?? null;
  }

  #needsWithOutcome(id: TaskId) {
    return this.#s(
      `SELECT t.id, t.status, t.outcome FROM ratchet_deps d JOIN ratchet_tasks t ON t.id = d.needs_id WHERE d.task_id = ?`,
    ).all(id) as {
      id: number;
      status: string;
      outcome: Outcome | null;
    }[];
  }

  /** Walks up through upstream_failed predecessors to the task that actually failed. */
  #failedRoot(id: TaskId): TaskId | null {
    const seen = new Set<number>();
    let cur: number | null = id;
    while (cur !== null && !seen.has(cur)) {
      seen.add(cur);
      const preds: { id: number; status: string; outcome: Outcome | null }[] = this.#needsWithOutcome(
        cur,
      ).filter((n) => n.status === "terminal" && n.outcome !== "completed");
      const failed = preds.find((n) => n.outcome !== "upstream_failed");
      if (failed) return failed.id;
      cur = preds[0]?.id ?? null;
    }
    return null;
  }

  /** spec §7.1–§7.3. */
  async abort(id: TaskId): Promise<AbortResult> {
    return this.#tx(() => {
      const now = this.#now();
      const row = this.#s("SELECT * FROM ratchet_tasks WHERE id = ?").get(id) as TaskRow | undefined;
      if (!row) throw new NotFoundError(`task ${id}`);
      if (row.status === "terminal") return { state: "terminal", outcome: row.outcome! };
      if (row.status === "running" || row.status === "completing") {
        if (row.abort_requested === 0) {
          this.#s("UPDATE ratchet_tasks SET abort_requested = 1, updated_at = ? WHERE id = ?").run(now, id);
          this.#event(id, now, "abort_requested", row.attempts, null);
        }
        return { state: "marked" };
      }
      const error: StoredError = { name: "Aborted", message: "aborted before it ran to the end" };
      this.#s(`UPDATE ratchet_tasks SET status = 'terminal', outcome = 'aborted', abort_requested = 1, error = ?, wake_at = NULL,
        ended_at = ?, updated_at = ? WHERE id = ?`).run(JSON.stringify(error), now, now, id);
      this.#event(id, now, "aborted", row.attempts, null);
      this.#bumpLive(row.queue, -1);
      if (row.dependents > 0) this.#cascade(id, now);
      return { state: "aborted" };
    });
  }

  async prune(olderThanMs: number, limit: number): Promise<number> {
    return this.#tx(() => {
      const cutoff = this.#now() - olderThanMs;
      const ids = (
        this.#s(
          "SELECT id FROM ratchet_tasks WHERE status = 'terminal' AND ended_at < ? ORDER BY ended_at LIMIT ?",
        ).all(cutoff, limit) as { id: number }[]
      ).map((r) => r.id);
      if (ids.length === 0) return 0;
      const list = JSON.stringify(ids);
      this.#s("DELETE FROM ratchet_steps WHERE task_id IN (SELECT value FROM json_each(?))").run(list);
      this.#s("DELETE FROM ratchet_events WHERE task_id IN (SELECT value FROM json_each(?))").run(list);
      this.#s(
        "DELETE FROM ratchet_deps WHERE task_id IN (SELECT value FROM json_each(?)) OR needs_id IN (SELECT value FROM json_each(?))",
      ).run(list, list);
      return this.#s("DELETE FROM ratchet_tasks WHERE id IN (SELECT value FROM json_each(?))").run(list)
        .changes;
    });
  }

  // ----------------------------------------------------------------- reads

  async get(id: TaskId): Promise<TaskRecord | null> {
    return this.#read(() => {
      const r = this.#s("SELECT * FROM ratchet_tasks WHERE id = ?").get(id) as TaskRow | undefined;
      return r ? toRecord(r) : null;
    });
  }

  async needsOf(id: TaskId): Promise<TaskId[]> {
    return this.#read(() =>
      (
        this.#s("SELECT needs_id FROM ratchet_deps WHERE task_id = ? ORDER BY needs_id").all(id) as {
          needs_id: number;
        }[]
      ).map((r) => r.needs_id),
    );
  }

  async steps(id: TaskId): Promise<StepRecord[]> {
    return this.#read(() =>
      (
        this.#s("SELECT * FROM ratchet_steps WHERE task_id = ? ORDER BY id").all(id) as {
          task_id: number;
          name: string;
          result: string;
          attempt: number;
          created_at: number;
        }[]
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
    return this.#read(() =>
      (
        this.#s("SELECT * FROM ratchet_events WHERE task_id = ? ORDER BY id").all(id) as {
          task_id: number;
          at: number;
          kind: EventKind;
          attempt: number | null;
          detail: string | null;
        }[]
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
    return this.#read(() => {
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
      const sql = `SELECT * FROM ratchet_tasks ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY id DESC LIMIT :limit`;
      return (this.#s(sql).all(p) as TaskRow[]).map(toRecord);
    });
  }

  async jobStatus(job: string): Promise<JobStatus> {
    return this.#read(() => {
      const rows = this.#s(
        "SELECT status, outcome, count(*) AS n FROM ratchet_tasks WHERE job = ? GROUP BY status, outcome",
      ).all(job) as {
        status: TaskRecord["status"];
        outcome: Outcome | null;
        n: number;
      }[];
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
    return this.#read(() => {
      const rows = this.#s(
        "SELECT queue, status, outcome, count(*) AS n FROM ratchet_tasks GROUP BY queue, status, outcome ORDER BY queue",
      ).all() as {
        queue: string;
        status: TaskRecord["status"];
        outcome: Outcome | null;
        n: number;
      }[];
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

  /** spec §9.3: pending work is due now; otherwise the earliest timer or lease expiry. */
  async nextRunAt(): Promise<number | null> {
    return this.#read(() => {
      const pending = this.#s("SELECT 1 FROM ratchet_tasks WHERE status = 'pending' LIMIT 1").get();
      if (pending) return this.#now();
      const r = this.#s(`SELECT min(t) AS t FROM (
          SELECT min(wake_at) AS t FROM ratchet_tasks WHERE status = 'waiting' AND wake_at IS NOT NULL
          UNION ALL SELECT min(lease_until) FROM ratchet_tasks WHERE status = 'running')`).get() as {
        t: number | null;
      };
      return r.t;
    });
  }

  async countReady(queues: readonly string[], names: readonly string[], cap: number): Promise<number> {
    if (names.length === 0 || queues.length === 0) return 0;
    return this.#read(() => {
      const r = this.#s(`SELECT count(*) AS n FROM (SELECT 1 FROM ratchet_tasks WHERE status = 'pending'
        AND queue IN (SELECT value FROM json_each(:queues)) AND name IN (SELECT value FROM json_each(:names)) LIMIT :cap)`).get(
        { queues: JSON.stringify(queues), names: JSON.stringify(names), cap },
      ) as { n: number };
      return r.n;
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.db.close();
  }
}

function upstreamError(root: TaskId): string {
  const e: StoredError = { name: "UpstreamFailed", message: `upstream task ${root} failed`, upstream: root };
  return JSON.stringify(e);
}
