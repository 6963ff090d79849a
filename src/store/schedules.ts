/**
 * Schedule rows (spec §14.1–§14.4), as programs both stores run in one
 * transaction each (see tree/program.ts). The engine decides ticks (cron
 * arithmetic lives in src/engine/schedule.ts); these statements only make a
 * won tick exclusive: a conditional write on `next_at` that one worker wins.
 */
import { one, type Program, q } from "./tree/program.js";

const S = "{s}.ratchet_schedules";

export type MissedPolicy = "once" | "skip";

export interface ScheduleRow {
  name: string;
  cron: string;
  timezone: string | null;
  task: string;
  /** Serialised JSON. */
  input: string;
  queue: string | null;
  priority: number | null;
  missed: MissedPolicy;
  graceMs: number;
  nextAt: number;
  /** A tick won but not yet enqueued (a crash between the two is repaired). */
  firingAt: number | null;
  lastAt: number | null;
  lastTask: number | null;
  createdAt: number;
  updatedAt: number;
}

interface Raw {
  name: string;
  cron: string;
  timezone: string | null;
  task: string;
  input: string;
  queue: string | null;
  priority: number | null;
  missed: MissedPolicy;
  grace_ms: number;
  next_at: number;
  firing_at: number | null;
  last_at: number | null;
  last_task: number | null;
  created_at: number;
  updated_at: number;
}

function toRow(r: Raw): ScheduleRow {
  return {
    name: r.name,
    cron: r.cron,
    timezone: r.timezone,
    task: r.task,
    input: r.input,
    queue: r.queue,
    priority: r.priority,
    missed: r.missed,
    graceMs: Number(r.grace_ms),
    nextAt: Number(r.next_at),
    firingAt: r.firing_at === null ? null : Number(r.firing_at),
    lastAt: r.last_at === null ? null : Number(r.last_at),
    lastTask: r.last_task === null ? null : Number(r.last_task),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

export type ScheduleSpec = Omit<ScheduleRow, "firingAt" | "lastAt" | "lastTask" | "createdAt" | "updatedAt">;

/**
 * Creates or replaces a schedule. An unchanged cron and timezone keep the
 * pending tick (re-declaring a schedule at every start must not skip or
 * repeat one); a changed one takes `nextAt` from the caller.
 */
export function* upsertSchedule(s: ScheduleSpec): Program<ScheduleRow> {
  const p = {
    name: s.name,
    cron: s.cron,
    tz: s.timezone,
    task: s.task,
    input: s.input,
    queue: s.queue,
    priority: s.priority,
    missed: s.missed,
    grace: s.graceMs,
    next: s.nextAt,
  };
  const r = yield* one<Raw>(
    `INSERT INTO ${S} (name, cron, timezone, task, input, queue, priority, missed, grace_ms, next_at, created_at, updated_at)
     VALUES (:name, :cron, :tz, :task, :input, :queue, :priority, :missed, :grace, :next, :now, :now)
     ON CONFLICT (name) DO UPDATE SET
       next_at = CASE WHEN ${S}.cron = excluded.cron AND coalesce(${S}.timezone, '') = coalesce(excluded.timezone, '')
                      THEN ${S}.next_at ELSE excluded.next_at END,
       cron = excluded.cron, timezone = excluded.timezone, task = excluded.task, input = excluded.input,
       queue = excluded.queue, priority = excluded.priority, missed = excluded.missed, grace_ms = excluded.grace_ms,
       updated_at = excluded.updated_at
     RETURNING *`,
    p,
  );
  return toRow(r!);
}

export function* deleteSchedule(name: string): Program<boolean> {
  return (yield* q(`DELETE FROM ${S} WHERE name = :name RETURNING name`, { name })).length === 1;
}

export function* listSchedules(): Program<ScheduleRow[]> {
  return (yield* q<Raw>(`SELECT * FROM ${S} ORDER BY name`)).map(toRow);
}

/** Schedules with a due tick, or a won tick a crash left unenqueued (bounded). */
export function* dueSchedules(limit: number): Program<{ rows: ScheduleRow[]; now: number }> {
  const now = yield* one<{ t: number }>("SELECT :now AS t");
  const rows = yield* q<Raw>(
    `SELECT * FROM ${S} WHERE next_at <= :now OR firing_at IS NOT NULL ORDER BY next_at LIMIT :limit`,
    { limit },
  );
  return { rows: rows.map(toRow), now: Number(now!.t) };
}

/**
 * Wins tick `due` (spec §14.2): moves next_at on only if it still is `due`, so
 * exactly one of several racing workers succeeds. `firing`: the tick to
 * enqueue now (null when the policy skips it).
 */
export function* claimTick(name: string, due: number, next: number, firing: number | null): Program<boolean> {
  const r = yield* q(
    `UPDATE ${S} SET next_at = :next, firing_at = :firing, updated_at = :now
     WHERE name = :name AND next_at = :due AND firing_at IS NULL RETURNING name`,
    { name, due, next, firing },
  );
  return r.length === 1;
}

/** The won tick's task exists: clear the mark (only for that tick). */
export function* firedTick(name: string, tick: number, taskId: number): Program<void> {
  yield* q(
    `UPDATE ${S} SET firing_at = NULL, last_at = :tick, last_task = :task, updated_at = :now
     WHERE name = :name AND firing_at = :tick`,
    { name, tick, task: taskId },
  );
}
