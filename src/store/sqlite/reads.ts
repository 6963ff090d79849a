/** Read-only queries of the SQLite store: tasks, steps, events, listings and counts. */
import { fromJson } from "../../core/json.js";
import type { Outcome } from "../../core/model.js";
import { type TaskRow, toRecord } from "../rows.js";
import type {
  EventKind,
  JobStatus,
  ListFilter,
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
    (
      c.s("SELECT * FROM ratchet_steps WHERE task_id = ? ORDER BY id").all(id) as {
        task_id: number;
        name: string;
        result: string;
        attempt: number;
        created_at: number;
      }[]
    ).map((r) => ({
      taskId: r.task_id,
      name: r.name,
      result: fromJson(r.result),
      attempt: r.attempt,
      createdAt: r.created_at,
    })),
  );
}

export function events(c: SqliteCore, id: TaskId): TaskEvent[] {
  return c.read(() =>
    (
      c.s("SELECT * FROM ratchet_events WHERE task_id = ? ORDER BY id").all(id) as {
        task_id: number;
        at: number;
        kind: EventKind;
        attempt: number | null;
        detail: string | null;
      }[]
    ).map((r) => ({
      taskId: r.task_id,
      at: r.at,
      kind: r.kind,
      attempt: r.attempt,
      detail: fromJson(r.detail),
    })),
  );
}

export function list(c: SqliteCore, f: ListFilter): TaskRecord[] {
  return c.read(() => {
    const where: string[] = [];
    const p: Record<string, unknown> = { limit: f.limit };
    // Column names are fixed here; only values are bound.
    const filters = {
      status: f.status,
      outcome: f.outcome,
      queue: f.queue,
      job: f.job,
      name: f.name,
    } as const;
    for (const [col, value] of Object.entries(filters)) {
      if (value === undefined) continue;
      where.push(`${col} = :${col}`);
      p[col] = value;
    }
    if (f.before !== undefined) {
      where.push("id < :before");
      p.before = f.before;
    }
    const sql = `SELECT * FROM ratchet_tasks ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY id DESC LIMIT :limit`;
    return (c.s(sql).all(p) as TaskRow[]).map(toRecord);
  });
}

export function jobStatus(c: SqliteCore, job: string): JobStatus {
  return c.read(() => {
    const rows = c
      .s("SELECT status, outcome, count(*) AS n FROM ratchet_tasks WHERE job = ? GROUP BY status, outcome")
      .all(job) as {
      status: TaskRecord["status"];
      outcome: Outcome | null;
      n: number;
    }[];
    const out: JobStatus = { job, total: 0, byStatus: {}, byOutcome: {}, settled: true };
    for (const r of rows) {
      out.total += r.n;
      out.byStatus[r.status] = (out.byStatus[r.status] ?? 0) + r.n;
      if (r.outcome) out.byOutcome[r.outcome] = (out.byOutcome[r.outcome] ?? 0) + r.n;
      if (r.status !== "terminal") out.settled = false;
    }
    return out;
  });
}

export function stats(c: SqliteCore): QueueStats[] {
  return c.read(() => {
    const rows = c
      .s(
        "SELECT queue, status, outcome, count(*) AS n FROM ratchet_tasks GROUP BY queue, status, outcome ORDER BY queue",
      )
      .all() as {
      queue: string;
      status: TaskRecord["status"];
      outcome: Outcome | null;
      n: number;
    }[];
    const byQueue = new Map<string, QueueStats>();
    for (const r of rows) {
      let q = byQueue.get(r.queue);
      if (!q) {
        q = { queue: r.queue, byStatus: {}, byOutcome: {} };
        byQueue.set(r.queue, q);
      }
      q.byStatus[r.status] = (q.byStatus[r.status] ?? 0) + r.n;
      if (r.outcome) q.byOutcome[r.outcome] = (q.byOutcome[r.outcome] ?? 0) + r.n;
    }
    return [...byQueue.values()];
  });
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
