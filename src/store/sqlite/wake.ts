/**
 * Wake-ups across processes on one SQLite file (spec §10.5): the counterpart of PostgreSQL's
 * LISTEN/NOTIFY (§13.6). Every commit appends to the file's WAL, so a watch on the WAL file (inotify
 * on Linux) hears another process's enqueue at once; `PRAGMA data_version`, which changes only
 * when another connection has committed, tells it apart from this connection's own commits. The
 * poll (spec §8.1) stays the fallback: a file system without watches, or a lost event, costs only
 * latency.
 */
import { type FSWatcher, watch } from "node:fs";
import type { SqliteCore } from "./core.js";

/** Calls `onWake` (at most once per turn of the event loop) when another connection has committed to `path`. */
export function watchCommits(c: SqliteCore, path: string, onWake: () => void): () => Promise<void> {
  const version = c.db.prepare("PRAGMA data_version").pluck();
  let seen = version.get() as number;
  let queued = false;
  const check = () => {
    queued = false;
    if (c.closed) return;
    let now: number;
    try {
      now = version.get() as number;
    } catch {
      return; // A failed read only means the poll finds the work.
    }
    if (now === seen) return;
    seen = now;
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
