/**
 * plainjob on SQLite through better-sqlite3 (plainjob declares no engines; its Node driver is
 * better-sqlite3, which stays on 12.x for Node 20).
 *
 * Settings: plainjob's defaults, which are its fast path: `defineQueue` sets WAL,
 * `synchronous = 1` (NORMAL) and `busy_timeout = 5000` itself; `add` is one INSERT in autocommit
 * (one commit), `addMany` one transaction for the batch. A plainjob worker runs one job at a time
 * (claim = one UPDATE ... RETURNING commit, completion = one more commit), and the README's way
 * to more throughput is more worker processes. Concurrency c = c `defineWorker` loops on one
 * connection of the worker process (the calls are synchronous, so they interleave rather than run
 * in parallel). While jobs remain, a plainjob worker loop never yields to the event loop's timers;
 * the drain's clock is read when the loops let go.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import {
  type Adapter,
  loadPeer,
  type Payload,
  type QueueEngine,
  type StoreRef,
  silentConsoleLogger,
  type Targets,
  type WorkerOptions,
} from "./adapter.js";

/**
 * An idle plainjob worker sleeps `pollIntervall` ms (default 1,000) between empty fetches; 20 ms is
 * Ratchet's `pollIntervalMs` here, so W3 (latency from an idle worker) compares like with like.
 */
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 10);

async function load() {
  const pj = await loadPeer("plainjob");
  const bs = await loadPeer("better-sqlite3");
  return { pj, Database: bs.default ?? bs };
}

async function adapter(t: Targets): Promise<Adapter> {
  const { pj, Database } = await load();
  let dir = "";
  let db: any;
  let queue: any;

  return {
    name: "plainjob",
    backend: "sqlite",
    durable: true,
    notes:
      "defaults (WAL, synchronous NORMAL, set by plainjob); add / addMany (delay option for W5); pollIntervall 20 ms (default 1 s); concurrency c = c defineWorker loops " +
      "on one connection in the worker process (plainjob's worker is sequential; its README scales with processes)",
    async setup() {
      dir = mkdtempSync(join(t.tmpDir, "bench-plainjob-"));
      db = new Database(join(dir, "queue.db"));
      queue = pj.defineQueue({ connection: pj.better(db), logger: silentConsoleLogger });
    },
    ref: () => ({ file: join(dir, "queue.db") }),
    async enqueueOne(p: Payload) {
      queue.add("noop", p);
    },
    async enqueueBatch(ps: Payload[]) {
      queue.addMany("noop", ps);
    },
    async enqueueDelayed(ps: Payload[], delayMs: number) {
      queue.addMany("noop", ps, { delay: delayMs });
    },
    async remaining() {
      return (
        queue.countJobs({ status: pj.JobStatus.Pending }) +
        queue.countJobs({ status: pj.JobStatus.Processing }) +
        queue.countJobs({ status: pj.JobStatus.Failed })
      );
    },
    async teardown() {
      try {
        queue?.close();
      } catch {}
      queue = undefined;
      db = undefined;
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** c `defineWorker` loops on one connection of its own to the file. */
async function startWorker(_t: Targets, ref: StoreRef, { concurrency, onJob }: WorkerOptions) {
  const { pj, Database } = await load();
  const queue = pj.defineQueue({
    connection: pj.better(new Database(ref.file)),
    logger: silentConsoleLogger,
  });
  const workers = Array.from({ length: concurrency }, () =>
    pj.defineWorker(
      "noop",
      (job: { data: string }) => {
        onJob(JSON.parse(job.data) as Payload);
      },
      { queue, logger: silentConsoleLogger, pollIntervall: POLL_MS },
    ),
  );
  const running = workers.map((w: any) => w.start());
  return {
    async stop() {
      await Promise.all(workers.map((w: any) => w.stop()));
      await Promise.allSettled(running);
      queue.close();
    },
  };
}

export const plainjob: QueueEngine = { adapter, startWorker };
