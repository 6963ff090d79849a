/**
 * pg-boss 10.x on PostgreSQL.
 *
 * pg-boss 10 has no per-worker concurrency option (v10 removed teamSize); a worker is one
 * fetch loop, and more loops are more `work()` calls. Its documented lever for throughput is
 * `batchSize`: one fetch claims that many jobs, the handler gets them as an array, and they are
 * completed in one statement when the handler resolves. A loop polls at most every
 * `pollingIntervalSeconds` (0.5 s is the minimum pg-boss accepts) even when the last fetch
 * was full, so a loop drains at most batchSize jobs per 0.5 s: batchSize is what makes
 * it fast. Here concurrency c = c `work()` loops, each with batchSize BATCH (below); the
 * handler runs its batch's jobs one after another. Single enqueue is `send`, batch is `insert`
 * (one statement). Maintenance (`supervise`) and cron (`schedule`) are off: they are timers that
 * do nothing within a run this short.
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

export const PGBOSS_BATCH = Number(process.env.BENCH_PGBOSS_BATCH ?? 500);
const QUEUE = "noop";

async function adapter(t: Targets): Promise<Adapter> {
  const mod = await loadPeer("pg-boss");
  const PgBoss = mod.default ?? mod;
  let boss: any;
  let schema = "";
  let admin: any;

  return {
    name: "pg-boss",
    backend: "postgres",
    durable: true,
    notes:
      `10.x: send / insert; concurrency c = c work() loops with batchSize ${PGBOSS_BATCH}, ` +
      "pollingIntervalSeconds 0.5 (the minimum); supervise and schedule off; default pool (max 10)",
    async setup() {
      schema = `bench_pgb_${rand()}`;
      boss = new PgBoss({
        connectionString: t.pgUrl,
        schema,
        supervise: false,
        schedule: false,
        migrate: true,
      });
      boss.on("error", (e: unknown) => process.stderr.write(`pg-boss error: ${String(e)}\n`));
      await boss.start();
      await boss.createQueue(QUEUE);
      admin = await pgClient(t.pgUrl);
    },
    async enqueueOne(p: Payload) {
      await boss.send(QUEUE, p);
    },
    async enqueueBatch(ps: Payload[]) {
      await boss.insert(ps.map((p) => ({ name: QUEUE, data: p })));
    },
    async enqueueDelayed(ps: Payload[], delayMs: number) {
      const startAfter = new Date(Date.now() + delayMs);
      await boss.insert(ps.map((p) => ({ name: QUEUE, data: p, startAfter })));
    },
    ref: () => ({ schema }),
    async remaining() {
      // created, retry, active and failed: everything but completed (and cancelled, never used here).
      const r = await admin.query(
        `SELECT count(*)::int AS n FROM "${schema}".job WHERE name = $1 AND state <> 'completed'`,
        [QUEUE],
      );
      return r.rows[0].n as number;
    },
    async teardown() {
      await boss?.stop({ graceful: false, wait: true, close: true }).catch(() => {});
      await admin?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
      await admin?.end().catch(() => {});
      boss = undefined;
      admin = undefined;
    },
  };
}

/**
 * A PgBoss instance of its own on the run's schema (already migrated by the driver), started with
 * the same settings, and c work() loops.
 */
async function startWorker(t: Targets, ref: StoreRef, { concurrency, onJob }: WorkerOptions) {
  const mod = await loadPeer("pg-boss");
  const PgBoss = mod.default ?? mod;
  const boss = new PgBoss({
    connectionString: t.pgUrl,
    schema: ref.schema,
    supervise: false,
    schedule: false,
    migrate: false,
  });
  boss.on("error", (e: unknown) => process.stderr.write(`pg-boss error: ${String(e)}\n`));
  await boss.start();
  for (let i = 0; i < concurrency; i++) {
    await boss.work(
      QUEUE,
      { batchSize: PGBOSS_BATCH, pollingIntervalSeconds: 0.5 },
      async (jobs: { data: Payload }[]) => {
        for (const j of jobs) onJob(j.data);
      },
    );
  }
  return {
    async stop() {
      await boss.offWork(QUEUE);
      await boss.stop({ graceful: true, wait: true, close: true });
    },
  };
}

export const pgBoss: QueueEngine = { adapter, startWorker };
