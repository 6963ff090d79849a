/**
 * BullMQ on Redis, with ioredis.
 *
 * Not durable as configured: the Redis server here runs with its defaults for this machine
 * (`appendonly no`, and `save ""`, so no snapshots either; the driver prints what it finds), so an
 * acknowledged job lives only in memory until Redis persists it, if ever.
 *
 * Fast settings (docs.bullmq.io, "Going to production" / "Concurrency"): one Worker with
 * `concurrency` = the figure's concurrency; jobs added with `removeOnComplete: true` (the
 * recommended setting: completed jobs are not kept, which saves Redis memory and work);
 * `addBulk` for batches (one round trip, one MULTI); ioredis with `maxRetriesPerRequest: null`
 * as BullMQ requires for workers. Each run uses a unique queue name and obliterates it at
 * teardown.
 */
import {
  type Adapter,
  loadPeer,
  type Payload,
  type QueueEngine,
  rand,
  type StoreRef,
  type Targets,
  type WorkerOptions,
} from "./adapter.js";

async function adapter(t: Targets): Promise<Adapter> {
  const bq = await loadPeer("bullmq");
  const ioredis = await loadPeer("ioredis");
  const Redis = ioredis.default ?? ioredis.Redis;
  const conn = () => new Redis(t.redisUrl, { maxRetriesPerRequest: null });
  let name = "";
  let client: any;
  let queue: any;
  const jobOpts = { removeOnComplete: true, removeOnFail: false };

  return {
    name: "bullmq",
    backend: "redis",
    durable: false,
    notes:
      "Worker `concurrency` = the figure's concurrency; add / addBulk with removeOnComplete: true; " +
      "ioredis maxRetriesPerRequest null; Redis as found (appendonly no, no RDB snapshots): not durable",
    async setup() {
      name = `bench_${rand()}`;
      client = conn();
      queue = new bq.Queue(name, { connection: client });
      await queue.waitUntilReady();
    },
    async enqueueOne(p: Payload) {
      await queue.add("noop", p, jobOpts);
    },
    async enqueueBatch(ps: Payload[]) {
      await queue.addBulk(ps.map((p) => ({ name: "noop", data: p, opts: jobOpts })));
    },
    async enqueueDelayed(ps: Payload[], delayMs: number) {
      await queue.addBulk(ps.map((p) => ({ name: "noop", data: p, opts: { ...jobOpts, delay: delayMs } })));
    },
    ref: () => ({ name }),
    async remaining() {
      const counts = await queue.getJobCounts(
        "waiting",
        "active",
        "delayed",
        "prioritized",
        "paused",
        "waiting-children",
        "failed",
      );
      let n = 0;
      for (const v of Object.values(counts)) n += Number(v);
      return n;
    },
    async teardown() {
      await queue?.obliterate({ force: true }).catch(() => {});
      await queue?.close().catch(() => {});
      await client?.quit().catch(() => {});
      queue = undefined;
      client = undefined;
    },
  };
}

async function startWorker(t: Targets, ref: StoreRef, { concurrency, onJob }: WorkerOptions) {
  const bq = await loadPeer("bullmq");
  const ioredis = await loadPeer("ioredis");
  const Redis = ioredis.default ?? ioredis.Redis;
  const wconn = new Redis(t.redisUrl, { maxRetriesPerRequest: null });
  const worker = new bq.Worker(
    ref.name,
    async (job: { data: Payload }) => {
      onJob(job.data);
    },
    { connection: wconn, concurrency },
  );
  worker.on("error", (e: unknown) => process.stderr.write(`bullmq worker error: ${String(e)}\n`));
  await worker.waitUntilReady();
  return {
    async stop() {
      await worker.close();
      await wconn.quit().catch(() => {});
    },
  };
}

export const bullmq: QueueEngine = { adapter, startWorker };
