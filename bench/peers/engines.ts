/**
 * The engines of the side-by-side benchmark, by the key `--only` / `--skip` take: the driver
 * (compare.ts) and the worker processes (worker-proc.ts) load them from here, lazily, so that a
 * peer that is not installed only costs its own rows.
 */
import type { QueueEngine, StepsAdapter, Targets } from "./adapter.js";

export type Needs = "sqlite" | "postgres" | "redis";

/** Ratchet's adapter, with the store's modules that open() would import lazily (see preload). */
async function ratchet(kind: "sqlite" | "postgres", lookAhead = true): Promise<QueueEngine> {
  const m = await import("./ratchet.js");
  await m.preload(kind);
  if (kind === "sqlite") return lookAhead ? m.ratchetSqlite : m.ratchetSqliteP0;
  return lookAhead ? m.ratchetPg : m.ratchetPgP0;
}

export const QUEUE_ENGINES: Record<string, { needs: Needs; load: () => Promise<QueueEngine> }> = {
  "ratchet-sqlite": { needs: "sqlite", load: async () => ratchet("sqlite") },
  plainjob: { needs: "sqlite", load: async () => (await import("./plainjob.js")).plainjob },
  "ratchet-pg": { needs: "postgres", load: async () => ratchet("postgres") },
  // Ratchet at its own default, prefetch 0 (spec §8.7): beside the look-ahead of 500 the peers' presets get.
  "ratchet-sqlite-p0": { needs: "sqlite", load: async () => ratchet("sqlite", false) },
  "ratchet-pg-p0": { needs: "postgres", load: async () => ratchet("postgres", false) },
  "graphile-worker": {
    needs: "postgres",
    load: async () => (await import("./graphile-worker.js")).graphileWorker,
  },
  // At its own defaults (no preset), beside ratchet-pg-p0: each engine as it comes.
  "graphile-worker-defaults": {
    needs: "postgres",
    load: async () => (await import("./graphile-worker.js")).graphileWorkerDefaults,
  },
  "pg-boss": { needs: "postgres", load: async () => (await import("./pg-boss.js")).pgBoss },
  bullmq: { needs: "redis", load: async () => (await import("./bullmq.js")).bullmq },
  // Not peers: the least each store allows for W2 (floor.ts), the bound the targets are checked against.
  "floor-sqlite": { needs: "sqlite", load: async () => (await import("./floor.js")).floorSqlite },
  "floor-pg": { needs: "postgres", load: async () => (await import("./floor.js")).floorPg },
  "floor-lease-pg": { needs: "postgres", load: async () => (await import("./floor.js")).floorLeasePg },
};

export const STEPS_ENGINES: Record<string, { needs: Needs; make: (t: Targets) => Promise<StepsAdapter> }> = {
  "ratchet-sqlite": {
    needs: "sqlite",
    make: async (t) => (await import("./ratchet.js")).ratchetSteps("sqlite", t),
  },
  "ratchet-pg": {
    needs: "postgres",
    make: async (t) => (await import("./ratchet.js")).ratchetSteps("postgres", t),
  },
  "ratchet-pg-p0": {
    needs: "postgres",
    make: async (t) => (await import("./ratchet.js")).ratchetSteps("postgres", t, 0),
  },
  dbos: { needs: "postgres", make: async (t) => (await import("./dbos.js")).dbosSteps(t) },
};
