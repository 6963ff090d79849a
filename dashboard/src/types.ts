/**
 * What the JSON API returns, as the dashboard reads it. The records are the
 * library's own types (imported as types only, so nothing of the server is
 * bundled); the stream's `task` event is the narrower view of
 * src/server/stream.ts.
 */
import type { TaskTree } from "../../src/engine/inspect.js";
import type { TaskDetails } from "../../src/engine/ratchet.js";
import type { QueueStats, StepRecord, TaskEvent, TaskRecord } from "../../src/store/store.js";

export type { QueueStats, StepRecord, TaskDetails, TaskEvent, TaskRecord, TaskTree };

export type Tree = TaskTree & { truncated?: boolean };

export interface TaskPage {
  tasks: TaskRecord[];
  nextCursor: string | null;
  scanned?: number;
}

export interface StatsEvent {
  at: number;
  queues: QueueStats[];
}

/** A `task` event of /api/stream: enough for a row or a progress bar. */
export type TaskView =
  | (Pick<
      TaskRecord,
      | "id"
      | "name"
      | "queue"
      | "status"
      | "outcome"
      | "attempts"
      | "progress"
      | "progressNote"
      | "abortRequested"
      | "updatedAt"
      | "endedAt"
    > & { error: { name: string; message: string } | null })
  | { id: number; found: false };

export interface Explanation {
  text: string;
}

export const STATUSES = ["pending", "running", "waiting", "completing", "terminal"] as const;
export const OUTCOMES = ["completed", "failed", "aborted", "upstream_failed", "orphaned", "faulted"] as const;
