import { fromJson, type StoredError } from "../core/json.js";
import type { Outcome, Status } from "../core/model.js";
import type {
  BlockedInfo,
  ClaimedTask,
  EventKind,
  JobStatus,
  ListFilter,
  QueueStats,
  RateCharge,
  StepRecord,
  TaskEvent,
  TaskRecord,
  WaitOn,
  WaitPolicy,
} from "./store.js";

/** A row of ratchet_tasks as the drivers return it (both backends use the same column names). */
export interface TaskRow {
  id: number;
  queue: string;
  name: string;
  version: number;
  input: string;
  status: Status;
  outcome: Outcome | null;
  result: string | null;
  error: string | null;
  priority: number;
  order_key: number;
  max_ms: number;
  attempts: number;
  max_attempts: number;
  epoch: number;
  run_after: number;
  wake_at: number | null;
  lease_until: number | null;
  locked_by: string | null;
  needs_pending: number;
  dependents: number;
  dedupe_key: string | null;
  job: string | null;
  abort_requested: number;
  progress: number | null;
  progress_note: string | null;
  created_at: number;
  updated_at: number;
  started_at: number | null;
  claimed_at: number | null;
  ended_at: number | null;
  owner_id: number | null;
  scope: string | null;
  background: number;
  detached: number;
  spawn_name: string | null;
  held_outcome: Outcome | null;
  wait_on: WaitOn | null;
  wait_policy: WaitPolicy | null;
  event_name: string | null;
  checkpoint: string | null;
  blocked: string | null;
  owns: number;
  watched: number;
  seat: string | null;
  rate: string | null;
  fair_key: string | null;
}

export function toRecord(r: TaskRow): TaskRecord {
  return {
    id: r.id,
    queue: r.queue,
    name: r.name,
    version: r.version,
    input: fromJson(r.input),
    status: r.status,
    outcome: r.outcome,
    result: fromJson(r.result),
    error: fromJson<StoredError | null>(r.error),
    priority: r.priority,
    maxMs: r.max_ms,
    attempts: r.attempts,
    epoch: r.epoch,
    runAfter: r.run_after,
    wakeAt: r.wake_at,
    leaseUntil: r.lease_until,
    lockedBy: r.locked_by,
    needsPending: r.needs_pending,
    dedupe: r.dedupe_key,
    job: r.job,
    abortRequested: r.abort_requested === 1,
    progress: r.progress,
    progressNote: r.progress_note,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    startedAt: r.started_at,
    claimedAt: r.claimed_at,
    endedAt: r.ended_at,
    ownerId: r.owner_id ?? null,
    scope: r.scope ?? null,
    background: r.background === 1,
    detached: r.detached === 1,
    spawnName: r.spawn_name ?? null,
    heldOutcome: r.held_outcome ?? null,
    waitOn: r.status === "waiting" ? (r.wait_on ?? null) : null,
    waitPolicy: r.status === "waiting" ? (r.wait_policy ?? null) : null,
    eventName: r.status === "waiting" && r.wait_on === "event" ? (r.event_name ?? null) : null,
    checkpoint: fromJson(r.checkpoint ?? null),
    blocked: r.blocked ? fromJson<BlockedInfo>(r.blocked) : null,
    seat: r.seat ?? null,
    rate: r.rate ? fromJson<RateCharge[]>(r.rate) : null,
    fairKey: r.fair_key ?? null,
  };
}

/** The columns a claim returns (spec §3.2), and the ones admission reads (spec §14.9). */
export const CLAIM_COLUMNS = [
  "id",
  "queue",
  "name",
  "version",
  "input",
  "status",
  "priority",
  "max_ms",
  "attempts",
  "epoch",
  "lease_until",
  "locked_by",
  "job",
  "abort_requested",
  "started_at",
  "claimed_at",
  "owner_id",
  "scope",
  "checkpoint",
  "seat",
  "rate",
  "order_key",
] as const;

export type ClaimRow = Pick<TaskRow, (typeof CLAIM_COLUMNS)[number]>;

/**
 * toClaimed of a raw (array) row of CLAIM_COLUMNS, in that order (see SqliteCore.sRaw), without the
 * intermediate ClaimRow: one object per claimed task instead of two (~200 bytes less garbage per
 * task in a drain's sampling heap profile).
 */
export function claimedFromRaw(a: readonly unknown[], reclaimed: boolean, fresh = false): ClaimedTask {
  return {
    id: a[0] as number,
    queue: a[1] as string,
    name: a[2] as string,
    version: a[3] as number,
    input: fromJson(a[4] as string),
    status: a[5] as ClaimedTask["status"],
    priority: a[6] as number,
    maxMs: a[7] as number,
    attempts: a[8] as number,
    epoch: a[9] as number,
    leaseUntil: a[10] as number | null,
    lockedBy: a[11] as string | null,
    job: a[12] as string | null,
    abortRequested: a[13] === 1,
    startedAt: a[14] as number | null,
    // A claim always sets it (spec §3.2).
    claimedAt: a[15] as number,
    ownerId: (a[16] as number | null) ?? null,
    scope: (a[17] as string | null) ?? null,
    checkpoint: fromJson((a[18] as string | null) ?? null),
    seat: (a[19] as string | null) ?? null,
    rate: a[20] ? fromJson<RateCharge[]>(a[20] as string) : null,
    reclaimed,
    fresh,
  };
}

export function toClaimed(r: ClaimRow, reclaimed: boolean, fresh = false): ClaimedTask {
  return {
    id: r.id,
    queue: r.queue,
    name: r.name,
    version: r.version,
    input: fromJson(r.input),
    status: r.status,
    priority: r.priority,
    maxMs: r.max_ms,
    attempts: r.attempts,
    epoch: r.epoch,
    leaseUntil: r.lease_until,
    lockedBy: r.locked_by,
    job: r.job,
    abortRequested: r.abort_requested === 1,
    startedAt: r.started_at,
    // A claim always sets it (spec §3.2).
    claimedAt: r.claimed_at as number,
    ownerId: r.owner_id ?? null,
    scope: r.scope ?? null,
    checkpoint: fromJson(r.checkpoint ?? null),
    seat: r.seat ?? null,
    rate: r.rate ? fromJson<RateCharge[]>(r.rate) : null,
    reclaimed,
    fresh,
  };
}

/** A row of ratchet_steps. */
export interface StepRow {
  task_id: number;
  name: string;
  result: string;
  attempt: number;
  created_at: number;
}

export function toStep(r: StepRow): StepRecord {
  return {
    taskId: r.task_id,
    name: r.name,
    result: fromJson(r.result),
    attempt: r.attempt,
    createdAt: r.created_at,
  };
}

/** A row of ratchet_events. */
export interface EventRow {
  task_id: number;
  at: number;
  kind: EventKind;
  attempt: number | null;
  detail: string | null;
}

export function toEvent(r: EventRow): TaskEvent {
  return { taskId: r.task_id, at: r.at, kind: r.kind, attempt: r.attempt, detail: fromJson(r.detail) };
}

/**
 * The WHERE clause and named parameters of `list` (spec §9.1), shared by both
 * backends (both bind `:name` parameters). Column names are fixed here; only
 * values are bound, never spliced.
 */
export function listQuery(table: string, f: ListFilter): { sql: string; params: Record<string, unknown> } {
  const where: string[] = [];
  const params: Record<string, unknown> = { limit: f.limit };
  const filters = { status: f.status, outcome: f.outcome, queue: f.queue, job: f.job, name: f.name } as const;
  for (const [col, value] of Object.entries(filters)) {
    if (value === undefined) continue;
    where.push(`${col} = :${col}`);
    params[col] = value;
  }
  if (f.before !== undefined) {
    where.push("id < :before");
    params.before = f.before;
  }
  const clause = where.length ? `WHERE ${where.join(" AND ")}` : "";
  return { sql: `SELECT * FROM ${table} ${clause} ORDER BY id DESC LIMIT :limit`, params };
}

export interface CountRow {
  queue?: string;
  status: Status;
  outcome: Outcome | null;
  n: number;
}

/** spec §9.1: counts per status and outcome; settled when no task is live. */
export function toJobStatus(job: string, rows: readonly CountRow[]): JobStatus {
  const out: JobStatus = { job, total: 0, byStatus: {}, byOutcome: {}, settled: true };
  for (const r of rows) {
    out.total += r.n;
    out.byStatus[r.status] = (out.byStatus[r.status] ?? 0) + r.n;
    if (r.outcome) out.byOutcome[r.outcome] = (out.byOutcome[r.outcome] ?? 0) + r.n;
    if (r.status !== "terminal") out.settled = false;
  }
  return out;
}

/** spec §9.2: counts per queue, status and outcome (rows ordered by queue). */
export function toQueueStats(rows: readonly CountRow[]): QueueStats[] {
  const byQueue = new Map<string, QueueStats>();
  for (const r of rows) {
    const name = r.queue ?? "";
    let q = byQueue.get(name);
    if (!q) {
      q = { queue: name, byStatus: {}, byOutcome: {} };
      byQueue.set(name, q);
    }
    q.byStatus[r.status] = (q.byStatus[r.status] ?? 0) + r.n;
    if (r.outcome) q.byOutcome[r.outcome] = (q.byOutcome[r.outcome] ?? 0) + r.n;
  }
  return [...byQueue.values()];
}
