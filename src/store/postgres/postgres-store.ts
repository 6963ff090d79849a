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
   * Two settle transactions at once, each on a pool connection of its own (spec §8.9). With one, a
   * prefetching worker drained at the pace of its settlements: in an in-process drain of 60,000
   * no-ops at c16 with prefetch 500, the backlog bound held the claims back 60–77 times (about one
   * claim in two), each completion of ~340 tasks taking ~3.8 ms while the server had a core to
   * spare. Drains with two lanes (and the backlog of 1,500 that went with them) against one,
   * until every task had settled, eight alternating pairs (`node dist/bench/drain.js --store pg
   * --pairs 8 --base …`): 59,716 → 66,693 tasks/s, Node 8.1 → 7.8 and server 13.8 → 14.2 µs of
   * CPU per task. Two settlements of one process may now wait on each other's row of the queue
   * counter (one shard per store); they lock it in the same queue order, as two processes that drew
   * the same shard always could, and a deadlock is retried (core.tx).
   */
  readonly settleLanes = 2;
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
