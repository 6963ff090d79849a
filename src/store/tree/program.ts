/**
 * Task-tree operations are written once and run on both backends.
 *
 * A tree operation is a generator ("program") that yields the statements it
 * needs and receives their rows. The SQLite store drives it synchronously
 * inside one IMMEDIATE transaction; the PostgreSQL store drives it with
 * `await` inside one transaction. So the rules of spec §12 live in one place
 * (ops.ts), not in two copies of SQL that could drift apart.
 *
 * The SQL is written in the subset both engines share, with three tokens the
 * drivers rewrite:
 * - `{s}.` the schema prefix (PostgreSQL) or nothing (SQLite);
 * - `@ids(name)` a set of task ids bound from an array parameter;
 * - `@texts(name)` a set of strings bound from an array parameter;
 * - `@share` / `@update` row locks (`FOR SHARE` / `FOR UPDATE` on PostgreSQL,
 *   nothing on SQLite, where the IMMEDIATE transaction already serialises writers);
 *   `@skip` is `FOR UPDATE SKIP LOCKED` (nothing on SQLite).
 * `:now` is the transaction's clock on both (the injected Clock on SQLite,
 * the database clock on PostgreSQL).
 */
import type { EventKind, TaskId } from "../store.js";

export type Op =
  /** A statement; the driver returns its rows (use RETURNING to count changes). */
  | { op: "q"; sql: string; p: Record<string, unknown> }
  /** Add n to the queue's live counter (spec §2.7). */
  | { op: "bump"; queue: string; n: number }
  | { op: "event"; id: TaskId; kind: EventKind; attempt: number | null; detail: unknown }
  /** A task became terminal: release (completed) or cascade (anything else) its `needs` dependents (spec §6). */
  | { op: "ended"; id: TaskId; completed: boolean }
  /** A transaction-scoped lock on a string key (PostgreSQL advisory lock; SQLite: no-op). */
  | { op: "lock"; key: string }
  /** Due work may have appeared (PostgreSQL NOTIFY; SQLite: no-op). */
  | { op: "notify" }
  /** Live tasks of a queue, for admission; PostgreSQL also takes the queue's admission lock (spec §2.7). */
  | { op: "live"; queue: string };

export type Program<R> = Generator<Op, R, unknown>;

/** Runs a statement and returns its rows. */
export function* q<R = Record<string, unknown>>(
  sql: string,
  p: Record<string, unknown> = {},
): Generator<Op, R[], unknown> {
  return (yield { op: "q", sql, p }) as R[];
}

export function* one<R = Record<string, unknown>>(
  sql: string,
  p: Record<string, unknown> = {},
): Generator<Op, R | undefined, unknown> {
  const rows = (yield { op: "q", sql, p }) as R[];
  return rows[0];
}

/** Drives a program synchronously (SQLite, inside its transaction). */
export function runSync<R>(program: Program<R>, exec: (op: Op) => unknown): R {
  let step = program.next();
  while (!step.done) step = program.next(exec(step.value));
  return step.value;
}

/** Drives a program asynchronously (PostgreSQL, inside its transaction). */
export async function runAsync<R>(program: Program<R>, exec: (op: Op) => Promise<unknown>): Promise<R> {
  let step = program.next();
  while (!step.done) step = program.next(await exec(step.value));
  return step.value;
}

/** SQLite spelling of the shared SQL. */
export function sqliteSql(sql: string): string {
  return sql
    .replaceAll("{s}.", "")
    .replace(/@ids\((\w+)\)/g, "(SELECT value FROM json_each(:$1))")
    .replace(/@texts\((\w+)\)/g, "(SELECT value FROM json_each(:$1))")
    .replaceAll("@share", "")
    .replaceAll("@update", "")
    .replaceAll("@skip", "");
}

/** SQLite binding: id arrays become JSON text for json_each. */
export function sqliteParams(p: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(p)) out[k] = Array.isArray(v) ? JSON.stringify(v) : v;
  return out;
}

/** PostgreSQL spelling of the shared SQL (`{s}` stays for named.ts to fill in). */
export function pgSql(sql: string): string {
  return sql
    .replace(/@ids\((\w+)\)/g, "(SELECT unnest(CAST(:$1 AS bigint[])))")
    .replace(/@texts\((\w+)\)/g, "(SELECT unnest(CAST(:$1 AS text[])))")
    .replaceAll("@skip", "FOR UPDATE SKIP LOCKED")
    .replaceAll("@share", "FOR SHARE")
    .replaceAll("@update", "FOR UPDATE");
}
