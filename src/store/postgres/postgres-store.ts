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
import type pg from "pg";
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
import { claim, listReady } from "./claim.js";
import { PgCore, type PostgresStoreOptions } from "./core.js";
import { enqueue } from "./enqueue.js";
import { commitStep, commitSteps, heartbeat, progress, settle } from "./holder.js";
import { subscribe } from "./listen.js";
import { abort, prune, retry } from "./operations.js";
import {
  countReady,
  depths,
  events,
  get,
  jobStatus,
  list,
  loadSteps,
  needsOf,
  nextRunAt,
  recentlyEnded,
  stats,
  steps,
} from "./reads.js";

export type { PostgresStoreOptions } from "./core.js";

export class PostgresStore implements Store {
  readonly core: PgCore;
  /** The dispatch layer's operations (spec §20.18), programs run in one transaction each. */
  readonly dispatch: DispatchOps;

  constructor(o: PostgresStoreOptions) {
    this.core = new PgCore(o);
    this.dispatch = new DispatchOps((p) => this.core.program(p));
  }

  get schema(): string {
    return this.core.schema;
  }

  get pool(): pg.Pool {
    return this.core.pool;
  }

  migrate = (): Promise<void> => this.core.migrate();
  schemaVersion = (): Promise<number> => this.core.schemaVersion();
  now = (): Promise<number> => this.core.now();
  enqueue = (batch: readonly NewTask[], opts: EnqueueOptions): Promise<Enqueued[]> =>
    enqueue(this.core, batch, opts);
  claim = (req: ClaimRequest): Promise<ClaimedTask[]> => claim(this.core, req);
  listReady = (queue: string, limit: number): Promise<TaskRecord[]> => listReady(this.core, queue, limit);
  loadSteps = (taskId: TaskId): Promise<Map<string, unknown>> => loadSteps(this.core, taskId);
  commitStep = (fence: Fence, name: string, result: string): Promise<void> =>
    commitStep(this.core, fence, name, result);
  commitSteps = (items: readonly StepWrite[]): Promise<SettleResult[]> => commitSteps(this.core, items);
  heartbeat = (fence: Fence, maxMs: number, graceMs: number): Promise<void> =>
    heartbeat(this.core, fence, maxMs, graceMs);
  progress = (fence: Fence, fraction: number, note: string | null): Promise<void> =>
    progress(this.core, fence, fraction, note);
  settle = (items: readonly Settlement[]): Promise<SettleResult[]> => settle(this.core, items);
  /**
   * One settle transaction at a time (spec §8.9), as on SQLite. Two (each on a pool connection of its
   * own) were measured faster in warm in-process drains of 60,000 (2026-12-02: 59,716 → 66,693
   * tasks/s, eight pairs of `node dist/bench/drain.js --store pg --pairs 8 --base …`), where one
   * write at a time held the claims back while the server had a core to spare. In a fresh worker
   * (the peers harness's W2) the second write is what opens a third connection of the pool, and a new
   * connection costs the server ~12–17 ms of CPU to start and ~15–25 ms more for its first claim or
   * completion (catalog entries of the task table and its 14 indexes, the plans: per-statement CPU of
   * each backend from /proc/<pid>/schedstat, 2026-12-07), paid again by each worker process. The
   * peers harness's W2 c16 (`--runs 3 --only ratchet-pg,graphile-worker --figures w2-c16,w2-2p-c16`,
   * four sets alternating with the same build at two lanes, 12 runs each, load average 2–4): per-run
   * ratio to graphile-worker, median 1.46× → 1.63× with one worker process and 1.34× → 1.51× with
   * two; Ratchet's CPU per job (worker + server) 58.3 → 53.3 and 85.8 → 78.3 µs. Warm in-process
   * drains of 60,000 (three pairs, the same build with two lanes as the base): 38,014 → 38,402
   * tasks/s, the server 31.8 → 27.0 and Node 8.6 → 10.0 µs per task.
   */
  readonly settleLanes = 1;
  get = (id: TaskId): Promise<TaskRecord | null> => get(this.core, id);
  needsOf = (id: TaskId): Promise<TaskId[]> => needsOf(this.core, id);
  steps = (id: TaskId): Promise<StepRecord[]> => steps(this.core, id);
  events = (id: TaskId): Promise<TaskEvent[]> => events(this.core, id);
  list = (f: ListFilter): Promise<TaskRecord[]> => list(this.core, f);
  jobStatus = (job: string): Promise<JobStatus> => jobStatus(this.core, job);
  stats = (): Promise<QueueStats[]> => stats(this.core);
  depths = (): Promise<QueueDepth[]> => depths(this.core);
  recentlyEnded = (limit: number): Promise<EndedTask[]> => recentlyEnded(this.core, limit);
  // Durable output streams (spec §16): appends in one transaction, reads on one connection.
  appendStreams = (items: readonly streams.StreamAppend[]): Promise<streams.StreamAppendResult[]> =>
    this.core.program(() => streams.appendStreams(items));
  streamInfo = (taskId: TaskId, name: string): Promise<streams.StreamInfo | null> =>
    this.core.read((c) => this.core.inTx(c, streams.streamInfo(taskId, name)));
  listStreams = (taskId: TaskId): Promise<streams.StreamInfo[]> =>
    this.core.read((c) => this.core.inTx(c, streams.listStreams(taskId)));
  readStream = (taskId: TaskId, name: string, from: number): Promise<streams.StreamRead> =>
    this.core.read((c) => this.core.inTx(c, streams.readStream(taskId, name, from)));
  nextRunAt = (): Promise<number | null> => nextRunAt(this.core);
  countReady = (queues: readonly string[], names: readonly string[], cap: number): Promise<number> =>
    countReady(this.core, queues, names, cap);
  retry = (id: TaskId): Promise<TaskRecord> => retry(this.core, id);
  abort = (id: TaskId): Promise<AbortResult> => abort(this.core, id);
  prune = (olderThanMs: number, limit: number): Promise<number> => prune(this.core, olderThanMs, limit);
  // Task trees (spec §12): the shared programs of src/store/tree, one transaction each.
  spawn = (fence: Fence, child: NewChild, opts: EnqueueOptions) =>
    this.core.program(() => tree.spawn(fence, child, opts.maxDepth(child.task.queue)));
  spawnMany = (fence: Fence, children: readonly NewChild[], opts: EnqueueOptions) =>
    this.core.program(() => tree.spawnMany(fence, children, (q) => opts.maxDepth(q)));
  waitTasks = (fence: Fence, members: readonly TaskId[], policy: WaitPolicy): Promise<WaitResult> =>
    this.core.program(() => tree.waitTasks(fence, members, policy));
  waitEvent = (fence: Fence, name: string, untilMs: number): Promise<EventWaitResult> =>
    this.core.program(() => tree.waitEvent(fence, name, eventStepKey(name), untilMs));
  signal = (name: string, payload: string) => this.core.program(() => tree.signal(name, payload));
  reconcile = (): Promise<TaskId[]> => this.core.program(() => tree.reconcile(null));
  abortScope = (scope: string, background: boolean): Promise<TaskId[]> =>
    this.core.program(() => tree.abortScope(scope, background));
  registerDefinitions = (defs: readonly DefinitionInfo[]): Promise<void> =>
    this.core.program(() => tree.registerDefinitions(defs));
  block = (fence: Fence, info: BlockedInfo): Promise<void> =>
    this.core.program(() => tree.block(fence, info));
  unblock = (names: readonly string[]): Promise<number> => this.core.program(() => tree.unblock(names));
  migrated = (fence: Fence, version: number, input: string, checkpoint: string | null): Promise<void> =>
    this.core.program(() => tree.migrated(fence, version, input, checkpoint));
  setCheckpoint = (fence: Fence, checkpoint: string, keep: string): Promise<void> =>
    this.core.program(() => tree.setCheckpoint(fence, checkpoint, keep));
  children = (id: TaskId): Promise<TaskRecord[]> => this.core.program(() => tree.children(id));
  subtree = (id: TaskId, limit: number): Promise<TaskRecord[]> =>
    this.core.program(() => tree.subtree(id, limit));
  scopeLive = (scope: string | null): Promise<number> => this.core.program(() => tree.scopeLive(scope));
  inspectRows = (limit: number): Promise<InspectRows> => this.core.program(() => tree.inspectRows(limit));
  waitMembers = (id: TaskId): Promise<TaskId[]> => this.core.program(() => tree.waitMembers(id));
  explainRows = (id: TaskId): Promise<ExplainRows | null> => this.core.program(() => tree.explainRows(id));
  markedAmong = (ids: readonly TaskId[]): Promise<TaskId[]> => this.core.program(() => tree.markedAmong(ids));
  // Flow control (spec §14.9–§14.12).
  setSeatLimit = (seat: string, limit: number | null): Promise<number> =>
    this.core.program(() => gates.setSeatLimit(seat, limit));
  seatLimits = () => this.core.program(() => gates.seatLimits());
  /** Where the next seat sweep starts (each pass covers a bounded number of seats). */
  #sweepFrom = "";
  maintainGates = async (limits: ClaimLimits): Promise<number> => {
    const r = await this.core.program(() => gates.maintainGates(limits, this.#sweepFrom));
    this.#sweepFrom = r.next;
    return r.woken;
  };
  pauseRate = (id: TaskId, ms: number, only: string | null): Promise<string[]> =>
    this.core.program(() => gates.pauseBuckets(id, ms, only));
  reportUsage = (id: TaskId, usage: Readonly<Record<string, number>>) =>
    this.core.program(() => gates.reportUsage(id, usage));
  upsertSchedule = (s: ScheduleSpec): Promise<ScheduleRow> =>
    this.core.program(() => sched.upsertSchedule(s));
  deleteSchedule = (name: string): Promise<boolean> => this.core.program(() => sched.deleteSchedule(name));
  listSchedules = (): Promise<ScheduleRow[]> => this.core.program(() => sched.listSchedules());
  dueSchedules = (limit: number) => this.core.program(() => sched.dueSchedules(limit));
  claimTick = (name: string, due: number, next: number, firing: number | null): Promise<boolean> =>
    this.core.program(() => sched.claimTick(name, due, next, firing));
  firedTick = (name: string, tick: number, taskId: TaskId): Promise<void> =>
    this.core.program(() => sched.firedTick(name, tick, taskId));
  subscribe = (onWake: () => void): Promise<() => Promise<void>> => subscribe(this.core, onWake);
  // Conversations (spec §17): the shared programs of src/store/conversations, one transaction each.
  readonly conversations = conversationOps((p) => this.core.program(p));
  // Breakers and the usage ledger (spec §18): the shared programs of src/store/breakers and usage.
  readonly breakers = breakerOps((p) => this.core.program(p));
  readonly usage = usageOps((p) => this.core.program(p));
  // The outbox (spec part 21): the shared programs of src/store/outbox.
  readonly outbox = new OutboxOps((p) => this.core.program(p));

  async close(): Promise<void> {
    if (this.core.closed) return;
    this.core.closed = true;
    for (const l of [...this.core.listeners]) await l.stop();
    if (this.core.ownPool) await this.pool.end();
  }
}
