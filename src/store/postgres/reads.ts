/** Reads (spec §9): records, steps, events, lists, job status, stats, next run time. */
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
import type { PgCore } from "./core.js";
import { T } from "./sql.js";

export async function loadSteps(core: PgCore, taskId: TaskId): Promise<Map<string, unknown>> {
  return core.read(async (c) => {
    const rows = await core.run<{ name: string; result: string }>(
      c,
      "SELECT name, result FROM {s}.ratchet_steps WHERE task_id = :id",
      { id: taskId },
    );
    return new Map(rows.map((r) => [r.name, fromJson(r.result)]));
  });
}

export async function get(core: PgCore, id: TaskId): Promise<TaskRecord | null> {
  return core.read(async (c) => {
    const r = (await core.run<TaskRow>(c, `SELECT * FROM ${T} WHERE id = :id`, { id }))[0];
    return r ? toRecord(r) : null;
  });
}

export async function needsOf(core: PgCore, id: TaskId): Promise<TaskId[]> {
  return core.read(async (c) =>
    (
      await core.run<{ needs_id: number }>(
        c,
        "SELECT needs_id FROM {s}.ratchet_deps WHERE task_id = :id ORDER BY needs_id",
        { id },
      )
    ).map((r) => r.needs_id),
  );
}

export async function steps(core: PgCore, id: TaskId): Promise<StepRecord[]> {
  return core.read(async (c) =>
    (
      await core.run<{
        task_id: number;
        name: string;
        result: string;
        attempt: number;
        created_at: number;
      }>(c, "SELECT * FROM {s}.ratchet_steps WHERE task_id = :id ORDER BY id", { id })
    ).map((r) => ({
      taskId: r.task_id,
      name: r.name,
      result: fromJson(r.result),
      attempt: r.attempt,
      createdAt: r.created_at,
    })),
  );
}

export async function events(core: PgCore, id: TaskId): Promise<TaskEvent[]> {
  return core.read(async (c) =>
    (
      await core.run<{
        task_id: number;
        at: number;
        kind: EventKind;
        attempt: number | null;
        detail: string | null;
      }>(c, "SELECT * FROM {s}.ratchet_events WHERE task_id = :id ORDER BY id", { id })
    ).map((r) => ({
      taskId: r.task_id,
      at: r.at,
      kind: r.kind,
      attempt: r.attempt,
      detail: fromJson(r.detail),
    })),
  );
}

export async function list(core: PgCore, f: ListFilter): Promise<TaskRecord[]> {
  return core.read(async (c) => {
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
    const sql = `SELECT * FROM ${T} ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY id DESC LIMIT :limit`;
    return (await core.run<TaskRow>(c, sql, p)).map(toRecord);
  });
}

export async function jobStatus(core: PgCore, job: string): Promise<JobStatus> {
  return core.read(async (c) => {
    const rows = await core.run<{ status: TaskRecord["status"]; outcome: Outcome | null; n: number }>(
      c,
      `SELECT status, outcome, count(*)::bigint AS n FROM ${T} WHERE job = :job GROUP BY status, outcome`,
      { job },
    );
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

export async function stats(core: PgCore): Promise<QueueStats[]> {
  return core.read(async (c) => {
    const rows = await core.run<{
      queue: string;
      status: TaskRecord["status"];
      outcome: Outcome | null;
      n: number;
    }>(
      c,
      `SELECT queue, status, outcome, count(*)::bigint AS n FROM ${T} GROUP BY queue, status, outcome ORDER BY queue`,
    );
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

export async function nextRunAt(core: PgCore): Promise<number | null> {
  return core.read(async (c) => {
    const r = await core.run<{ t: number | null }>(
      c,
      `SELECT CASE WHEN EXISTS (SELECT 1 FROM ${T} WHERE status = 'pending') THEN :now
      ELSE least((SELECT min(wake_at) FROM ${T} WHERE status = 'waiting' AND wake_at IS NOT NULL),
                 (SELECT min(lease_until) FROM ${T} WHERE status = 'running')) END AS t`,
    );
    return r[0]?.t ?? null;
  });
}

export async function countReady(
  core: PgCore,
  queues: readonly string[],
  names: readonly string[],
  cap: number,
): Promise<number> {
  if (names.length === 0 || queues.length === 0) return 0;
  return core.read(async (c) => {
    const r = await core.run<{ n: number }>(
      c,
      `SELECT count(*)::bigint AS n FROM (SELECT 1 FROM ${T} WHERE status = 'pending'
      AND queue = ANY(:queues) AND name = ANY(:names) LIMIT :cap) x`,
      { queues, names, cap },
    );
    return r[0]!.n;
  });
}
