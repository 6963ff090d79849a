/**
 * WAL checkpoints off the committing thread (spec §10.4).
 *
 * In WAL mode every commit appends pages to the `-wal` file, and the pages go back into the database
 * file in a checkpoint. By default SQLite checkpoints inside the commit that takes the WAL past 1,000
 * pages: that commit copies them and fsyncs the WAL and the database (even with synchronous=NORMAL),
 * and better-sqlite3 is synchronous, so the whole process waited. W4 on SQLite (1,000 tasks × 10
 * steps, 16 in flight: ~700 commits) crossed that threshold two or three times per run. Measured
 * against the build before, two alternating sets of three runs each (`cd bench && RATCHET_DIST=…
 * node --expose-gc --import tsx peers/compare.ts --runs 3 --only ratchet-sqlite --figures
 * w4-steps,w2-c16,w3local`, AMD VM, 2026-12-03): W4 46.9–64.9k (median 50.3k) against 35.0–43.1k
 * (41.1k) steps/s; W3 with the worker in the enqueuer's process p99 0.8–0.9 against 1.3–2.1 ms, p50
 * 0.4–0.5 against 0.5–0.6; W2 c16 within the noise (25–40k either way).
 *
 * One thread per process (a worker thread, spawned with the first file-backed store and unref'd so
 * it never keeps the process alive; it costs the process ~10 MB of RSS: W6 on SQLite 78.4–79.9 against
 * 69.0–70.3 MB in the runs above, and an empty worker thread alone takes ~9 MB on Node 20) holds its own connection to each registered file and runs
 * PASSIVE checkpoints there: they copy what no reader still needs, take no lock a writer waits for,
 * and fsync off the main thread. Modes, per file:
 * - clean: nothing committed since the last checkpoint began. The first commit after that which
 *   changed a row (SqliteCore.tx; SQLite's total_changes() tells, read only while clean: an idle
 *   worker's claims that find nothing write nothing and wake nothing) sets the file's flag and posts
 *   one message: dirty. While dirty, a commit costs one Atomics load.
 * - dirty: the thread checkpoints DELAY_MS later, clearing the flag as it begins, so commits during
 *   the checkpoint make the file dirty again. At most one checkpoint per file per DELAY_MS.
 * The WAL therefore holds about DELAY_MS of writes. If the thread cannot start, dies or falls behind,
 * the committing connection still checkpoints itself once the WAL reaches BACKSTOP_PAGES (SQLite's
 * own wal_autocheckpoint): the WAL stays bounded whatever the thread does.
 *
 * Invariant: a checkpoint never changes what any connection reads; it only moves committed pages
 * from the WAL into the database file. Killing the process mid-checkpoint loses nothing (SQLite
 * replays the WAL on the next open).
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/** How long after the first commit since the last checkpoint the thread checkpoints. */
export const DELAY_MS = 100;
/** The committing connection's own wal_autocheckpoint while the thread serves it (pages, ~40 MB at 4 KB). */
export const BACKSTOP_PAGES = 10_000;
/** The longest close() waits for the thread to let go of a file before it closes its own connection. */
const RELEASE_WAIT_MS = 2_000;

/** A file-backed store's handle on the thread. */
export interface CheckpointLane {
  /** After a transaction committed: marks the file dirty if it changed rows (one message per clean → dirty). */
  touch(): void;
  /** Checkpoints the thread has completed on this file (for tests and diagnostics). */
  readonly done: number;
  /** A commit since the last checkpoint began changed rows: a checkpoint is coming. */
  readonly dirty: boolean;
  /** The thread lets go of the file (its connection closes); resolves when it has, or after RELEASE_WAIT_MS. */
  release(): Promise<void>;
}

type ToThread =
  | { kind: "add"; id: number; path: string; synchronous: string; flag: SharedArrayBuffer }
  | { kind: "dirty"; id: number }
  | { kind: "remove"; id: number };
type FromThread = { kind: "checkpointed"; id: number } | { kind: "removed"; id: number };

/**
 * The thread's code, CommonJS (an eval worker): a connection per file, a timer per dirty file.
 * Errors of a checkpoint (SQLITE_BUSY while another process checkpoints, a file removed under it)
 * skip that checkpoint; the backstop covers the rest.
 */
const THREAD = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const files = new Map();
parentPort.on("message", (m) => {
  if (m.kind === "add") {
    let db;
    try {
      db = new Database(m.path);
      db.pragma("synchronous = " + m.synchronous);
    } catch {
      return;
    }
    files.set(m.id, { db, flag: new Int32Array(m.flag), timer: undefined });
  } else if (m.kind === "dirty") {
    const f = files.get(m.id);
    if (f && f.timer === undefined)
      f.timer = setTimeout(() => {
        f.timer = undefined;
        Atomics.store(f.flag, 0, 0);
        try {
          f.db.pragma("wal_checkpoint(PASSIVE)");
        } catch {}
        parentPort.postMessage({ kind: "checkpointed", id: m.id });
      }, workerData.delayMs);
  } else if (m.kind === "remove") {
    const f = files.get(m.id);
    if (f) {
      clearTimeout(f.timer);
      try {
        f.db.close();
      } catch {}
      files.delete(m.id);
    }
    parentPort.postMessage({ kind: "removed", id: m.id });
  }
});
`;

let thread: Worker | undefined;
let broken = false;
let nextId = 1;
const lanes = new Map<number, { done: number; released?: () => void }>();

function theThread(): Worker | undefined {
  if (thread || broken) return thread;
  try {
    thread = new Worker(THREAD, {
      eval: true,
      workerData: { driver: createRequire(import.meta.url).resolve("better-sqlite3"), delayMs: DELAY_MS },
    });
  } catch {
    broken = true;
    return undefined;
  }
  thread.on("message", (m: FromThread) => {
    const lane = lanes.get(m.id);
    if (!lane) return;
    if (m.kind === "checkpointed") lane.done++;
    else lane.released?.();
  });
  // A thread that died leaves every file to its backstop; no store call fails for it.
  const gone = () => {
    thread = undefined;
    broken = true;
    for (const lane of lanes.values()) lane.released?.();
  };
  thread.on("error", gone);
  thread.on("exit", gone);
  // After the listeners: a 'message' listener refs the worker's port again.
  thread.unref();
  return thread;
}

/**
 * Registers a file with the thread, or returns undefined (the store keeps SQLite's own checkpoints
 * in its commits) when the thread cannot run. `changes`: the rows the store's connection has changed
 * since it opened (SQLite's total_changes()).
 */
export function checkpointLane(
  path: string,
  synchronous: string,
  changes: () => number,
): CheckpointLane | undefined {
  const t = theThread();
  if (!t) return undefined;
  const id = nextId++;
  const flagBuffer = new SharedArrayBuffer(4);
  const flag = new Int32Array(flagBuffer);
  const state: { done: number; released?: () => void } = { done: 0 };
  lanes.set(id, state);
  t.postMessage({ kind: "add", id, path, synchronous, flag: flagBuffer } satisfies ToThread);
  // What total_changes() was when the file last became dirty. Commits while dirty are not read (one
  // Atomics load each), so the first commit after the thread clears the flag also counts their rows
  // and may ask for one checkpoint more than needed; a commit that changed rows is never missed.
  // total_changes() counts rows, not schema: a commit of DDL alone (a migration) leaves the file
  // clean until the next row changes, the backstop, or the close (SQLite checkpoints on close).
  let seen = changes();
  return {
    touch() {
      if (flag[0] !== 0) return;
      const now = changes();
      if (now === seen) return;
      seen = now;
      Atomics.store(flag, 0, 1);
      thread?.postMessage({ kind: "dirty", id } satisfies ToThread);
    },
    get done() {
      return state.done;
    },
    get dirty() {
      return Atomics.load(flag, 0) !== 0;
    },
    async release() {
      const live = thread;
      if (!live) {
        lanes.delete(id);
        return;
      }
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        state.released = resolve;
        timer = setTimeout(resolve, RELEASE_WAIT_MS);
        live.postMessage({ kind: "remove", id } satisfies ToThread);
      });
      clearTimeout(timer);
      lanes.delete(id);
    },
  };
}
