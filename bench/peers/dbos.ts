/**
 * DBOS Transact (@dbos-inc/dbos-sdk 5.x, engines node >= 20) for W4, durable steps, on PostgreSQL.
 *
 * One workflow of `steps` steps (`DBOS.runStep`, each checkpointed in the system database), the
 * way DBOS's README writes workflows (`DBOS.registerWorkflow` + `DBOS.runStep`). Each run gets a
 * fresh system database `bench_dbos_<random>` (CREATE DATABASE here, DBOS migrates it at launch,
 * DROP DATABASE ... WITH (FORCE) after). Workflows are started by direct calls, `inFlight` of
 * them at a time (the fastest way to run a DBOS workflow in-process: no queue polling); DBOS's
 * defaults otherwise (its system database pool, its serializer), log level "error".
 * DBOS is a process-wide singleton: each run launches it and shuts it down with
 * `deregister: true`, and registers a fresh workflow wrapper before the next launch.
 */
import { loadPeer, pgClient, rand, type StepsAdapter, type Targets, withDatabase } from "./adapter.js";

export async function dbosSteps(t: Targets): Promise<StepsAdapter> {
  const mod = await loadPeer("@dbos-inc/dbos-sdk");
  const DBOS = mod.DBOS;
  let database = "";
  let hook: (task: number, step: number) => void = () => {};
  let steps = 10;
  let wf: ((i: number) => Promise<number>) | undefined;

  return {
    name: "dbos",
    backend: "postgres",
    durable: true,
    notes:
      "5.x: DBOS.registerWorkflow + DBOS.runStep; workflows called directly, in-flight of them at a time; " +
      "fresh system database per run; DBOS's default pool; logLevel error",
    async setup() {
      database = `bench_dbos_${rand()}`;
      const admin = await pgClient(t.pgUrl);
      try {
        await admin.query(`CREATE DATABASE "${database}"`);
      } finally {
        await admin.end().catch(() => {});
      }
      wf = DBOS.registerWorkflow(
        async (i: number) => {
          let sum = 0;
          for (let s = 0; s < steps; s++) {
            sum += await DBOS.runStep(
              async () => {
                hook(i, s);
                return s;
              },
              { name: `s${s}` },
            );
          }
          return sum;
        },
        { name: "steps" },
      );
      DBOS.setConfig({
        name: "ratchet-bench",
        systemDatabaseUrl: withDatabase(t.pgUrl, database),
        logLevel: "error",
      });
      await DBOS.launch();
    },
    async runSteps({ tasks, steps: n, inFlight, onStep }) {
      steps = n;
      hook = onStep;
      let next = 0;
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: inFlight }, async () => {
          for (;;) {
            const i = next++;
            if (i >= tasks) return;
            await wf!(i);
          }
        }),
      );
      const ms = performance.now() - t0;
      hook = () => {};
      return ms;
    },
    async teardown() {
      await DBOS.shutdown({ deregister: true }).catch(() => {});
      wf = undefined;
      if (database) {
        const admin = await pgClient(t.pgUrl);
        await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`).catch(() => {});
        await admin.end().catch(() => {});
      }
    },
  };
}
