/**
 * Wake-ups across processes on one SQLite file (spec §10.5): the counterpart of PostgreSQL's
 * LISTEN/NOTIFY (§13.6). Every commit appends to the file's WAL, so a watch on the WAL file (inotify
 * on Linux) hears another process's enqueue at once. `PRAGMA data_version`, which changes only
 * when another connection has committed, tells it apart from this connection's own commits, and the
 * task table's AUTOINCREMENT counter (one row of sqlite_sequence, moved by every new task and by
 * nothing else) tells an enqueue apart from another worker's claims and settlements: waking every
 * idle worker at each of those would have each answer with an empty claim, a write transaction that
 * queues for the lock behind the busy ones. The poll (spec §8.1) stays the fallback: a file system
 * without watches, or a lost event, costs only latency.
 */
import { type FSWatcher, watch } from "node:fs";
import type { SqliteCore } from "./core.js";

/** Calls `onWake` (at most once per turn of the event loop) when another connection has enqueued a task to `path`. */
export function watchCommits(c: SqliteCore, path: string, onWake: () => void): () => Promise<void> {
  const version = c.db.prepare("PRAGMA data_version").pluck();
  const lastId = c.db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'ratchet_tasks'").pluck();
  const newest = () => (lastId.get() as number | undefined) ?? 0;
  let seen = version.get() as number;
  let top = newest();
  let queued = false;
  const check = () => {
    queued = false;
    if (c.closed) return;
    let id: number;
    try {
      const now = version.get() as number;
      if (now === seen) return;
      seen = now;
      id = newest();
    } catch {
      return; // A failed read only means the poll finds the work.
    }
    if (id === top) return;
    top = id;
    onWake();
  };
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(`${path}-wal`, { persistent: false }, () => {
      if (queued) return;
      queued = true;
      setImmediate(check);
    });
    watcher.on("error", () => watcher?.close());
  } catch {
    // No WAL yet, or no watches here (inotify's limit, a network file system): the poll remains.
    watcher = undefined;
  }
  return async () => watcher?.close();
}
