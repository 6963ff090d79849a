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
 *
 * This class owns the connection and delegates: shared machinery lives in
 * core.ts, each operation family in its own module (enqueue, claim, holder,
 * operations, reads).
 */
import Database from "better-sqlite3";
import type { Clock } from "../../core/clock.js";
import { AbortedError, LeaseLostError, SchemaTooNewError, StoreError } from "../../errors.js";
import { breakerOps } from "../breakers/ops.js";
import { conversationOps } from "../conversations/bind.js";
import { DispatchOps } from "../dispatch/ops.js";
import * as gates from "../gates.js";
import { OutboxOps } from "../outbox/ops.js";
import type { ScheduleRow, ScheduleSpec } from "../schedules.js";
import * as sched from "../schedules.js";
import type {
  AbortResult,
  BlockedInfo,
  ClaimedTask,
  ClaimLimits,
  ClaimRequest,
  DefinitionInfo,
  EndedTask,
  Enqueued,
  EnqueueOptions,
  EventWaitResult,
  ExplainRows,
  Fence,
  InspectRows,
  JobStatus,
  ListFilter,
  NewChild,
  NewTask,
  QueueDepth,
  QueueStats,
  Settlement,
  SettleResult,
  StepRecord,
  StepWrite,
  Store,
  TaskEvent,
  TaskId,
  TaskRecord,
  WaitPolicy,
  WaitResult,
} from "../store.js";
import * as streams from "../streams/ops.js";
import { eventStepKey } from "../tree/keys.js";
import * as tree from "../tree/ops.js";
import { usageOps } from "../usage/ops.js";
import { BACKSTOP_PAGES, checkpointLane } from "./checkpointer.js";
import * as claims from "./claim.js";
import { type Db, SqliteCore } from "./core.js";
import { enqueue } from "./enqueue.js";
import * as holder from "./holder.js";
import { LATEST_VERSION, MIGRATIONS } from "./migrations.js";
import * as ops from "./operations.js";
import * as reads from "./reads.js";
import { watchCommits } from "./wake.js";

export interface SqliteStoreOptions {
  /** File path or ":memory:". */
  path: string;
  clock: Clock;
  synchronous?: "NORMAL" | "FULL";
  busyTimeoutMs?: number;
}

export class SqliteStore implements Store {
  readonly db: Db;
  readonly #c: SqliteCore;
  readonly #path: string;
  /** The dispatch layer's operations (spec §20.18), programs run in one IMMEDIATE transaction each. */
  readonly dispatch: DispatchOps;

  constructor(opts: SqliteStoreOptions) {
    const busyTimeoutMs = Math.max(0, Math.floor(opts.busyTimeoutMs ?? 10_000));
    const synchronous = opts.synchronous === "FULL" ? "FULL" : "NORMAL";
    this.#path = opts.path;
    try {
      this.db = new Database(opts.path);
      this.db.pragma(`busy_timeout = ${busyTimeoutMs}`);
      this.db.pragma("journal_mode = WAL");
      this.db.pragma(`synchronous = ${synchronous}`);
    } catch (err) {
      throw new StoreError(`cannot open SQLite database at ${opts.path}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    // spec §10.2: from here on the store waits for locks itself (SqliteCore.tx), in steps finer than
    // SQLite's busy handler; the open's own pragmas above waited with the handler.
    this.db.pragma("busy_timeout = 0");
    this.#c = new SqliteCore(this.db, opts.clock, busyTimeoutMs);
    this.dispatch = new DispatchOps(async (p) => this.#c.program(p));
    // spec §10.4: checkpoints on a thread of their own; this connection's are only the backstop.
    if (opts.path !== ":memory:" && opts.path !== "") {
      const totalChanges = this.db.prepare("SELECT total_changes()").pluck();
      this.#c.lane = checkpointLane(opts.path, synchronous, () => totalChanges.get() as number);
      if (this.#c.lane) this.db.pragma(`wal_autocheckpoint = ${BACKSTOP_PAGES}`);
    }
  }

  /** The background thread's checkpoints of this file: how many completed, and whether one is coming (spec §10.4; tests). */
  get checkpoints(): { done: number; dirty: boolean } {
    return { done: this.#c.lane?.done ?? 0, dirty: this.#c.lane?.dirty ?? false };
  }

  async now(): Promise<number> {
    return this.#c.now();
  }

  /** spec §10.5: another process's commits wake this process's idle worker (a file only). */
  async subscribe(onWake: () => void): Promise<() => Promise<void>> {
    if (this.#path === ":memory:" || this.#path === "") return async () => {};
    return watchCommits(this.#c, this.#path, onWake);
  }

  /** spec §10.1: the version check and the migration run in one IMMEDIATE transaction, so concurrent opens serialise. */
  async migrate(): Promise<void> {
    this.#c.tx(() => {
      this.db.exec("CREATE TABLE IF NOT EXISTS ratchet_schema (version INTEGER NOT NULL)");
      const row = this.db.prepare("SELECT max(version) AS v FROM ratchet_schema").get() as {
        v: number | null;
      };
      const current = row.v ?? 0;
      if (current > LATEST_VERSION) throw new SchemaTooNewError(current, LATEST_VERSION);
      for (const m of MIGRATIONS) {
        if (m.version <= current) continue;
        if (m.sql) this.db.exec(m.sql);
        m.run?.(this.db);
        this.db.prepare("INSERT INTO ratchet_schema (version) VALUES (?)").run(m.version);
      }
    });
  }

  async schemaVersion(): Promise<number> {
    return this.#c.read(
      () => (this.db.prepare("SELECT max(version) AS v FROM ratchet_schema").get() as { v: number }).v,
    );
  }

  // ---------------------------------------------------------------- enqueue

  /** spec §2.2–§2.8. The whole batch is one transaction; any throw rolls it back. */
  async enqueue(batch: readonly NewTask[], opts: EnqueueOptions): Promise<Enqueued[]> {
    return enqueue(this.#c, batch, opts);
  }

  // ------------------------------------------------------------------ claim

  /** spec §3.1–§3.4, §3.6. Promotion and claim share one IMMEDIATE transaction. */
  async claim(req: ClaimRequest): Promise<ClaimedTask[]> {
    return claims.claim(this.#c, req);
  }

  async listReady(queue: string, limit: number): Promise<TaskRecord[]> {
    return claims.listReady(this.#c, queue, limit);
  }

  // ---------------------------------------------------------- holder writes

  async loadSteps(taskId: TaskId): Promise<Map<string, unknown>> {
    return holder.loadSteps(this.#c, taskId);
  }

  /** spec §4.2: one row per (task, name); the fence and the insert commit together. */
  async commitStep(fence: Fence, name: string, result: string): Promise<void> {
    const [r] = await this.commitSteps([{ fence, name, result }]);
    if (r === "abort_marked") throw new AbortedError(fence.taskId);
    if (r !== "ok") throw new LeaseLostError(fence.taskId, fence.token);
  }

  /** spec §4.2: per item, the fenced touch and the insert; one transaction for all. */
  async commitSteps(items: readonly StepWrite[]): Promise<SettleResult[]> {
    return holder.commitSteps(this.#c, items);
  }

  async heartbeat(fence: Fence, maxMs: number, leaseGraceMs: number): Promise<void> {
    holder.heartbeat(this.#c, fence, maxMs, leaseGraceMs);
  }

  async progress(fence: Fence, fraction: number, note: string | null): Promise<void> {
    holder.progress(this.#c, fence, fraction, note);
  }

  /** Applies settlements, each fenced on its own, in one transaction (one commit for a whole batch of completions). */
  async settle(items: readonly Settlement[]): Promise<SettleResult[]> {
    return holder.settle(this.#c, items);
  }

  // ------------------------------------------------------------ operations

  /** spec §6.3. */
  async retry(id: TaskId): Promise<TaskRecord> {
    return ops.retry(this.#c, id);
  }

  /** spec §7.1–§7.3. */
  async abort(id: TaskId): Promise<AbortResult> {
    return ops.abort(this.#c, id);
  }

  async prune(olderThanMs: number, limit: number): Promise<number> {
    return ops.prune(this.#c, olderThanMs, limit);
  }

  // ------------------------------------------------------------ task trees

  async spawn(
    fence: Fence,
    child: NewChild,
    opts: EnqueueOptions,
  ): Promise<{ id: TaskId; created: boolean }> {
    return this.#c.program(() => tree.spawn(fence, child, opts.maxDepth(child.task.queue)));
  }

  async spawnMany(
    fence: Fence,
    children: readonly NewChild[],
    opts: EnqueueOptions,
  ): Promise<{ id: TaskId; created: boolean }[]> {
    return this.#c.program(() => tree.spawnMany(fence, children, (q) => opts.maxDepth(q)));
  }

  async waitTasks(fence: Fence, members: readonly TaskId[], policy: WaitPolicy): Promise<WaitResult> {
    return this.#c.program(() => tree.waitTasks(fence, members, policy));
  }

  async waitEvent(fence: Fence, name: string, untilMs: number): Promise<EventWaitResult> {
    return this.#c.program(() => tree.waitEvent(fence, name, eventStepKey(name), untilMs));
  }

  async signal(name: string, payload: string): Promise<{ first: boolean; woken: number }> {
    return this.#c.program(() => tree.signal(name, payload));
  }

  async reconcile(): Promise<TaskId[]> {
    return this.#c.program(() => tree.reconcile(null));
  }

  async abortScope(scope: string, background: boolean): Promise<TaskId[]> {
    return this.#c.program(() => tree.abortScope(scope, background));
  }

  async registerDefinitions(defs: readonly DefinitionInfo[]): Promise<void> {
    this.#c.program(() => tree.registerDefinitions(defs));
  }

  async block(fence: Fence, info: BlockedInfo): Promise<void> {
    this.#c.program(() => tree.block(fence, info));
  }

  async unblock(names: readonly string[]): Promise<number> {
    return this.#c.program(() => tree.unblock(names));
  }

  async migrated(fence: Fence, version: number, input: string, checkpoint: string | null): Promise<void> {
    this.#c.program(() => tree.migrated(fence, version, input, checkpoint));
  }

  async setCheckpoint(fence: Fence, checkpoint: string, keep: string): Promise<void> {
    this.#c.program(() => tree.setCheckpoint(fence, checkpoint, keep));
  }

  async children(id: TaskId): Promise<TaskRecord[]> {
    return this.#c.program(() => tree.children(id));
  }

  async subtree(id: TaskId, limit: number): Promise<TaskRecord[]> {
    return this.#c.program(() => tree.subtree(id, limit));
  }

  async scopeLive(scope: string | null): Promise<number> {
    return this.#c.program(() => tree.scopeLive(scope));
  }

  async inspectRows(limit: number): Promise<InspectRows> {
    return this.#c.program(() => tree.inspectRows(limit));
  }

  async waitMembers(id: TaskId): Promise<TaskId[]> {
    return this.#c.program(() => tree.waitMembers(id));
  }

  async upsertSchedule(s: ScheduleSpec): Promise<ScheduleRow> {
    return this.#c.program(() => sched.upsertSchedule(s));
  }

  async deleteSchedule(name: string): Promise<boolean> {
    return this.#c.program(() => sched.deleteSchedule(name));
  }

  async listSchedules(): Promise<ScheduleRow[]> {
    return this.#c.program(() => sched.listSchedules());
  }

  async dueSchedules(limit: number): Promise<{ rows: ScheduleRow[]; now: number }> {
    return this.#c.program(() => sched.dueSchedules(limit));
  }

  async claimTick(name: string, due: number, next: number, firing: number | null): Promise<boolean> {
    return this.#c.program(() => sched.claimTick(name, due, next, firing));
  }

  async firedTick(name: string, tick: number, taskId: TaskId): Promise<void> {
    this.#c.program(() => sched.firedTick(name, tick, taskId));
  }

  async explainRows(id: TaskId): Promise<ExplainRows | null> {
    return this.#c.program(() => tree.explainRows(id));
  }

  async markedAmong(ids: readonly TaskId[]): Promise<TaskId[]> {
    return this.#c.program(() => tree.markedAmong(ids));
  }

  // ----------------------------------------------------------------- conversations (spec §17)

  /** Writes in one IMMEDIATE transaction each; reads outside one. */
  readonly conversations = conversationOps(
    async (p) => this.#c.program(p),
    async (p) => this.#c.read(() => this.#c.inTx(p())),
  );

  /** Breakers and the usage ledger (spec §18): writes in one IMMEDIATE transaction each; reads outside one. */
  readonly breakers = breakerOps(
    async (p) => this.#c.program(p),
    async (p) => this.#c.read(() => this.#c.inTx(p())),
  );
  readonly usage = usageOps(
    async (p) => this.#c.program(p),
    async (p) => this.#c.read(() => this.#c.inTx(p())),
  );
  /** The outbox (spec part 21): writes in one IMMEDIATE transaction each; reads outside one. */
  readonly outbox = new OutboxOps(
    async (p) => this.#c.program(p),
    async (p) => this.#c.read(() => this.#c.inTx(p())),
  );

  // ----------------------------------------------------------------- flow control (spec §14.9–§14.12)

  async setSeatLimit(seat: string, limit: number | null): Promise<number> {
    return this.#c.program(() => gates.setSeatLimit(seat, limit));
  }

  async seatLimits(): Promise<{ seat: string; limit: number }[]> {
    return this.#c.read(() => this.#c.inTx(gates.seatLimits()));
  }

  /** Where the next seat sweep starts (each pass covers a bounded number of seats). */
  #sweepFrom = "";

  async maintainGates(limits: ClaimLimits): Promise<number> {
    const r = this.#c.program(() => gates.maintainGates(limits, this.#sweepFrom));
    this.#sweepFrom = r.next;
    return r.woken;
  }

  async pauseRate(id: TaskId, ms: number, only: string | null): Promise<string[]> {
    return this.#c.program(() => gates.pauseBuckets(id, ms, only));
  }

  async reportUsage(id: TaskId, usage: Readonly<Record<string, number>>) {
    return this.#c.program(() => gates.reportUsage(id, usage));
  }

  // ----------------------------------------------------------------- reads

  async get(id: TaskId): Promise<TaskRecord | null> {
    return reads.get(this.#c, id);
  }

  async needsOf(id: TaskId): Promise<TaskId[]> {
    return reads.needsOf(this.#c, id);
  }

  async steps(id: TaskId): Promise<StepRecord[]> {
    return reads.steps(this.#c, id);
  }

  async events(id: TaskId): Promise<TaskEvent[]> {
    return reads.events(this.#c, id);
  }

  async list(f: ListFilter): Promise<TaskRecord[]> {
    return reads.list(this.#c, f);
  }

  async jobStatus(job: string): Promise<JobStatus> {
    return reads.jobStatus(this.#c, job);
  }

  async stats(): Promise<QueueStats[]> {
    return reads.stats(this.#c);
  }

  async depths(): Promise<QueueDepth[]> {
    return reads.depths(this.#c);
  }

  /** spec §9.3: pending work is due now; otherwise the earliest timer or lease expiry. */
  async nextRunAt(): Promise<number | null> {
    return reads.nextRunAt(this.#c);
  }

  async countReady(queues: readonly string[], names: readonly string[], cap: number): Promise<number> {
    return reads.countReady(this.#c, queues, names, cap);
  }

  // ------------------------------------------------ durable output streams (spec §16)

  async appendStreams(items: readonly streams.StreamAppend[]): Promise<streams.StreamAppendResult[]> {
    return this.#c.program(() => streams.appendStreams(items));
  }

  async streamInfo(taskId: TaskId, name: string): Promise<streams.StreamInfo | null> {
    return this.#c.read(() => this.#c.inTx(streams.streamInfo(taskId, name)));
  }

  async listStreams(taskId: TaskId): Promise<streams.StreamInfo[]> {
    return this.#c.read(() => this.#c.inTx(streams.listStreams(taskId)));
  }

  async readStream(taskId: TaskId, name: string, from: number): Promise<streams.StreamRead> {
    return this.#c.read(() => this.#c.inTx(streams.readStream(taskId, name, from)));
  }

  async recentlyEnded(limit: number): Promise<EndedTask[]> {
    return reads.recentlyEnded(this.#c, limit);
  }

  async close(): Promise<void> {
    if (this.#c.closed) return;
    this.#c.closed = true;
    // The thread lets go of the file first, so this connection is its last and removes the WAL.
    await this.#c.lane?.release();
    this.db.close();
  }
}
