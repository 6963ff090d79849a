import { fromJson, type StoredError } from "../core/json.js";
import type { Outcome, Status } from "../core/model.js";
import type { TaskRecord } from "./store.js";

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
  };
}
