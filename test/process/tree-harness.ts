/**
 * Helpers for the task-tree crash tests (tree-crash.test.ts): a worker process
 * running test/fixtures/tree-worker.ts, one store per run (a temp SQLite file
 * or a fresh PostgreSQL schema), and a scenario runner that drives a tree to a
 * kill point and then either SIGKILLs the worker and restarts a fresh one on
 * the same store (crash run) or just lets it go on (reference run).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { Ratchet, silentLogger, type TaskRecord, type TaskTree } from "../../src/index.js";
import {
  type GatePoint,
  gateFile,
  type LedgerEntry,
  makeTreeTasks,
  type NodeInput,
  type NodePlan,
  TREE_NODE,
} from "../fixtures/tree-tasks.js";
import { dropSchemas, newSchemaName, PG_URL } from "../pg-available.js";
import { FixtureProcess, ledgerLines, waitUntil } from "./harness.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const WORKER = join(ROOT, "test/fixtures/tree-worker.ts");

/** leaseGraceMs of the workers: with TREE_MAX_MS the lease of a killed holder ends 2.5 s after its last heartbeat. */
export const TREE_GRACE_MS = 500;

const ALL_POINTS: GatePoint[] = ["start", "spawned", "work", "prefail", "handler"];

/** A tree-worker process: the shared fixture protocol (harness.ts), plus the app name its ledger lines carry. */
export class TreeWorker extends FixtureProcess {
  readonly appName: string;

  constructor(args: readonly string[], appName: string) {
    super(args, WORKER);
    this.appName = appName;
  }

  /** Throws (with the worker's stderr) when the process is gone. */
  assertAlive(what: string): void {
    if (!this.alive)
      throw new Error(`tree worker ${this.pid} exited before ${what}; stderr:\n${this.stderr}`);
  }
}

/** One store for one run, and how to reach it from the test process and from a worker. */
interface RunStore {
  readonly label: string;
  /** true when endedAt and the ledger's Date.now() share one exact clock (SQLite; PostgreSQL rounds its transaction-start time). */
  readonly exactClock: boolean;
  open(tasks: ReturnType<typeof makeTreeTasks>): Promise<Ratchet>;
  workerArgs(appName: string): string[];
  /** Resolves once nothing the killed worker sent can still change the store. */
  settledAfterKill(w: TreeWorker): Promise<void>;
  cleanup(): Promise<void>;
}

export interface Backend {
  readonly name: "sqlite" | "postgres";
  create(dir: string): RunStore;
}

export const sqliteBackend: Backend = {
  name: "sqlite",
  create(dir) {
    const url = `sqlite:${join(dir, "ratchet.db")}`;
    return {
      label: url,
      exactClock: true,
      open: (tasks) => Ratchet.open({ store: url, tasks, logger: silentLogger }),
      workerArgs: () => ["--store", url],
      // A dead process holds no SQLite transaction: its last commit is already in the file.
      settledAfterKill: async () => {},
      cleanup: async () => {},
    };
  },
};

function pgUrl(appName: string): string {
  const u = new URL(PG_URL);
  u.searchParams.set("application_name", appName);
  return u.toString();
}

async function pgSessions(appName: string): Promise<number> {
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 5_000 });
  c.on("error", () => {});
  await c.connect();
  try {
    const res = await c.query<{ n: string }>(
      "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1",
      [appName],
    );
    return Number(res.rows[0]!.n);
  } finally {
    await c.end().catch(() => {});
  }
}

export const postgresBackend: Backend = {
  name: "postgres",
  create() {
    const schema = newSchemaName();
    return {
      label: `postgres schema ${schema}`,
      exactClock: false,
      open: (tasks) =>
        Ratchet.open({
          store: pgUrl(`rt-tree-test-${schema}`),
          postgres: { schema, poolMax: 3 },
          tasks,
          logger: silentLogger,
        }),
      workerArgs: (appName) => ["--store", pgUrl(appName), "--schema", schema],
      // The server may still run what the dead worker sent (even a COMMIT) until its sessions end.
      settledAfterKill: async (w) => {
        await waitUntil(
          `the sessions of killed worker ${w.pid} to end`,
          async () => (await pgSessions(w.appName)) === 0,
        );
      },
      cleanup: () => dropSchemas([schema]),
    };
  },
};

/** What a scenario's driver can do while it brings a run to its kill point. */
export interface RunHandle {
  readonly r: Ratchet;
  /** Waits for the gate line of `path` at `point` (the body is blocked there now). */
  gate(path: string, point: GatePoint): Promise<LedgerEntry>;
  /** Waits until the task at `path` exists and satisfies `ok`. */
  task(path: string, what: string, ok: (t: TaskRecord) => boolean): Promise<TaskRecord>;
  open(path: string, point: GatePoint): void;
  abort(path: string): Promise<void>;
}

export interface Scenario {
  /** Root label → plan; each root is enqueued with input { path: label, plan }. */
  roots: Record<string, NodePlan>;
  /** Brings the run to its kill point; the reference and the crash run do exactly the same. */
  drive(h: RunHandle): Promise<void>;
  /** Runs after the kill (crash run) or at the same point (reference run), before the gates open. */
  afterKill?(h: RunHandle): Promise<void>;
}

export interface FinalTask {
  status: string;
  outcome: string | null;
  result: unknown;
  error: string | null;
}

export interface Observed {
  /** Every task in the store at the end. */
  tasks: TaskRecord[];
  /** Task by its input path. */
  byPath: Map<string, TaskRecord>;
  /** Per task: spawnName path (built from tree()) → final state. */
  finals: Record<string, FinalTask>;
  ledger: LedgerEntry[];
  exactClock: boolean;
  /** Set for a crash run. */
  crash?: {
    victimPid: number;
    freshPid: number;
    /** Paths of the tasks the victim held (running) when it was killed, with their lease ends. */
    heldAtKill: Map<string, number>;
    /** Path → detail of each "reclaimed" event. */
    reclaims: { path: string; at: number; previousHolder: string; leaseUntil: number }[];
    victimWorkerId: string;
  };
  /** Path → names of its committed step records. */
  steps: Record<string, string[]>;
  /** Path → kinds of its task events, in order. */
  events: Record<string, string[]>;
  /** How long the run took (ms). */
  ms: number;
}

function pathsOf(plans: Record<string, NodePlan>, prefix = ""): string[] {
  const out: string[] = [];
  for (const [name, plan] of Object.entries(plans)) {
    const p = prefix ? `${prefix}/${name}` : name;
    out.push(p, ...pathsOf(plan.kids ?? {}, p));
  }
  return out;
}

export function readLedger(file: string): LedgerEntry[] {
  return ledgerLines(file).map((l) => JSON.parse(l) as LedgerEntry);
}

/**
 * Runs one scenario on a fresh store. Reference run (crash false): drive to
 * the kill point, open every gate, let the same worker finish. Crash run:
 * drive to the kill point, SIGKILL the worker, open every gate, start a fresh
 * worker process on the same store and let it finish. Returns what the store
 * and the ledger hold at the end; everything it created is removed.
 */
export async function runScenario(backend: Backend, sc: Scenario, crash: boolean): Promise<Observed> {
  const started = performance.now();
  const dir = mkdtempSync(join(tmpdir(), "ratchet-tree-"));
  const gates = join(dir, "gates");
  mkdirSync(gates);
  const ledger = join(dir, "ledger.jsonl");
  writeFileSync(ledger, "");
  const store = backend.create(dir);
  const workers: TreeWorker[] = [];
  let r: Ratchet | undefined;
  const spawnWorker = () => {
    const appName = `rt-tree-w${workers.length}-${process.pid}`;
    const w = new TreeWorker(
      [...store.workerArgs(appName), "--ledger", ledger, "--gates", gates, "--grace", String(TREE_GRACE_MS)],
      appName,
    );
    workers.push(w);
    return w;
  };
  try {
    // The test process only enqueues, aborts and reads; bodies never run here.
    r = await store.open(makeTreeTasks({ ledgerFd: -1, gatesDir: gates }));
    const ratchet = r;
    let current = spawnWorker();
    let killed = false;
    await current.waitFor("ready");

    const ids: Record<string, number> = {};
    for (const [label, plan] of Object.entries(sc.roots)) {
      ids[label] = await ratchet.enqueue(TREE_NODE, { path: label, plan } satisfies NodeInput);
    }
    current.send("go");
    await current.waitFor("started");

    const findByPath = async (path: string): Promise<TaskRecord | undefined> => {
      const root = ids[path.split("/")[0]!];
      if (root === undefined) throw new Error(`no root for ${path}`);
      return (await ratchet.store.subtree(root, 10_000)).find((t) => (t.input as NodeInput).path === path);
    };
    const h: RunHandle = {
      r: ratchet,
      gate: (path, point) =>
        waitUntil(`${store.label}: gate ${path}.${point}`, () => {
          if (!killed) current.assertAlive(`gate ${path}.${point}`);
          return readLedger(ledger).find((e) => e.ev === "gate" && e.path === path && e.point === point);
        }),
      task: (path, what, ok) =>
        waitUntil(`${store.label}: ${path} ${what}`, async () => {
          if (!killed) current.assertAlive(`${path} ${what}`);
          const t = await findByPath(path);
          return t && ok(t) ? t : undefined;
        }),
      open: (path, point) => writeFileSync(join(gates, gateFile(path, point)), ""),
      abort: async (path) => {
        const t = await findByPath(path);
        if (!t) throw new Error(`no task at ${path}`);
        await ratchet.abort(t.id);
      },
    };
    await sc.drive(h);

    let crashInfo: Observed["crash"];
    if (crash) {
      const victim = current;
      killed = true;
      victim.kill();
      const how = await victim.exited;
      if (how.signal !== "SIGKILL") throw new Error(`victim exited with ${JSON.stringify(how)}`);
      await store.settledAfterKill(victim);
      const held = new Map<string, number>();
      for (const root of Object.values(ids)) {
        for (const t of await ratchet.store.subtree(root, 10_000)) {
          if (t.status === "running" && t.lockedBy === victim.workerId)
            held.set((t.input as NodeInput).path, t.leaseUntil!);
        }
      }
      crashInfo = {
        victimPid: victim.pid,
        victimWorkerId: victim.workerId,
        freshPid: 0,
        heldAtKill: held,
        reclaims: [],
      };
    }
    await sc.afterKill?.(h);
    for (const p of pathsOf(sc.roots)) for (const point of ALL_POINTS) h.open(p, point);
    if (crashInfo) {
      // A fresh process on the same store: open() runs the recovery reconcile (spec §12.10).
      current = spawnWorker();
      killed = false;
      await current.waitFor("ready");
      crashInfo.freshPid = current.pid;
      current.send("go");
      await current.waitFor("started");
    }
    const finisher = current;
    await waitUntil(
      `${store.label}: every root terminal`,
      async () => {
        finisher.assertAlive("every root was terminal");
        for (const id of Object.values(ids)) if ((await ratchet.get(id))?.status !== "terminal") return false;
        return true;
      },
      30_000,
    );
    const code = await finisher.stop();
    if (code !== 0 || finisher.stderr !== "")
      throw new Error(`worker ${finisher.pid} exited ${code}; stderr:\n${finisher.stderr}`);

    // Collect.
    const tasks: TaskRecord[] = [];
    const finals: Record<string, FinalTask> = {};
    const walk = (node: TaskTree, path: string) => {
      const t = node.task;
      finals[path] = {
        status: t.status,
        outcome: t.outcome,
        result: t.result,
        error: t.error?.message ?? null,
      };
      for (const c of node.children) walk(c, `${path}/${c.task.spawnName}`);
    };
    for (const [label, id] of Object.entries(ids)) walk(await ratchet.tree(id, { limit: 10_000 }), label);
    // Each run has its own store, so this is the whole scenario (a few dozen tasks at most).
    tasks.push(...(await ratchet.list({ limit: 1000 })));
    const byPath = new Map(tasks.map((t) => [(t.input as NodeInput).path, t]));
    const steps: Record<string, string[]> = {};
    const events: Record<string, string[]> = {};
    for (const t of tasks) {
      const path = (t.input as NodeInput).path;
      steps[path] = (await ratchet.store.steps(t.id)).map((s) => s.name).sort();
      const evs = await ratchet.store.events(t.id);
      events[path] = evs.map((e) => e.kind);
      if (crashInfo) {
        for (const e of evs) {
          if (e.kind !== "reclaimed") continue;
          const d = e.detail as { previousHolder: string; leaseUntil: number };
          crashInfo.reclaims.push({
            path,
            at: e.at,
            previousHolder: d.previousHolder,
            leaseUntil: d.leaseUntil,
          });
        }
      }
    }
    return {
      tasks,
      byPath,
      finals,
      ledger: readLedger(ledger),
      exactClock: store.exactClock,
      crash: crashInfo,
      steps,
      events,
      ms: Math.round(performance.now() - started),
    };
  } finally {
    for (const w of workers) w.kill();
    await Promise.all(workers.map((w) => w.exited));
    await r?.close().catch(() => {});
    await store.cleanup();
    rmSync(dir, { recursive: true, force: true });
  }
}
