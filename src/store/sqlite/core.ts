/**
 * Shared machinery of the SQLite store: the statement cache, transaction and
 * read wrappers, the clock, and the writes several operation families share
 * (events, live counters, fence refusals, dependents and cascades).
 * Members are module-internal: only the store's operation modules use them.
 */
import type Database from "better-sqlite3";
import { planUpstreamFailure } from "../../core/cascade.js";
import type { Clock } from "../../core/clock.js";
import type { StoredError } from "../../core/json.js";
import type { Outcome } from "../../core/model.js";
import { AbortedError, LeaseLostError, RatchetError, StoreError } from "../../errors.js";
import {
  type EventKind,
  type Fence,
  type FencedFields,
  refusedForMark,
  type SettleResult,
  type TaskId,
  type TaskRecord,
} from "../store.js";
import { FenceRefused } from "../tree/ops.js";
import { type Op, type Program, runSync, sqliteParams, sqliteSql } from "../tree/program.js";
import type { CheckpointLane } from "./checkpointer.js";

export type Db = Database.Database;
export type Stmt = Database.Statement;

/**
 * How a writer waits for SQLite's write lock (spec §10.2). SQLite's own busy handler sleeps 1, 2, 5,
 * 10, 15, 20, 25 … ms between tries, so a writer that found the lock taken by a transaction of 3 ms
 * (a claim of 500) slept up to 8 ms before it tried again, while the lock sat free. Two worker
 * processes on one file, each alternating claims and settle batches, lost that time at every
 * handover. The store therefore runs with busy_timeout 0 once open, and tx() and read() wait here:
 * 50 µs, doubling up to 0.5 ms between tries, until `busyTimeoutMs` have passed. Peers harness,
 * `RATCHET_DIST=… node --import tsx peers/compare.ts --runs 3 --only ratchet-sqlite --figures
 * w2-c16,w2-2p-c16,w2-2p-c1`, four pairs of runs alternating with the commit before, two worker
 * processes: c1 70.8k, 72.5k, 69.2k, 69.7k → 75.5k, 72.1k, 69.9k, 75.4k jobs/s; c16 66.0k, 71.4k,
 * 62.2k, 66.1k → 72.2k, 74.2k, 69.4k, 70.4k; one process (no other writer) level, 78.7–84.3k against
 * 76.2–82.1k. The wait blocks the process, as SQLite's sleep did.
 */
const LOCK_WAIT_FIRST_MS = 0.05;
const LOCK_WAIT_MAX_MS = 0.5;
const SLEEPER = new Int32Array(new SharedArrayBuffer(4));

/** SQLITE_BUSY and its extended codes: the lock is held by another connection. */
function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && code.startsWith("SQLITE_BUSY");
}

export class SqliteCore {
  readonly db: Db;
  readonly clock: Clock;
  readonly stmts: Map<string, Stmt> = new Map();
  closed = false;
  /** Round-robin cursor over the claimed queues. */
  rr = 0;

  constructor(
    db: Db,
    clock: Clock,
    /** How long tx() and read() wait for a lock another connection holds (spec §10.2). */
    readonly busyTimeoutMs = 10_000,
  ) {
    this.db = db;
    this.clock = clock;
    this.#immediate = db.transaction((fn: () => unknown) => {
      this.#began = true;
      return fn();
    }).immediate;
  }

  /** Prepared statements are cached by their text. */
  s(sql: string): Stmt {
    let st = this.stmts.get(sql);
    if (!st) {
      st = this.db.prepare(sql);
      this.stmts.set(sql, st);
    }
    return st;
  }

  /**
   * The same, returning rows as arrays (better-sqlite3's raw mode), for the hot reads whose columns
   * are fixed: building a 22-key object per row in the driver cost ~4 µs of a ~11 µs claim per task
   * (20,000 claims of 32 ids on a 20k-row table: 10.7 against 6.9 µs per row).
   */
  sRaw(sql: string): Stmt {
    const key = `raw:${sql}`;
    let st = this.stmts.get(key);
    if (!st) {
      st = this.db.prepare(sql).raw(true);
      this.stmts.set(key, st);
    }
    return st;
  }

  /** One wrapper for every transaction: `db.transaction(fn)` builds its closures on every call. */
  readonly #immediate: (fn: () => unknown) => unknown;
  /** The last tx() got its lock and began fn: a busy error after that is not a lock wait. */
  #began = false;

  /**
   * Runs fn in BEGIN IMMEDIATE; wraps driver errors (principle: no raw errors reach callers). Waits
   * for the write lock (LOCK_WAIT_FIRST_MS): only a BEGIN that found the lock taken is tried again,
   * so fn never runs twice.
   */
  tx<T>(fn: () => T): T {
    const out = this.#waitingForLocks(
      () => {
        this.#began = false;
        return this.#immediate(fn) as T;
      },
      () => !this.#began,
    );
    // Committed: if it changed rows, the WAL grew and the checkpoint thread has work (spec §10.4).
    this.lane?.touch();
    return out;
  }

  /** The background checkpoints of this file (checkpointer.ts); undefined for memory or when the thread cannot run. */
  lane: CheckpointLane | undefined;

  /** Runs reads outside a transaction; they write nothing, so a read that met a lock runs again. */
  read<T>(fn: () => T): T {
    return this.#waitingForLocks(fn, () => !this.db.inTransaction);
  }

  /** Runs `attempt` until it does not meet a lock held elsewhere (while `again` allows), or busyTimeoutMs pass. */
  #waitingForLocks<T>(attempt: () => T, again: () => boolean): T {
    if (this.closed) throw new StoreError("the store is closed");
    let deadline = 0;
    let wait = LOCK_WAIT_FIRST_MS;
    for (;;) {
      try {
        return attempt();
      } catch (err) {
        if (isBusy(err) && again()) {
          deadline ||= performance.now() + this.busyTimeoutMs;
          if (performance.now() < deadline) {
            Atomics.wait(SLEEPER, 0, 0, wait);
            wait = Math.min(wait * 2, LOCK_WAIT_MAX_MS);
            continue;
          }
        }
        if (err instanceof RatchetError) throw err;
        throw new StoreError(`SQLite: ${(err as Error).message}`, { cause: err });
      }
    }
  }

  now(): number {
    return this.clock.now();
  }

  /** Runs a task-tree program (src/store/tree) in one IMMEDIATE transaction. */
  program<R>(p: () => Program<R>): R {
    return this.tx(() => this.inTx(p()));
  }

  /** Runs a program inside the caller's transaction. */
  inTx<R>(p: Program<R>): R {
    const now = this.now();
    try {
      return runSync(p, (op) => this.exec(op, now));
    } catch (e) {
      if (e instanceof FenceRefused) {
        if (e.result === "abort_marked") throw new AbortedError(e.fence.taskId);
        throw new LeaseLostError(e.fence.taskId, e.fence.token);
      }
      throw e;
    }
  }

  exec(op: Op, now: number): unknown {
    switch (op.op) {
      case "q": {
        const st = this.s(sqliteSql(op.sql));
        const params = { ...sqliteParams(op.p), now };
        if (st.reader) return st.all(params);
        st.run(params);
        return [];
      }
      case "bump":
        this.bumpLive(op.queue, op.n);
        return undefined;
      case "event":
        this.event(op.id, now, op.kind, op.attempt, op.detail);
        return undefined;
      case "ended":
        if (op.completed) this.releaseDependents(op.id, now);
        else this.cascade(op.id, now);
        return undefined;
      case "live":
        return this.queueLive(op.queue);
      case "lock":
      case "notify":
        return undefined;
    }
  }

  event(taskId: TaskId, at: number, kind: EventKind, attempt: number | null, detail: unknown): void {
    this.s("INSERT INTO ratchet_events (task_id, at, kind, attempt, detail) VALUES (?, ?, ?, ?, ?)").run(
      taskId,
      at,
      kind,
      attempt,
      detail === null || detail === undefined ? null : JSON.stringify(detail),
    );
  }

  queueLive(queue: string): number {
    const row = this.s("SELECT live FROM ratchet_queues WHERE name = ?").get(queue) as
      | { live: number }
      | undefined;
    return row?.live ?? 0;
  }

  bumpLive(queue: string, n: number): void {
    if (n === 0) return;
    this.s(
      "INSERT INTO ratchet_queues (name, live) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET live = live + excluded.live",
    ).run(queue, n);
  }

  /** Throws the reason a fenced write matched no row. */
  refused(fence: Fence): never {
    const row = this.s(
      "SELECT status, epoch, claimed_at, abort_requested FROM ratchet_tasks WHERE id = ?",
    ).get(fence.taskId) as FencedFields | undefined;
    if (refusedForMark(row, fence)) throw new AbortedError(fence.taskId);
    throw new LeaseLostError(fence.taskId, fence.token);
  }

  why(fence: Fence): SettleResult {
    try {
      this.refused(fence);
    } catch (e) {
      return e instanceof AbortedError ? "abort_marked" : "lease_lost";
    }
  }

  /** spec §6.2: a completed predecessor lowers each dependent's count; at zero it becomes due (or waits for its runAfter). */
  releaseDependents(id: TaskId, now: number): void {
    this.s(`UPDATE ratchet_tasks SET needs_pending = needs_pending - 1, updated_at = :now
      WHERE id IN (SELECT task_id FROM ratchet_deps WHERE needs_id = :id) AND status = 'waiting' AND needs_pending > 0`).run(
      { id, now },
    );
    this.s(`UPDATE ratchet_tasks SET status = CASE WHEN run_after <= :now THEN 'pending' ELSE 'waiting' END,
        wake_at = CASE WHEN run_after <= :now THEN NULL ELSE run_after END
      WHERE id IN (SELECT task_id FROM ratchet_deps WHERE needs_id = :id) AND status = 'waiting' AND needs_pending = 0 AND wake_at IS NULL`).run(
      { id, now },
    );
  }

  /** Reads the transitive dependents of `root` with their needs (for core cascade plans). */
  dependentsOf(root: TaskId) {
    const rows = this.s(`WITH RECURSIVE d(id) AS (
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
  cascade(root: TaskId, now: number): void {
    const nodes = this.dependentsOf(root);
    const ids = planUpstreamFailure(root, nodes);
    const queueOf = new Map(nodes.map((n) => [n.id, n.queue]));
    const error = upstreamError(root);
    const upd =
      this.s(`UPDATE ratchet_tasks SET status = 'terminal', outcome = 'upstream_failed', error = :error,
      wake_at = NULL, ended_at = :now, updated_at = :now WHERE id = :id AND status = 'waiting'`);
    for (const id of ids) {
      if (upd.run({ id, error, now }).changes === 1) this.bumpLive(queueOf.get(id)!, -1);
    }
  }
}

export function upstreamError(root: TaskId): string {
  const e: StoredError = { name: "UpstreamFailed", message: `upstream task ${root} failed`, upstream: root };
  return JSON.stringify(e);
}
