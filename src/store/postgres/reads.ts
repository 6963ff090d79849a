/** Reads (spec §9): records, steps, events, lists, job status, stats, next run time. */
import { fromJson } from "../../core/json.js";
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
      await core.run<StepRow>(c, "SELECT * FROM {s}.ratchet_steps WHERE task_id = :id ORDER BY id", { id })
    ).map(toStep),
  );
}

export async function events(core: PgCore, id: TaskId): Promise<TaskEvent[]> {
  return core.read(async (c) =>
    (
      await core.run<EventRow>(c, "SELECT * FROM {s}.ratchet_events WHERE task_id = :id ORDER BY id", { id })
    ).map(toEvent),
  );
}

export async function list(core: PgCore, f: ListFilter): Promise<TaskRecord[]> {
  const q = listQuery(T, f);
  return core.read(async (c) => (await core.run<TaskRow>(c, q.sql, q.params)).map(toRecord));
}

export async function jobStatus(core: PgCore, job: string): Promise<JobStatus> {
  return core.read(async (c) =>
    toJobStatus(
      job,
      await core.run<CountRow>(
        c,
        `SELECT status, outcome, count(*)::bigint AS n FROM ${T} WHERE job = :job GROUP BY status, outcome`,
        { job },
      ),
    ),
  );
}

export async function stats(core: PgCore): Promise<QueueStats[]> {
  return core.read(async (c) =>
    toQueueStats(
      await core.run<CountRow>(
        c,
        `SELECT queue, status, outcome, count(*)::bigint AS n FROM ${T} GROUP BY queue, status, outcome ORDER BY queue`,
      ),
    ),
  );
}

/**
 * spec §9.5: the live counters admission keeps (spec §2.7), summed over their shards; byte order of
 * the names, as SQLite sorts them. stats() counts the table instead.
 */
export async function depths(core: PgCore): Promise<QueueDepth[]> {
  return core.read((c) =>
    core.run<QueueDepth>(
      c,
      `SELECT queue, sum(live)::bigint AS live FROM {s}.ratchet_queue_counts GROUP BY queue ORDER BY queue COLLATE "C"`,
    ),
  );
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

/** The columns of an EndedTask, aliased to its field names: the rows need no mapping. */
const ENDED_COLUMNS = `id, queue, name, outcome, attempts, created_at AS "createdAt", run_after AS "runAfter",
  started_at AS "startedAt", claimed_at AS "claimedAt", ended_at AS "endedAt"`;

/** Terminal tasks by end time, newest first (the partial index ratchet_tasks_ended serves the order). */
export async function recentlyEnded(core: PgCore, limit: number): Promise<EndedTask[]> {
  return core.read(
    async (c) =>
      await core.run<EndedTask>(
        c,
        `SELECT ${ENDED_COLUMNS}
        FROM ${T} WHERE status = 'terminal' AND ended_at IS NOT NULL
        ORDER BY ended_at DESC, id DESC LIMIT :limit`,
        { limit },
      ),
  );
}
