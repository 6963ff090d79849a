/**
 * Ratchet itself, through the same interface as the peers, so that one run of compare.ts gives
 * pair-by-pair ratios on the same machine (issue 6). Loaded from the build (dist/, which
 * `npm run bench:peers` makes first), like the peers' own JavaScript: from src/ under tsx, a worker
 * process carried ~30 MB more RSS (the transpiled sources), which is the loader's, not Ratchet's.
 *
 * Settings: those of bench/run.ts and bench/pg.ts (Ratchet's own figures): `pollIntervalMs` 20,
 * `silentLogger`; SQLite with WAL and `synchronous` NORMAL (Ratchet's default, the same as
 * plainjob's); PostgreSQL with a fresh schema per run and a pool of 10 (pg's default, as
 * graphile-worker's and pg-boss's). Single enqueue is `enqueue`, batch is `enqueueMany`, the worker
 * is `start({ concurrency })` of a Ratchet instance of its own (in the worker process), or, for the
 * same-process latency figure, of the driver's instance.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type Adapter,
  type Payload,
  pgClient,
  type QueueEngine,
  rand,
  type StepsAdapter,
  type StoreRef,
  type Targets,
  type WorkerOptions,
} from "./adapter.js";

// The types come from the source; the code from the build (a path in a variable, so that the
// typecheck of a fresh clone, without dist/, does not need it). RATCHET_DIST=/abs/path/dist measures
// another build side by side with this one (a worktree of the commit before a change).
const DIST = process.env.RATCHET_DIST
  ? new URL(`file://${process.env.RATCHET_DIST}/src/index.js`)
  : new URL("../../dist/src/index.js", import.meta.url);
if (!existsSync(fileURLToPath(DIST)))
  throw new Error(`${fileURLToPath(DIST)} is missing: run \`npm run build\` at the root first`);
const { defineTask, Ratchet, silentLogger }: typeof import("../../src/index.js") = await import(DIST.href);
type Ratchet = import("../../src/index.js").Ratchet;

/**
 * Loads the store's modules, which `Ratchet.open` imports lazily (a SQLite user never loads pg), so
 * that a worker process has them before its clock starts: the harness times each worker's
 * connection and start-up, not its module loading, and every peer's modules are loaded with its
 * adapter. Without this, Ratchet's PostgreSQL workers loaded their own copy of pg and the store's
 * modules inside the timed drain: 36–48 ms on 2026-12-03's VM (`import()` of
 * dist/src/store/postgres/postgres-store.js after the harness's own pg, five fresh processes), about
 * a twentieth of a W2 c16 drain and a seventh of a W5 one. A user's fresh worker pays it in open().
 */
export async function preload(kind: Kind): Promise<void> {
  await import(
    new URL(kind === "sqlite" ? "store/sqlite/sqlite-store.js" : "store/postgres/postgres-store.js", DIST)
      .href
  );
}

const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 10);
const POOL = 10;
/**
 * Tasks a worker claims ahead of its free slots (spec §8.7): 500, the size of graphile-worker's
 * `localQueue` in its own performance settings, which does the same. BENCH_RATCHET_PREFETCH=0
 * measures Ratchet's default (claims of the free slots only).
 */
export const PREFETCH = Number(process.env.BENCH_RATCHET_PREFETCH ?? 500);
/** The `-p0` engines: Ratchet at its own default, claims of the free slots only (no look-ahead). */
const DEFAULT_PREFETCH = 0;

const hooks: {
  onJob: (p: Payload) => void;
  onStep: (task: number, step: number) => void;
  steps: number;
} = { onJob: () => {}, onStep: () => {}, steps: 10 };

const noop = defineTask({
  name: "noop",
  run: (_ctx, input: Payload) => {
    hooks.onJob(input);
    return null;
  },
});

const stepsTask = defineTask({
  name: "steps",
  async run(ctx, input: { i: number }) {
    let sum = 0;
    for (let s = 0; s < hooks.steps; s++) {
      sum += await ctx.step(`s${s}`, () => {
        hooks.onStep(input.i, s);
        return s;
      });
    }
    return sum;
  },
});

type Kind = "sqlite" | "postgres";

/** A Ratchet on the run's file or schema, with the settings above; the driver's and each worker's. */
function openRatchet(t: Targets, ref: StoreRef): Promise<Ratchet> {
  // maxDepth: W5 holds 1,000,002 live tasks in one queue; the default bound is 1,000,000 (spec §2.7).
  const common = {
    tasks: [noop, stepsTask],
    logger: silentLogger,
    pollIntervalMs: POLL_MS,
    maxDepth: 2_000_000,
  };
  return ref.file
    ? Ratchet.open({ store: `sqlite:${ref.file}`, synchronous: "NORMAL", ...common })
    : Ratchet.open({ store: t.pgUrl, postgres: { schema: ref.schema!, poolMax: POOL }, ...common });
}

function ratchetBase(kind: Kind, t: Targets) {
  let r: Ratchet | undefined;
  let dir = "";
  let schema = "";
  const open = async () => {
    if (kind === "sqlite") {
      dir = mkdtempSync(join(t.tmpDir, "bench-ratchet-"));
      r = await openRatchet(t, { file: join(dir, "bench.db") });
    } else {
      schema = `bench_rt_${rand()}`;
      r = await openRatchet(t, { schema });
    }
  };
  const close = async () => {
    await r?.close().catch(() => {});
    r = undefined;
    if (kind === "sqlite" && dir) rmSync(dir, { recursive: true, force: true });
    if (kind === "postgres" && schema) {
      const admin = await pgClient(t.pgUrl);
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
      await admin.end().catch(() => {});
    }
  };
  // Jobs without an outcome: the live ones from the depth counters (spec §9.5, a read of one row per
  // queue where stats() counts the whole table: the driver polls this every 5 ms at the end of a
  // drain). Jobs not completed: those, and once none is live, the ended ones whose outcome is not
  // completed (one stats() call: ~7–17 ms over W2's 20,000 rows on PostgreSQL, which the drain's
  // clock paid until it waited on `unfinished` and checked this after it).
  const unfinished = async () => {
    let n = 0;
    for (const q of await r!.depths()) n += q.live;
    return n;
  };
  const live = async () => {
    let n = await unfinished();
    if (n > 0) return n;
    for (const q of await r!.stats())
      for (const [outcome, k] of Object.entries(q.byOutcome)) if (outcome !== "completed") n += k ?? 0;
    return n;
  };
  return {
    get r() {
      return r!;
    },
    ref: (): StoreRef => (kind === "sqlite" ? { file: join(dir, "bench.db") } : { schema }),
    open,
    close,
    live,
    unfinished,
  };
}

const notes = (kind: Kind, prefetch: number) =>
  kind === "sqlite"
    ? `enqueue / enqueueMany; start({ concurrency, prefetch: ${prefetch} }); pollIntervalMs ${POLL_MS}; maxDepth 2,000,000 (W5m); WAL, synchronous NORMAL (default)`
    : `enqueue / enqueueMany; start({ concurrency, prefetch: ${prefetch} }); pollIntervalMs ${POLL_MS}; maxDepth 2,000,000 (W5m); pool 10; fresh schema per run`;

function adapter(kind: Kind, t: Targets, prefetch: number): Adapter {
  const b = ratchetBase(kind, t);
  let blocker: number | undefined;
  return {
    name: kind === "sqlite" ? "ratchet (sqlite)" : "ratchet (postgres)",
    backend: kind,
    durable: true,
    notes: notes(kind, prefetch),
    async setup() {
      blocker = undefined;
      await b.open();
    },
    ref: b.ref,
    async enqueueOne(p: Payload) {
      await b.r.enqueue(noop, p);
    },
    async enqueueBatch(ps: Payload[]) {
      await b.r.enqueueMany(ps.map((p) => ({ task: noop, input: p })));
    },
    async enqueueDelayed(ps: Payload[], delayMs: number) {
      await b.r.enqueueMany(ps.map((p) => ({ task: noop, input: p, delayMs })));
    },
    async enqueueBlocked(ps: Payload[]) {
      // Every blocked job needs one blocker, due in a day (spec §6), made by the first call after
      // setup: it counts as one more remaining job (the driver expects it).
      blocker ??= await b.r.enqueue(noop, { seq: -1, enqueuedAt: 0 }, { delayMs: 86_400_000 });
      await b.r.enqueueMany(ps.map((p) => ({ task: noop, input: p, needs: [blocker!] })));
    },
    async startLocalWorker({ concurrency, onJob }) {
      hooks.onJob = onJob;
      await b.r.start({ concurrency, prefetch });
      return {
        stop: async () => {
          await b.r.stop();
          hooks.onJob = () => {};
        },
      };
    },
    remaining: b.live,
    unfinished: b.unfinished,
    teardown: b.close,
  };
}

/** A worker with a Ratchet instance of its own on the run's store. */
const startWorker =
  (prefetch: number) =>
  async (t: Targets, ref: StoreRef, { concurrency, onJob }: WorkerOptions) => {
    const r = await openRatchet(t, ref);
    hooks.onJob = onJob;
    await r.start({ concurrency, prefetch });
    return {
      async stop() {
        await r.close();
        hooks.onJob = () => {};
      },
    };
  };

const engine = (kind: Kind, prefetch: number): QueueEngine => ({
  adapter: async (t) => adapter(kind, t, prefetch),
  startWorker: startWorker(prefetch),
});
export const ratchetSqlite = engine("sqlite", PREFETCH);
export const ratchetPg = engine("postgres", PREFETCH);
export const ratchetSqliteP0 = engine("sqlite", DEFAULT_PREFETCH);
export const ratchetPgP0 = engine("postgres", DEFAULT_PREFETCH);

/** W4: `tasks` tasks of `steps` ctx.step calls, enqueued (untimed), drained at concurrency `inFlight`. */
export function ratchetSteps(kind: Kind, t: Targets, prefetch = PREFETCH): StepsAdapter {
  const b = ratchetBase(kind, t);
  return {
    name: kind === "sqlite" ? "ratchet (sqlite)" : "ratchet (postgres)",
    backend: kind,
    durable: true,
    notes: `${notes(kind, prefetch)}; tasks enqueued with enqueueMany before the clock starts, drained by start({ concurrency: in-flight, prefetch })`,
    setup: b.open,
    async runSteps({ tasks, steps, inFlight, onStep }) {
      hooks.steps = steps;
      // The clock stops when every task has settled: wait (without store reads) until every step
      // body has run, then poll the store until nothing is live.
      let ran = 0;
      let allRan!: () => void;
      const ranAll = new Promise<void>((res) => {
        allRan = res;
      });
      hooks.onStep = (task, step) => {
        onStep(task, step);
        if (++ran === tasks * steps) allRan();
      };
      for (let i = 0; i < tasks; i += 1_000) {
        const n = Math.min(1_000, tasks - i);
        await b.r.enqueueMany(
          Array.from({ length: n }, (_, k) => ({ task: stepsTask, input: { i: i + k } })),
        );
      }
      const t0 = performance.now();
      await b.r.start({ concurrency: inFlight, prefetch });
      await ranAll;
      for (;;) {
        if ((await b.live()) === 0) break;
        await new Promise((res) => setTimeout(res, 5));
      }
      const ms = performance.now() - t0;
      await b.r.stop();
      hooks.onStep = () => {};
      return ms;
    },
    teardown: b.close,
  };
}
