/**
 * The Store contract: every operation Ratchet performs on storage, in one
 * place. Backends (sqlite/, later postgres/) implement it and pass the same
 * conformance suite (`@ratchet-engine/ratchet/testing`).
 *
 * Rules for implementers:
 * - Each method is one atomic transaction; on error nothing is changed and a
 *   RatchetError is thrown (raw driver errors are wrapped in StoreError).
 * - Stores apply decisions; they do not make policy (retry delays, cascade
 *   plans and fitting are decided in src/core and passed in).
 * - Time: callers pass durations, never instants (spec §11.1, SEM F.12). A
 *   store reads "now" from its own clock (SQLite: the injected Clock; a
 *   server database: its own clock).
 * - Holder writes take a `Fence`; there is no overload without one (spec §3.7).
 */
import type { StoredError } from "../core/json.js";
import type { Outcome, Status } from "../core/model.js";
import type { BreakerOps } from "./breakers/ops.js";
import type { ConversationOps } from "./conversations/types.js";
import type { FactInput, OutboxOps } from "./outbox/ops.js";
import type { ScheduleRow, ScheduleSpec } from "./schedules.js";
import type { StreamAppend, StreamAppendResult, StreamInfo, StreamRead } from "./streams/ops.js";
import type { UsageOps } from "./usage/ops.js";

export type TaskId = number;

/** Proof of holding a claim: the task, the claim's fencing token and the claim's time (spec §3.7). */
export interface Fence {
  readonly taskId: TaskId;
  readonly token: number;
  /**
   * The claim's `claimedAt`. A token alone can be issued twice when a claim is lost in a PostgreSQL
   * crash (its commit does not wait for the disk, spec §13.8); the claim after it has a later time.
   */
  readonly claimedAt: number;
  /**
   * "abort" for an invocation running the abort handler (spec §12.5): its
   * writes require the abort mark instead of being refused by it.
   */
  readonly mode?: "run" | "abort";
}

/** A fence's named parameters, for statements that test it with FENCE (each store's sql.ts, spec §3.7). */
export function fenceParams(f: Fence): { id: TaskId; token: number; claimed: number } {
  return { id: f.taskId, token: f.token, claimed: f.claimedAt };
}

/** A task row's fields a fence tests (spec §3.7). */
export interface FencedFields {
  status: string;
  epoch: number;
  claimed_at: number;
  abort_requested: number;
}

/** The row is still the fence's claim: running, with its token and its claim's time (spec §3.7). */
export function holds(row: FencedFields | undefined, f: Fence): row is FencedFields {
  return row?.status === "running" && row.epoch === f.token && row.claimed_at === f.claimedAt;
}

/** A refused write's row still held by the fence, but marked: the mark refused it (spec §3.7, §4.5). */
export function refusedForMark(row: FencedFields | undefined, f: Fence): boolean {
  return holds(row, f) && row.abort_requested === 1;
}

/** 1 for an abort-mode invocation: its writes need the mark that refuses a run-mode holder's (spec §12.5). */
export const markOf = (f: Fence): 0 | 1 => (f.mode === "abort" ? 1 : 0);

export interface TaskRecord {
  id: TaskId;
  queue: string;
  name: string;
  version: number;
  input: unknown;
  status: Status;
  outcome: Outcome | null;
  result: unknown;
  error: StoredError | null;
  priority: number;
  maxMs: number;
  attempts: number;
  /** Fencing token of the latest claim (0 before the first claim). */
  epoch: number;
  runAfter: number;
  wakeAt: number | null;
  leaseUntil: number | null;
  lockedBy: string | null;
  needsPending: number;
  dedupe: string | null;
  job: string | null;
  abortRequested: boolean;
  progress: number | null;
  progressNote: string | null;
  createdAt: number;
  updatedAt: number;
  startedAt: number | null;
  claimedAt: number | null;
  endedAt: number | null;
  // Task trees (spec §12).
  /** The task that spawned this one; null for a task enqueued from outside. */
  ownerId: TaskId | null;
  /** The ownership tree's scope: given at enqueue, inherited by children; null means the task's own id. */
  scope: string | null;
  background: boolean;
  /** This task or one of its owners is background: outside ordinary traversal from the scope (spec §12.2). */
  detached: boolean;
  spawnName: string | null;
  /** The outcome a `completing` task holds until its owned work drained (spec §12.4). */
  heldOutcome: Outcome | null;
  /** What a waiting task waits for beyond needs and timers. */
  waitOn: WaitOn | null;
  waitPolicy: WaitPolicy | null;
  eventName: string | null;
  /** Phase checkpoint (spec §12.8), replaced whole at each commit. */
  checkpoint: unknown;
  /** Why a worker could not run it (spec §12.9). */
  blocked: BlockedInfo | null;
  // Flow control (spec §14.9–§14.12).
  /** Concurrency group and key ("group" or "group\u001fkey"); null: no seat. */
  seat: string | null;
  /** Rate-limit buckets charged at each start. */
  rate: RateCharge[] | null;
  fairKey: string | null;
}

/** A charge of `cost` to a token bucket ("name" or "name\u001fkey"); `unit` names what reportUsage corrects. */
export interface RateCharge {
  bucket: string;
  cost: number;
  unit?: string;
}

/** Limits in the claimer's code (spec §14.9, §14.10): seat limit per group, bucket per rate-limit name. */
export interface ClaimLimits {
  seats: Readonly<Record<string, number>>;
  rates: Readonly<Record<string, { limit: number; periodMs: number; burst: number }>>;
}

/** Flow control of a new task (spec §14.9–§14.12). */
export interface Gates {
  seat: string | null;
  rate: RateCharge[] | null;
  /** Fair order within the queue: the key and the tag step (stepMs / weight). */
  fair: { key: string; stepMs: number } | null;
}

export type WaitOn = "tasks" | "event" | "drain" | "blocked" | "abort" | "seat" | "rate";
export type WaitPolicy = "allSettled" | "failFast";
export type BlockedReason = "missing_definition" | "too_old" | "migration_failed";
export interface BlockedInfo {
  reason: BlockedReason;
  error?: StoredError;
  /** The definition version that could not take the task. */
  version?: number;
}

/** A reference to a predecessor: an existing task, or another entry of the same batch. */
export type NeedRef = { id: TaskId } | { index: number } | { dedupe: string; queue: string };

export interface NewTask {
  name: string;
  version: number;
  queue: string;
  /** Serialised by toStorableJson. */
  input: string;
  priority: number;
  maxMs: number;
  /** The definition's retry.maxAttempts; a reclaim past it fails the task (spec §5.4). */
  maxAttempts: number;
  delayMs: number;
  dedupe: string | null;
  job: string | null;
  needs: NeedRef[];
  /** Ownership scope of a task enqueued from outside (spec §12.2); null: its own id. */
  scope?: string | null;
  /** Throttle or debounce key (spec §14.6–§14.7). */
  flow?: FlowKey | null;
  /** Seats, rate limits, fairness (spec §14.9–§14.12). */
  gates?: Gates | null;
}

export interface FlowKey {
  kind: "throttle" | "debounce";
  key: string;
  /** throttle: the period one task covers. */
  periodMs: number;
  /** debounce: the quiet time before the task starts, and the longest it may be pushed back. */
  delayMs: number;
  maxDelayMs: number;
}

/** A child created by a running task (spec §12.1). */
export interface NewChild {
  /** Unique per owner: a rerun of the owner finds the same child. */
  spawnName: string;
  background: boolean;
  task: NewTask;
}

export interface EnqueueOptions {
  /** Admission limit per queue (spec §2.7). */
  maxDepth(queue: string): number;
  /**
   * spec §8.8: a worker of this process with a free slot. A store that supports hand-off claims a
   * single new task for it in the enqueue's transaction when the task is first in line; a store
   * may ignore it.
   */
  handoff?: HandoffRequest;
}

/** Who a handed-off task is claimed for (spec §8.8): the fields of a ClaimRequest that apply. */
export interface HandoffRequest {
  workerId: string;
  queues: readonly string[];
  names: readonly string[];
  leaseGraceMs: number;
}

export interface Enqueued {
  id: TaskId;
  /** True when a live or completed task with the same (queue, dedupe) existed; nothing was written. */
  deduped: boolean;
  status: Status;
  /** spec §8.8: the task, claimed for the hand-off's worker in the enqueue's transaction. */
  claimed?: ClaimedTask;
}

/**
 * A prefetching worker's refill asks for a multiple of this many tasks (once it wants more than
 * this), so its claims come in a few sizes: a store may write the size in the statement's text
 * (PostgreSQL: a cached generic plan instead of planning the claim anew each time; claimFast in
 * postgres/sql.ts). The worker asks at most CLAIM_STEP − 1 fewer than it has room for, which its
 * next refill takes.
 */
export const CLAIM_STEP = 64;

/** Timers one claim statement promotes at most (spec §3.4: promotion runs in bounded batches). */
export const PROMOTE_BATCH = 1000;

export interface ClaimRequest {
  workerId: string;
  queues: readonly string[];
  /** Only tasks with these names are claimed (spec §3.6). */
  names: readonly string[];
  limit: number;
  leaseGraceMs: number;
  /** Seat and rate limits of the claimer's definitions (spec §14.9, §14.10). */
  limits?: ClaimLimits;
}

/**
 * What a worker needs of a task it just claimed, returned by the claim statement
 * itself (spec §3.2). Not the whole record: `RETURNING *` of the ~45 columns
 * and its mapping cost ~7 µs of a ~13 µs claim per task on SQLite (measured on
 * 20k rows), a quarter of a no-op drain's CPU. Read the record with get().
 */
export interface ClaimedTask
  extends Pick<
    TaskRecord,
    | "id"
    | "queue"
    | "name"
    | "version"
    | "input"
    | "status"
    | "priority"
    | "maxMs"
    | "attempts"
    | "epoch"
    | "leaseUntil"
    | "lockedBy"
    | "job"
    | "abortRequested"
    | "startedAt"
    | "ownerId"
    | "scope"
    | "checkpoint"
    | "seat"
    | "rate"
  > {
  /** The claim's time (the store's clock); every holder write is fenced by it too (spec §3.7). */
  claimedAt: number;
  /** True when this claim took over an expired lease (spec §3.3). */
  reclaimed: boolean;
  /**
   * True when the store saw, in the claim's transaction, that the task had never started before:
   * it has no stored steps (only a holder writes them, spec §4.2), so its first ctx call needs no
   * read of them. False when unknown.
   */
  fresh: boolean;
}

/**
 * How a claimed run ends. `facts` (spec §21.17, a task's opt-in events) are appended to the outbox
 * in the settlement's own transaction when it applies ("ok"), and not at all otherwise.
 */
export type Settlement = SettlementKind & { readonly facts?: readonly FactInput[] };

type SettlementKind =
  | { kind: "complete"; fence: Fence; result: string }
  /** `refund`: the attempt is given back (a rate limit is not the task's failure, spec §14.8). */
  | { kind: "retry"; fence: Fence; delayMs: number; error: StoredError; refund?: boolean }
  | { kind: "fail"; fence: Fence; outcome: "failed" | "faulted"; error: StoredError }
  | { kind: "sleep"; fence: Fence; step: string; delayMs: number }
  /**
   * The run ended because of an abort mark. `handler`: the definition has an
   * abort handler, so the task goes back to be claimed in abort mode once its
   * owned work drained (spec §12.5); otherwise it ends aborted.
   */
  | { kind: "aborted"; fence: Fence; error: StoredError | null; handler?: boolean }
  | { kind: "release"; fence: Fence };

/** ok: applied. lease_lost: the fence no longer holds. abort_marked: refused because the task has an abort mark. */
export type SettleResult = "ok" | "lease_lost" | "abort_marked";

export interface StepWrite {
  fence: Fence;
  name: string;
  /** Serialised by toStorableJson. */
  result: string;
}

export interface StepRecord {
  taskId: TaskId;
  name: string;
  result: unknown;
  attempt: number;
  createdAt: number;
}

export type EventKind =
  | "reclaimed"
  | "attempt_failed"
  | "failed"
  | "faulted"
  | "aborted"
  | "abort_requested"
  | "released"
  | "retried"
  | "lease_lost"
  | "held"
  | "orphaned"
  | "blocked"
  | "migrated"
  | "rate_limited";

export interface TaskEvent {
  taskId: TaskId;
  at: number;
  kind: EventKind;
  attempt: number | null;
  detail: unknown;
}

export interface ListFilter {
  status?: Status;
  outcome?: Outcome;
  queue?: string;
  job?: string;
  name?: string;
  /** Return tasks with id < before (newest first), for paging. */
  before?: TaskId;
  limit: number;
}

export interface JobStatus {
  job: string;
  total: number;
  byStatus: Partial<Record<Status, number>>;
  byOutcome: Partial<Record<Outcome, number>>;
  /** No live task is left (spec §9.1). A job with failures can be settled; it is never "done successfully". */
  settled: boolean;
}

export interface QueueStats {
  queue: string;
  byStatus: Partial<Record<Status, number>>;
  byOutcome: Partial<Record<Outcome, number>>;
}

/** A queue's live tasks: every status but terminal (spec §9.5). */
export interface QueueDepth {
  queue: string;
  live: number;
}

/**
 * aborted / orphaned: ended by this call. marked: the mark is durable and the
 * task ends later (it runs, drains owned work, or runs its abort handler).
 * terminal: it had already ended. `marked` lists every task this call marked
 * (the task and its cascade), so a process can signal its running invocations.
 */
export type AbortResult =
  | { state: "aborted" | "marked" | "orphaned"; marked?: TaskId[] }
  | { state: "terminal"; outcome: Outcome; marked?: TaskId[] };

/** waitTasks: either every member is terminal already, or the task now waits (its invocation ends). */
export type WaitResult = { state: "ready"; members: TaskRecord[] } | { state: "waiting" };

export type EventWaitResult =
  | { state: "signalled"; payload: unknown }
  | { state: "timeout" }
  | { state: "waiting" };

export interface DefinitionInfo {
  name: string;
  version: number;
  hasAbort: boolean;
}

/** What holds a task, for explain() (spec §14.5). Lists are bounded (100). */
export interface ExplainRows {
  task: TaskRecord;
  /** Pending tasks of the same queue that a claim takes first. */
  ahead: number;
  liveMembers: TaskId[];
  liveChildren: TaskId[];
  liveNeeds: TaskId[];
  /** The definition as some Ratchet instance registered it, or null. */
  definition: DefinitionInfo | null;
  /** The store's clock when this was read. */
  now: number;
  /** A task of a seat: who holds the seat now, and its run-time limit (spec §14.9). */
  seatHolders: TaskId[];
  seatOverride: number | null;
  /** The buckets the task is charged to, as stored (spec §14.10). */
  buckets: { bucket: string; level: number; pausedUntil: number; limit: number; periodMs: number }[];
  /** The `ctx.sleep` step the task's timer belongs to, or null when its timer is not a sleep (spec §14.5). */
  sleep: string | null;
}

export interface WaitEdge {
  waiter: TaskId;
  member: TaskId;
}

/** Raw material of inspect() (spec §12.10): live tasks, wait edges, and the registered definitions. */
export interface InspectRows {
  tasks: TaskRecord[];
  waits: WaitEdge[];
  definitions: DefinitionInfo[];
  /** More live tasks exist than `limit`. */
  truncated: boolean;
}

/**
 * A task that ended, with the times a latency metric needs (read by
 * `recentlyEnded`). `startedAt`/`claimedAt` are null for a task that never
 * ran (ended at enqueue as upstream_failed, or aborted before a claim).
 */
export interface EndedTask {
  id: TaskId;
  queue: string;
  name: string;
  outcome: Outcome;
  attempts: number;
  createdAt: number;
  runAfter: number;
  startedAt: number | null;
  claimedAt: number | null;
  endedAt: number;
}

export interface Store {
  /** Create or migrate the schema (spec §10.1). Safe when several processes open at once. */
  migrate(): Promise<void>;
  /** The schema version in the database (after migrate: the latest this code knows). */
  schemaVersion(): Promise<number>;
  now(): Promise<number>;

  enqueue(batch: readonly NewTask[], opts: EnqueueOptions): Promise<Enqueued[]>;

  /** Promotes due timers, then claims up to `limit` ready tasks (spec §3.1–§3.4). */
  claim(req: ClaimRequest): Promise<ClaimedTask[]>;
  /** Ready tasks, listed by the same predicate the claim uses (spec §3.1). */
  listReady(queue: string, limit: number): Promise<TaskRecord[]>;

  loadSteps(taskId: TaskId): Promise<Map<string, unknown>>;
  /** Commits one step result (spec §4.2). Throws LeaseLostError / AbortedError and writes nothing. */
  commitStep(fence: Fence, name: string, result: string): Promise<void>;
  /**
   * Commits step results of several invocations in one transaction, each
   * fenced on its own (spec §3.7, §4.2); results in item order. Lets the engine
   * group-commit the steps of concurrent tasks: one commit instead of one per step.
   */
  commitSteps(items: readonly StepWrite[]): Promise<SettleResult[]>;
  /** Extends the lease to now + maxMs + grace (spec §3.8). Throws LeaseLostError / AbortedError. */
  heartbeat(fence: Fence, maxMs: number, leaseGraceMs: number): Promise<void>;
  progress(fence: Fence, fraction: number, note: string | null): Promise<void>;
  /** Applies settlements in one transaction; each is fenced on its own. */
  settle(items: readonly Settlement[]): Promise<SettleResult[]>;
  /**
   * settle calls the engine may have in flight at once (spec §8.9); 1 when absent. Only for a store
   * whose calls run in transactions of their own, on connections of their own.
   */
  readonly settleLanes?: number;

  get(id: TaskId): Promise<TaskRecord | null>;
  needsOf(id: TaskId): Promise<TaskId[]>;
  steps(id: TaskId): Promise<StepRecord[]>;
  events(id: TaskId): Promise<TaskEvent[]>;
  list(filter: ListFilter): Promise<TaskRecord[]>;
  jobStatus(job: string): Promise<JobStatus>;
  stats(): Promise<QueueStats[]>;
  /**
   * Each queue's live tasks, by queue name, from the counters admission keeps (spec §2.7, §9.5): a
   * read of the counters, never of the tasks.
   */
  depths(): Promise<QueueDepth[]>;
  /** Earliest due timer or lease expiry (spec §9.3); null when none. */
  nextRunAt(): Promise<number | null>;
  /** Due, pending tasks whose names are in `names` (bounded count, for tick reports). */
  countReady(queues: readonly string[], names: readonly string[], cap: number): Promise<number>;

  retry(id: TaskId): Promise<TaskRecord>;
  abort(id: TaskId): Promise<AbortResult>;
  /** Deletes up to `limit` terminal tasks that ended before now − olderThanMs. Returns how many. */
  prune(olderThanMs: number, limit: number): Promise<number>;

  // ------------------------------------------------------ task trees (spec §12)

  /** Creates (or finds, by owner and spawn name) a child of the fenced, unmarked task. */
  spawn(fence: Fence, child: NewChild, opts: EnqueueOptions): Promise<{ id: TaskId; created: boolean }>;
  /**
   * Several spawns of one holder in one transaction, in order (spec §12.1): all or none; at most
   * MAX_SPAWN_BATCH children.
   */
  spawnMany(
    fence: Fence,
    children: readonly NewChild[],
    opts: EnqueueOptions,
  ): Promise<{ id: TaskId; created: boolean }[]>;
  /** Validates a wait (spec §12.3) and either returns the terminal members or parks the task. */
  waitTasks(fence: Fence, members: readonly TaskId[], policy: WaitPolicy): Promise<WaitResult>;
  /** Consumes a signal if sent, reports a passed deadline, or parks the task until either (spec §12.7). */
  waitEvent(fence: Fence, name: string, untilMs: number): Promise<EventWaitResult>;
  /** Sends a named signal; the first one per name is kept (later ones change nothing). */
  signal(name: string, payload: string): Promise<{ first: boolean; woken: number }>;
  /** Derives marks, finalizes holds, wakes waiters (spec §12.4–§12.6); ids newly marked. */
  reconcile(): Promise<TaskId[]>;
  /** Marks every live task of a scope (spec §12.5); returns the ids marked. */
  abortScope(scope: string, background: boolean): Promise<TaskId[]>;
  /** Records the definitions a Ratchet instance registered (missing code → orphaned on abort). */
  registerDefinitions(defs: readonly DefinitionInfo[]): Promise<void>;
  /** The fenced task cannot run under this code: park it as blocked (spec §12.9). */
  block(fence: Fence, info: BlockedInfo): Promise<void>;
  /** Wakes tasks blocked for these names (a definition was registered). */
  unblock(names: readonly string[]): Promise<number>;
  /** Stores a migrated input (and checkpoint) with the new version, fenced. */
  migrated(fence: Fence, version: number, input: string, checkpoint: string | null): Promise<void>;
  /** Replaces the phase checkpoint, fenced (spec §12.8), and drops turn-prefixed steps not starting with `keep`. */
  setCheckpoint(fence: Fence, checkpoint: string, keep: string): Promise<void>;
  /** The tasks `id` spawned, in id order (at most MAX_CHILDREN). */
  children(id: TaskId): Promise<TaskRecord[]>;
  /** The task and everything it owns, transitively, in id order (bounded). */
  subtree(id: TaskId, limit: number): Promise<TaskRecord[]>;
  /**
   * Live tasks of a scope that ordinary traversal reaches (background subtrees excluded); with
   * null, of every scope (spec §12.12).
   */
  scopeLive(scope: string | null): Promise<number>;
  inspectRows(limit: number): Promise<InspectRows>;
  waitMembers(id: TaskId): Promise<TaskId[]>;
  explainRows(id: TaskId): Promise<ExplainRows | null>;
  // Flow control (spec §14.9–§14.12).
  /** A run-time limit for a seat group or one "group\u001fkey"; null removes it. Returns tasks woken. */
  setSeatLimit(seat: string, limit: number | null): Promise<number>;
  seatLimits(): Promise<{ seat: string; limit: number }[]>;
  /** Maintenance: wake tasks parked on seats with free places; drop stale fairness tags. */
  maintainGates(limits: ClaimLimits): Promise<number>;
  /** A 429: pause the task's buckets (or those of one rate-limit name) for ms. Returns the buckets paused. */
  pauseRate(id: TaskId, ms: number, only: string | null): Promise<string[]>;
  /** Actual usage of a started task corrects the estimate its buckets were charged. */
  reportUsage(
    id: TaskId,
    usage: Readonly<Record<string, number>>,
  ): Promise<{ bucket: string; charged: number; actual: number }[]>;
  /** Which of these tasks carry an abort mark (a worker checks its running invocations). */
  markedAmong(ids: readonly TaskId[]): Promise<TaskId[]>;

  // ------------------------------------------------------ schedules (spec §14)

  upsertSchedule(s: ScheduleSpec): Promise<ScheduleRow>;
  deleteSchedule(name: string): Promise<boolean>;
  listSchedules(): Promise<ScheduleRow[]>;
  /** Due (or half-fired) schedules and the store's "now" they were judged by. */
  dueSchedules(limit: number): Promise<{ rows: ScheduleRow[]; now: number }>;
  claimTick(name: string, due: number, next: number, firing: number | null): Promise<boolean>;
  firedTick(name: string, tick: number, taskId: TaskId): Promise<void>;

  // ------------------------------------------------------ conversations (spec §17)

  /** Conversations, entries, state, submissions and the inbox: the programs of src/store/conversations. */
  readonly conversations: ConversationOps;

  // ------------------------------------------------ models: breakers and usage (spec §18)

  /** Circuit breakers per provider+model, shared by every worker: the programs of src/store/breakers. */
  readonly breakers: BreakerOps;
  /** The usage ledger: the programs of src/store/usage. */
  readonly usage: UsageOps;

  // ------------------------------------------------ the outbox (spec part 21)

  /** Facts, destinations and their cursors: the programs of src/store/outbox. */
  readonly outbox: OutboxOps;

  // ------------------------------------------------ durable output streams (spec §16)

  /** Appends batches of chunks, each fenced and length-checked on its own, in one transaction. */
  appendStreams(items: readonly StreamAppend[]): Promise<StreamAppendResult[]>;
  /** One stream's state, or null before its first commit. */
  streamInfo(taskId: TaskId, name: string): Promise<StreamInfo | null>;
  /** A task's streams, by name. */
  listStreams(taskId: TaskId): Promise<StreamInfo[]>;
  /** Committed chunks from an offset, with the stream's and the task's state (a bounded page). */
  readStream(taskId: TaskId, name: string, from: number): Promise<StreamRead>;

  // ------------------------------------------------------ observability

  /**
   * The `limit` terminal tasks that ended last, newest end first (ties by id,
   * descending). Read-only; served by the partial index on ended_at.
   */
  recentlyEnded(limit: number): Promise<EndedTask[]>;

  /**
   * Optional push wake-ups (PostgreSQL LISTEN/NOTIFY): onWake is called when
   * due work may have appeared. Returns an unsubscribe function. Polling stays
   * the fallback, so a lost notification only costs latency.
   */
  subscribe?(onWake: () => void): Promise<() => Promise<void>>;

  close(): Promise<void>;
}
