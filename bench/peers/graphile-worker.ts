/**
 * graphile-worker 0.17.x on PostgreSQL (0.18 needs Node >= 22.18).
 *
 * Fast settings, from the project's performance page (worker.graphile.org/docs/performance, the
 * preset its own figures were taken with): `localQueue: { size: 500 }` (the pool locks and pulls
 * 500 jobs per fetch and hands them to its workers without a round trip each),
 * `completeJobBatchDelay: 0` and `failJobBatchDelay: 0` (completions that arrive in the same tick
 * are written in one statement), `maxPoolSize` = max(10, concurrency + 2). Batch enqueue is
 * `addJobs` (one call, one statement for the whole batch); single enqueue is `addJob`.
 * Completed jobs are deleted, so "remaining" is a count of `_private_jobs`.
 */
import {
  type Adapter,
  loadPeer,
  type Payload,
  pgClient,
  type QueueEngine,
  rand,
  type StoreRef,
  type Targets,
  type WorkerOptions,
} from "./adapter.js";

async function adapter(t: Targets, preset: boolean): Promise<Adapter> {
  const gw = await loadPeer("graphile-worker");
  const silent = new gw.Logger(() => () => {});
  let schema = "";
  let utils: any;
  let admin: any;

  return {
    name: preset ? "graphile-worker" : "graphile-worker (defaults)",
    backend: "postgres",
    durable: true,
    notes:
      "0.17: addJob / addJobs; worker `concurrency` = the figure's concurrency, maxPoolSize max(10, c+2), " +
      (preset
        ? "preset localQueue.size 500, completeJobBatchDelay 0, failJobBatchDelay 0 (the settings of its own performance page); "
        : "no preset (its defaults: no local queue, completions not batched); ") +
      "pollInterval default (2 s; jobs arrive by LISTEN/NOTIFY or are already queued)",
    async setup() {
      schema = `bench_gw_${rand()}`;
      admin = await pgClient(t.pgUrl);
      utils = await gw.makeWorkerUtils({ connectionString: t.pgUrl, schema, logger: silent });
      await utils.migrate();
    },
    async enqueueOne(p: Payload) {
      await utils.addJob("noop", p);
    },
    async enqueueBatch(ps: Payload[]) {
      await utils.addJobs(ps.map((p) => ({ identifier: "noop", payload: p })));
    },
    async enqueueDelayed(ps: Payload[], delayMs: number) {
      const runAt = new Date(Date.now() + delayMs);
      await utils.addJobs(ps.map((p) => ({ identifier: "noop", payload: p, runAt })));
    },
    ref: () => ({ schema }),
    async remaining() {
      const r = await admin.query(`SELECT count(*)::int AS n FROM "${schema}"._private_jobs`);
      return r.rows[0].n as number;
    },
    async teardown() {
      await utils?.release().catch(() => {});
      await admin?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
      await admin?.end().catch(() => {});
      utils = undefined;
      admin = undefined;
    },
  };
}

/**
 * `preset`: the performance page's settings above; without, graphile-worker's own defaults (no local
 * queue: each worker fetches one job per round trip; completions written as they come), the
 * counterpart of Ratchet at its default prefetch 0 (the ratchet-*-p0 engines).
 */
const startWorker =
  (preset: boolean) =>
  async (t: Targets, ref: StoreRef, { concurrency, onJob }: WorkerOptions) => {
    const gw = await loadPeer("graphile-worker");
    const runner = await gw.run({
      connectionString: t.pgUrl,
      schema: ref.schema,
      concurrency,
      maxPoolSize: Math.max(10, concurrency + 2),
      noHandleSignals: true,
      logger: new gw.Logger(() => () => {}),
      taskList: {
        noop: async (payload: Payload) => {
          onJob(payload);
        },
      },
      ...(preset
        ? {
            preset: {
              worker: {
                localQueue: { size: 500 },
                completeJobBatchDelay: 0,
                failJobBatchDelay: 0,
              },
            },
          }
        : {}),
    });
    return {
      async stop() {
        await runner.stop();
      },
    };
  };

export const graphileWorker: QueueEngine = {
  adapter: (t) => adapter(t, true),
  startWorker: startWorker(true),
};
/** graphile-worker at its own defaults (no preset), beside Ratchet at its own (ratchet-pg-p0). */
export const graphileWorkerDefaults: QueueEngine = {
  adapter: (t) => adapter(t, false),
  startWorker: startWorker(false),
};
