/**
 * Scenario 10, the driver: fast-check generates command sequences from a
 * seed, each runs against the model and a real store (sequence.ts), and the
 * first failing sequence is shrunk to a minimal one and reported with the
 * seed, fast-check's replay path and the shrunk commands.
 *
 * Backends:
 * - SQLite: a fresh `:memory:` store with its own fake clock per sequence
 *   (~2 ms to open and migrate), so every read is comparable, including
 *   `nextRunAt`, and every command is followed by a full read-back.
 * - PostgreSQL: a fresh schema per 200 sequences (dropped afterwards; a
 *   migration costs ~100 ms, more than a whole sequence), each sequence in two
 *   queues of its own and on its own stretch of the fake clock (10 days apart),
 *   read back by queue. `nextRunAt` is global, so it is not compared; without
 *   `fullReads` steps are read for the command's target and, at the end of the
 *   sequence, everything.
 */
import fc from "fast-check";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import type { Store } from "../../src/store/store.js";
import { GRACE } from "../../src/testing/conformance/kit.js";
import { FakeClock } from "../../src/testing/fake-clock.js";
import { CHAOS_PG_URL, dropChaosSchema, newChaosSchema, pgQuery } from "../pgstore.js";
import { Rng } from "../scenario.js";
import { emptyCounts, faultyStore } from "../scenarios/ambiguous.js";
import { type Cmd, type Fault, formatCmd, sequenceArb } from "./commands.js";
import type { ModelConfig } from "./model.js";
import type { ReadPlan } from "./observe.js";
import { KNOWN_BUGS, type KnownBug } from "./plans.js";
import { emptyStats, type ModelStats, SequenceRun } from "./sequence.js";

export type Backend = "sqlite" | "postgres";

export interface ModelRunOptions {
  backend: Backend;
  seed: number;
  /** Sequences to generate (fast-check numRuns); shrinking runs more after a failure. */
  sequences: number;
  /** Longest sequence, in commands. */
  maxCommands: number;
  /** Wraps the store under test; the harness's own tests inject bugs with it. */
  wrap?: (s: Store) => Store;
  /** Model options (the harness's own tests). */
  model?: Partial<ModelConfig>;
  /** Known bugs to stay off (default: KNOWN_BUGS of the backend); [] to look for them. */
  avoid?: readonly KnownBug[];
  /**
   * Read every task's steps, get() and listReady() after every command (default: on SQLite only;
   * on PostgreSQL it doubles the time of a sequence, so the short run reads the target's steps and
   * everything at the end of each sequence).
   */
  fullReads?: boolean;
}

export interface ModelRunResult {
  backend: Backend;
  seed: number;
  ms: number;
  /** The shrunk counterexample and why it failed; null when every sequence agreed. */
  failure: string | null;
  /** The shrunk sequence, for a replay with `replaySequence`. */
  counterexample: Cmd[] | null;
  stats: ModelStats;
}

/** Admission limits small enough that sequences reach them (spec §2.7). */
function modelConfig(queues: readonly [string, string], over: Partial<ModelConfig> = {}): ModelConfig {
  return {
    graceMs: GRACE,
    maxDepth: { [queues[0]]: 4, [queues[1]]: 5 },
    known: ["t", "u"],
    ...over,
  };
}

/** Arms the fault wrapper of scenario 5 per call: its roll decides before / after / none at rate 0.5. */
class ScriptedRng extends Rng {
  roll = 2;
  override next(): number {
    return this.roll;
  }
}
const ROLL: Record<Fault, number> = { before: 0, after: 0.75, none: 2 };

interface Target {
  store: Store;
  clock: FakeClock;
  queues: readonly [string, string];
  plan: ReadPlan;
  done(): Promise<void>;
}

interface Backing {
  next(): Promise<Target>;
  close(): Promise<void>;
}

async function register(store: Store): Promise<void> {
  await store.migrate();
  // `z` stays unregistered: abort makes it orphaned (spec §12.6).
  await store.registerDefinitions(
    (["t", "u"] as const).map((name) => ({ name, version: 1, hasAbort: false })),
  );
}

/** Why PostgreSQL cannot be used, or null when it answers. */
export async function pgProblem(): Promise<string | null> {
  try {
    await pgQuery(CHAOS_PG_URL, "SELECT 1");
    return null;
  } catch (e) {
    return (e as Error).message || String(e);
  }
}

async function openBacking(backend: Backend, fullReads: boolean): Promise<Backing> {
  if (backend === "sqlite") {
    return {
      async next() {
        const clock = new FakeClock();
        const store = new SqliteStore({ path: ":memory:", clock });
        await register(store);
        const queues = ["a", "b"] as const;
        return { store, clock, queues, plan: { queues, fresh: true, full: true }, done: () => store.close() };
      },
      close: async () => {},
    };
  }
  return pgBacking(fullReads);
}

/**
 * Sequences per PostgreSQL schema. Reads by queue (`list`, `listReady`) have no index of their own
 * and scan the table, so a schema that holds every sequence's tasks slows each sequence down (2,000
 * sequences in one schema: 0.42 s each on average, against ~0.15 s in a fresh one); a new schema
 * every 200 sequences keeps the table small for ~0.1 s of migration.
 */
const PER_SCHEMA = 200;

async function pgBacking(fullReads: boolean): Promise<Backing> {
  const clock = new FakeClock();
  const start = clock.now();
  let store: PostgresStore | null = null;
  let schema = "";
  let n = 0;
  const drop = async () => {
    if (!store) return;
    await store.close();
    await dropChaosSchema(CHAOS_PG_URL, schema);
    store = null;
  };
  return {
    async next() {
      if (n % PER_SCHEMA === 0) {
        await drop();
        schema = newChaosSchema();
        store = new PostgresStore({ connectionString: CHAOS_PG_URL, schema, clock, poolMax: 2 });
        await register(store);
      }
      n++;
      clock.set(start + n * 10 * 86_400_000);
      const queues = [`s${n}a`, `s${n}b`] as const;
      return {
        store: store!,
        clock,
        queues,
        plan: { queues, fresh: false, full: fullReads },
        done: async () => {},
      };
    },
    close: drop,
  };
}

async function runOne(
  target: Target,
  cmds: readonly Cmd[],
  o: ModelRunOptions,
  stats: ModelStats,
): Promise<void> {
  const rng = new ScriptedRng(0);
  const counts = emptyCounts();
  const inner = o.wrap ? o.wrap(target.store) : target.store;
  const store = faultyStore(inner, rng, 0.5, counts);
  const run = new SequenceRun({
    store,
    clock: target.clock,
    queues: target.queues,
    plan: target.plan,
    cfg: modelConfig(target.queues, o.model),
    setFault: (f) => {
      rng.roll = ROLL[f];
    },
    avoid: o.avoid ?? KNOWN_BUGS[o.backend],
    stats,
  });
  await run.run(cmds);
}

/** Runs `o.sequences` generated sequences; on a failure, shrinks it and reports it. */
export async function runModel(o: ModelRunOptions): Promise<ModelRunResult> {
  const t0 = Date.now();
  const stats = emptyStats();
  const backing = await openBacking(o.backend, o.fullReads ?? o.backend === "sqlite");
  let failure: string | null = null;
  let counterexample: Cmd[] | null = null;
  try {
    const details = await fc.check(
      fc.asyncProperty(sequenceArb(o.maxCommands), async (cmds) => {
        const target = await backing.next();
        try {
          await runOne(target, cmds, o, stats);
        } finally {
          await target.done();
        }
      }),
      { seed: o.seed, numRuns: o.sequences },
    );
    if (details.failed) {
      counterexample = (details.counterexample?.[0] as Cmd[] | undefined) ?? null;
      const err = details.errorInstance;
      failure = [
        `${o.backend}: a sequence failed (seed ${details.seed}, fast-check path "${details.counterexamplePath}", shrunk ${details.numShrinks} times).`,
        "Minimal sequence:",
        ...(counterexample ?? []).map((c, i) => `  ${i + 1}. ${formatCmd(c)}`),
        `As data (replaySequence): ${JSON.stringify(counterexample)}`,
        err instanceof Error
          ? err.name === "ModelMismatch"
            ? err.message
            : (err.stack ?? err.message)
          : String(err),
      ].join("\n");
    }
  } finally {
    await backing.close();
  }
  return { backend: o.backend, seed: o.seed, ms: Date.now() - t0, failure, counterexample, stats };
}

/** Runs one given sequence (a shrunk counterexample) on a fresh target; throws ModelMismatch on a difference. */
export async function replaySequence(
  backend: Backend,
  cmds: readonly Cmd[],
  o: Pick<ModelRunOptions, "wrap" | "model" | "avoid"> = {},
): Promise<ModelStats> {
  const stats = emptyStats();
  const backing = await openBacking(backend, true);
  try {
    const target = await backing.next();
    try {
      await runOne(target, cmds, { backend, seed: 0, sequences: 1, maxCommands: cmds.length, ...o }, stats);
    } finally {
      await target.done();
    }
  } finally {
    await backing.close();
  }
  return stats;
}
