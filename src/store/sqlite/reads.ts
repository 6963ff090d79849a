import {
  type CountRow,
  type EventRow,
  listQuery,
  type StepRow,
  type TaskRow,
  toEvent,
  toJobStatus,
  toQueueStats,
  toRecord,
  toStep,
} from "../rows.js";
import type {
  EndedTask,
  JobStatus,
  ListFilter,
  QueueDepth,
  QueueStats,
  StepRecord,
  TaskEvent,
  TaskId,
  TaskRecord,
} from "../store.js";
import type { SqliteCore } from "./core.js";

export function get(c: SqliteCore, id: TaskId): TaskRecord | null {
  return c.read(() => {
    const r = c.s("SELECT * FROM ratchet_tasks WHERE id = ?").get(id) as TaskRow | undefined;
    return r ? toRecord(r) : null;
  });
}

export function needsOf(c: SqliteCore, id: TaskId): TaskId[] {
  return c.read(() =>
    (
      c.s("SELECT needs_id FROM ratchet_deps WHERE task_id = ? ORDER BY needs_id").all(id) as {
        needs_id: number;
      }[]
    ).map((r) => r.needs_id),
  );
}

export function steps(c: SqliteCore, id: TaskId): StepRecord[] {
  return c.read(() =>
    (c.s("SELECT * FROM ratchet_steps WHERE task_id = ? ORDER BY id").all(id) as StepRow[]).map(toStep),
  );
}

export function events(c: SqliteCore, id: TaskId): TaskEvent[] {
  return c.read(() =>
    (c.s("SELECT * FROM ratchet_events WHERE task_id = ? ORDER BY id").all(id) as EventRow[]).map(toEvent),
  );
}

export function list(c: SqliteCore, f: ListFilter): TaskRecord[] {
  const q = listQuery("ratchet_tasks", f);
  return c.read(() => (c.s(q.sql).all(q.params) as TaskRow[]).map(toRecord));
}

export function jobStatus(c: SqliteCore, job: string): JobStatus {
  return c.read(() =>
    toJobStatus(
      job,
      c
        .s("SELECT status, outcome, count(*) AS n FROM ratchet_tasks WHERE job = ? GROUP BY status, outcome")
        .all(job) as CountRow[],
    ),
  );
}

export function stats(c: SqliteCore): QueueStats[] {
  return c.read(() =>
    toQueueStats(
      c
        .s(
          "SELECT queue, status, outcome, count(*) AS n FROM ratchet_tasks GROUP BY queue, status, outcome ORDER BY queue",
        )
        .all() as CountRow[],
    ),
  );
}

/**
 * spec §9.5: the live counters admission keeps (spec §2.7), one row per queue that ever had a task;
 * a queue whose tasks all ended reads 0. stats() counts the table instead: on 20,000 ended tasks
 * ~7 ms a call (bench/README.md), which a poll of the depth pays again each time.
 */
export function depths(c: SqliteCore): QueueDepth[] {
  return c.read(
    () => c.s("SELECT name AS queue, live FROM ratchet_queues ORDER BY name").all() as QueueDepth[],
  );
}

/** spec §9.3: pending work is due now; otherwise the earliest timer or lease expiry. */
export function nextRunAt(c: SqliteCore): number | null {
  return c.read(() => {
    const pending = c.s("SELECT 1 FROM ratchet_tasks WHERE status = 'pending' LIMIT 1").get();
    if (pending) return c.now();
    const r = c
      .s(`SELECT min(t) AS t FROM (
          SELECT min(wake_at) AS t FROM ratchet_tasks WHERE status = 'waiting' AND wake_at IS NOT NULL
          UNION ALL SELECT min(lease_until) FROM ratchet_tasks WHERE status = 'running')`)
      .get() as {
      t: number | null;
    };
    return r.t;
  });
}

export function countReady(
  c: SqliteCore,
  queues: readonly string[],
  names: readonly string[],
  cap: number,
): number {
  if (names.length === 0 || queues.length === 0) return 0;
  return c.read(() => {
    const r = c
      .s(`SELECT count(*) AS n FROM (SELECT 1 FROM ratchet_tasks WHERE status = 'pending'
        AND queue IN (SELECT value FROM json_each(:queues)) AND name IN (SELECT value FROM json_each(:names)) LIMIT :cap)`)
      .get({ queues: JSON.stringify(queues), names: JSON.stringify(names), cap }) as { n: number };
    return r.n;
  });
}

/** The columns of an EndedTask, aliased to its field names: the rows need no mapping. */
const ENDED_COLUMNS = `id, queue, name, outcome, attempts, created_at AS "createdAt", run_after AS "runAfter",
  started_at AS "startedAt", claimed_at AS "claimedAt", ended_at AS "endedAt"`;

/** Terminal tasks by end time, newest first (the partial index ratchet_tasks_ended serves the order). */
export function recentlyEnded(c: SqliteCore, limit: number): EndedTask[] {
  return c.read(
    () =>
      c
        .s(`SELECT ${ENDED_COLUMNS}
          FROM ratchet_tasks WHERE status = 'terminal' AND ended_at IS NOT NULL
          ORDER BY ended_at DESC, id DESC LIMIT ?`)
        .all(limit) as EndedTask[],
  );
}
