/**
 * The Store contract: every operation Ratchet performs on storage, in one
 * place. Backends (sqlite/, later postgres/) implement it and pass the same
 * conformance suite (`ratchet/testing`).
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

export type TaskId = number;

/** Proof of holding a claim: the task and the claim's fencing token. */
export interface Fence {
  readonly taskId: TaskId;
  readonly token: number;
}

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
}

export interface EnqueueOptions {
  /** Admission limit per queue (spec §2.7). */
  maxDepth(queue: string): number;
}

export interface Enqueued {
  id: TaskId;
  /** True when a live or completed task with the same (queue, dedupe) existed; nothing was written. */
  deduped: boolean;
  status: Status;
}

export interface ClaimRequest {
  workerId: string;
  queues: readonly string[];
  /** Only tasks with these names are claimed (spec §3.6). */
  names: readonly string[];
  limit: number;
  leaseGraceMs: number;
}

export interface ClaimedTask extends TaskRecord {
  /** True when this claim took over an expired lease (spec §3.3). */
  reclaimed: boolean;
}

export type Settlement =
  | { kind: "complete"; fence: Fence; result: string }
  | { kind: "retry"; fence: Fence; delayMs: number; error: StoredError }
  | { kind: "fail"; fence: Fence; outcome: "failed" | "faulted"; error: StoredError }
  | { kind: "sleep"; fence: Fence; step: string; delayMs: number }
  | { kind: "aborted"; fence: Fence; error: StoredError | null }
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
  | "lease_lost";

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

export type AbortResult = { state: "aborted" | "marked" } | { state: "terminal"; outcome: Outcome };

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

  get(id: TaskId): Promise<TaskRecord | null>;
  needsOf(id: TaskId): Promise<TaskId[]>;
  steps(id: TaskId): Promise<StepRecord[]>;
  events(id: TaskId): Promise<TaskEvent[]>;
  list(filter: ListFilter): Promise<TaskRecord[]>;
  jobStatus(job: string): Promise<JobStatus>;
  stats(): Promise<QueueStats[]>;
  /** Earliest due timer or lease expiry (spec §9.3); null when none. */
  nextRunAt(): Promise<number | null>;
  /** Due, pending tasks whose names are in `names` (bounded count, for tick reports). */
  countReady(queues: readonly string[], names: readonly string[], cap: number): Promise<number>;

  retry(id: TaskId): Promise<TaskRecord>;
  abort(id: TaskId): Promise<AbortResult>;
  /** Deletes up to `limit` terminal tasks that ended before now − olderThanMs. Returns how many. */
  prune(olderThanMs: number, limit: number): Promise<number>;

  /**
   * Optional push wake-ups (PostgreSQL LISTEN/NOTIFY): onWake is called when
   * due work may have appeared. Returns an unsubscribe function. Polling stays
   * the fallback, so a lost notification only costs latency.
   */
  subscribe?(onWake: () => void): Promise<() => Promise<void>>;

  close(): Promise<void>;
}
