/**
 * Scenario 5, ambiguous commits: every Ratchet of the run opens its store
 * through a fault wrapper that, for a seeded share of the writes (enqueue,
 * claim, commitStep(s), settle, heartbeat), either commits and then throws
 * ("connection lost after commit": the caller cannot tell it landed) or throws
 * before calling through (nothing landed). Both throw a StoreError, as a real
 * driver's lost connection does after wrapping.
 *
 * The enqueuer retries a failed enqueue with the same dedupe key until it
 * resolves; workers (in this process, several Ratchet instances, each with its
 * own connection) run "chain" tasks. The checker then judges P1 (every
 * acknowledged task terminal, and one task per dedupe key), P2–P4
 * (chaos/checker.ts) and P7 (every error a caller saw is a RatchetError with a
 * code; the engine logged no error other than the injected faults; no
 * unhandled rejection).
 *
 * One body, two backends: `ambiguous` shares one SQLite file, `pgambiguous`
 * one fresh PostgreSQL schema (each instance its own pool; the schema is
 * dropped on every path). The checks are the same on both, plus SQLite's
 * integrity_check, which has no PostgreSQL counterpart.
 */
import { closeSync, openSync } from "node:fs";
import { systemClock } from "../../src/core/clock.js";
import { Ratchet, RatchetError, type Store, StoreError, type TaskRecord } from "../../src/index.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import {
  checkNoLostTask,
  checkSteps,
  integrityCheck,
  readStepRuns,
  readStore,
  type StoredTask,
} from "../checker.js";
import { makeChaosTasks } from "../fixtures/tasks.js";
import { CHAOS_PG_URL, dropChaosSchema, newChaosSchema, readPgStore, withAppName } from "../pgstore.js";
import { Sandbox, waitUntil } from "../process.js";
import { pause, Rng, type ScenarioConfig, type ScenarioResult, type Violation } from "../scenario.js";

export const FAULTED_WRITES = [
  "enqueue",
  "claim",
  "commitStep",
  "commitSteps",
  "settle",
  "heartbeat",
] as const;
type Write = (typeof FAULTED_WRITES)[number];

export type FaultCounts = Record<`${Write} ${"after" | "before"}` | "writes", number>;

const AFTER = "connection lost after commit (injected)";
const BEFORE = "connection lost before commit (injected)";

export function isInjected(err: unknown): boolean {
  return err instanceof StoreError && (err.message === AFTER || err.message === BEFORE);
}

export function emptyCounts(): FaultCounts {
  const c = { writes: 0 } as FaultCounts;
  for (const w of FAULTED_WRITES) {
    c[`${w} after`] = 0;
    c[`${w} before`] = 0;
  }
  return c;
}

/**
 * The Store, by delegation, with faults: for a share `rate` of the writes it
 * commits and then throws, for another `rate` it throws before calling
 * through. Reads pass through untouched. `counts` records each injection.
 */
export function faultyStore(inner: Store, rng: Rng, rate: number, counts: FaultCounts): Store {
  const writes = new Set<string>(FAULTED_WRITES);
  return new Proxy(inner, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target) as unknown;
      if (typeof v !== "function") return v;
      const fn = (v as (...a: unknown[]) => Promise<unknown>).bind(target);
      if (typeof prop !== "string" || !writes.has(prop)) return fn;
      return async (...args: unknown[]) => {
        counts.writes++;
        const roll = rng.next();
        if (roll < rate) {
          counts[`${prop as Write} before`]++;
          throw new StoreError(BEFORE);
        }
        const out = await fn(...args);
        if (roll < 2 * rate) {
          counts[`${prop as Write} after`]++;
          throw new StoreError(AFTER);
        }
        return out;
      };
    },
  });
}

interface Size {
  tasks: number;
  steps: number;
  workers: number;
  concurrency: number;
  rate: number;
  maxMs: number;
  graceMs: number;
  deadlineMs: number;
}

const FULL: Size = {
  tasks: 2_000,
  steps: 3,
  workers: 4,
  concurrency: 8,
  rate: 0.01,
  maxMs: 2_000,
  graceMs: 300,
  deadlineMs: 10 * 60_000,
};
const SHORT: Size = { ...FULL, tasks: 300, workers: 2, deadlineMs: 120_000 };

type Backend = "sqlite" | "postgres";

/** Where the run's tasks live, and the backend's own ways to connect, read back and check. */
interface Storage {
  /** "file PATH" or "schema NAME", for the progress line. */
  where: string;
  /** A new store connection (on PostgreSQL its own pool) for instance `i`. */
  connect(i: number): Store;
  /** Every task with its steps and events, read after the run through the engine. */
  read(): Promise<Map<number, StoredTask>>;
  /** SQLite's `PRAGMA integrity_check`; undefined on PostgreSQL, which has no counterpart. */
  integrity(): string | undefined;
  drop(): Promise<void>;
}

function sqliteStorage(sb: Sandbox): Storage {
  return {
    where: `file ${sb.db}`,
    connect: () => new SqliteStore({ path: sb.db, clock: systemClock }),
    read: () => readStore(sb.db),
    integrity: () => integrityCheck(sb.db),
    drop: async () => {},
  };
}

function pgStorage(): Storage {
  const schema = newChaosSchema();
  return {
    where: `schema ${schema}`,
    // The database clock (no clock given), as in production; the application name tells the pools apart.
    connect: (i) =>
      new PostgresStore({
        connectionString: withAppName(CHAOS_PG_URL, `${schema}-${i}`),
        schema,
        poolMax: 3,
      }),
    read: () => readPgStore(CHAOS_PG_URL, schema),
    integrity: () => undefined,
    drop: () => dropChaosSchema(CHAOS_PG_URL, schema),
  };
}

/** Scenario 5 on one SQLite file. */
export function ambiguous(c: ScenarioConfig): Promise<ScenarioResult> {
  return runAmbiguous(c, "sqlite");
}

/** Scenario 5 on one fresh PostgreSQL schema. */
export function pgambiguous(c: ScenarioConfig): Promise<ScenarioResult> {
  return runAmbiguous(c, "postgres");
}

async function runAmbiguous(c: ScenarioConfig, backend: Backend): Promise<ScenarioResult> {
  const t0 = Date.now();
  const name = backend === "sqlite" ? "ambiguous" : "pgambiguous";
  const size = { ...(c.full ? FULL : SHORT) };
  if (c.rounds !== undefined) size.tasks = c.rounds;
  const rng = new Rng(c.seed);
  const sb = new Sandbox();
  const storage = backend === "sqlite" ? sqliteStorage(sb) : pgStorage();
  const violations: Violation[] = [];
  const counts = emptyCounts();
  const engineErrors: string[] = [];
  const onUnhandled = (err: unknown) =>
    violations.push({ promise: "P7", detail: `unhandled rejection: ${String(err)}` });
  process.on("unhandledRejection", onUnhandled);
  const effectsFd = openSync(sb.effects, "a");
  const open: Ratchet[] = [];
  const openFaulty = async (i: number): Promise<Ratchet> => {
    // Each instance its own connection and its own seeded fault sequence; Ratchet.open migrates.
    const store = faultyStore(storage.connect(i), new Rng(c.seed * 31 + i), size.rate, counts);
    const r: Ratchet = await Ratchet.open({
      store,
      tasks: makeChaosTasks({
        effectsFd,
        effectsPath: sb.effects,
        db: backend === "sqlite" ? sb.db : "",
        maxMs: size.maxMs,
        store: () => store,
      }),
      leaseGraceMs: size.graceMs,
      pollIntervalMs: 50,
      maintenanceIntervalMs: 500,
      logger: {
        info() {},
        warn() {},
        error: (m, meta) => {
          if (!isInjected(meta)) engineErrors.push(`${m}: ${String(meta)}`);
        },
      },
    });
    open.push(r);
    return r;
  };
  try {
    const enq = await openFaulty(0);
    for (let i = 1; i <= size.workers; i++)
      await (await openFaulty(i)).start({ concurrency: size.concurrency });
    c.log(
      `${name}: ${size.workers} workers × ${size.concurrency}, ${size.tasks} tasks × ${size.steps} steps, ${storage.where}, dir ${sb.dir}`,
    );

    const acks: number[] = [];
    const idByKey = new Map<string, number>();
    let enqueueRetries = 0;
    const seen = new Map<string, string>();
    for (let i = 0; i < size.tasks; i++) {
      const key = `amb-${i}`;
      const input = { steps: size.steps, ms: Array.from({ length: size.steps }, () => rng.int(0, 5)) };
      for (let tries = 0; ; tries++) {
        try {
          const id = await enq.enqueue("chain", input, { dedupe: key });
          acks.push(id);
          idByKey.set(key, id);
          break;
        } catch (err) {
          if (!(err instanceof RatchetError) || typeof err.code !== "string")
            violations.push({ promise: "P7", detail: `enqueue threw a non-Ratchet error: ${String(err)}` });
          if (tries >= 50) {
            violations.push({
              promise: "harness",
              detail: `enqueue of ${key} failed 50 times: ${String(err)}`,
            });
            break;
          }
          enqueueRetries++;
        }
      }
      if (i % 50 === 49) await snapshot(enq, rng, acks, seen);
    }
    await waitUntil(
      "every acknowledged task terminal",
      async () => {
        await snapshot(enq, rng, acks, seen);
        let n = 0;
        for (const q of await enq.stats()) n += q.byStatus.terminal ?? 0;
        return n >= acks.length;
      },
      size.deadlineMs - (Date.now() - t0),
      200,
    ).catch((err: Error) => violations.push({ promise: "P1", detail: err.message }));
    for (const r of open.splice(0)) await r.close();
    // Faults of the last stop() are done; everything below reads the store without the wrapper.
    await pause(0);

    const store = await storage.read();
    violations.push(...checkNoLostTask(acks, store));
    violations.push(...checkDedupe(store, idByKey));
    const steps = checkSteps(
      store,
      readStepRuns(sb.effects),
      (t) => (t.name === "chain" ? size.steps : null),
      seen,
    );
    violations.push(...steps.violations);
    const integrity = storage.integrity();
    if (integrity !== undefined && integrity !== "ok")
      violations.push({ promise: "P1", detail: `integrity_check: ${integrity}` });
    for (const e of engineErrors.slice(0, 20))
      violations.push({ promise: "P7", detail: `the engine logged an error: ${e}` });
    const injected = Object.entries(counts).filter(([k]) => k !== "writes");
    return {
      name,
      seed: c.seed,
      ms: Date.now() - t0,
      violations,
      stats: {
        tasks: acks.length,
        writes: counts.writes,
        "faults after commit": injected.filter(([k]) => k.endsWith("after")).reduce((s, [, n]) => s + n, 0),
        "faults before commit": injected.filter(([k]) => k.endsWith("before")).reduce((s, [, n]) => s + n, 0),
        ...Object.fromEntries(injected.filter(([, n]) => n > 0)),
        "enqueue retries": enqueueRetries,
        // A claim that landed but whose answer was lost leaves its tasks running until the lease ends.
        "reclaims after a lost claim": [...store.values()].reduce(
          (n, t) => n + t.events.filter((e) => e.kind === "reclaimed").length,
          0,
        ),
        "steps committed": steps.stats.committedSteps,
        reruns: steps.stats.reruns,
        ...(integrity === undefined ? {} : { integrity }),
      },
    };
  } finally {
    process.off("unhandledRejection", onUnhandled);
    for (const r of open) await r.close().catch(() => {});
    closeSync(effectsFd);
    await sb.cleanup(c.keep);
    await storage.drop();
  }
}

/** P1 under retries: one task per dedupe key, and it is the one the caller was given. */
function checkDedupe(
  store: ReadonlyMap<number, { task: TaskRecord }>,
  idByKey: ReadonlyMap<string, number>,
): Violation[] {
  const byKey = new Map<string, number[]>();
  for (const { task } of store.values()) {
    if (task.dedupe === null) continue;
    byKey.set(task.dedupe, [...(byKey.get(task.dedupe) ?? []), task.id]);
  }
  const out: Violation[] = [];
  for (const [key, ids] of byKey)
    if (ids.length !== 1 || ids[0] !== idByKey.get(key))
      out.push({
        promise: "P1",
        detail: `dedupe key ${key}: tasks ${ids.join(",")} in the store, the caller was given ${idByKey.get(key)}`,
      });
  for (const key of idByKey.keys())
    if (!byKey.has(key)) out.push({ promise: "P1", detail: `dedupe key ${key}: no task in the store` });
  return out;
}

/** Records a few committed step results during the run, so P2 can see that they never change. */
async function snapshot(
  r: Ratchet,
  rng: Rng,
  acks: readonly number[],
  seen: Map<string, string>,
): Promise<void> {
  for (let i = 0; i < 10 && acks.length > 0; i++) {
    const id = acks[rng.int(0, acks.length - 1)]!;
    for (const s of await r.store.steps(id)) {
      const k = `${id}/${s.name}`;
      if (!seen.has(k)) seen.set(k, JSON.stringify(s.result));
    }
  }
}
