/**
 * The one interface every engine in the side-by-side benchmark implements (issue 6), and the
 * small helpers the adapters share. See docs/benchmarks-peers.md.
 *
 * The peers are installed into bench/node_modules by `cd bench && npm install` (bench/package.json),
 * never by the root install. The root `npm run typecheck` and `biome check` still cover this folder,
 * on a fresh clone without bench/node_modules, so the adapters load their peer through `loadPeer()`
 * (a dynamic import of a name held in a variable, typed `any`): the typecheck does not need the
 * peer's types, and a peer that is missing or broken is reported by the driver instead of
 * crashing it.
 */
import { randomBytes } from "node:crypto";

export interface Payload {
  seq: number;
  enqueuedAt: number;
}

/** Where a worker in another process finds the store of this run (JSON: a file, a schema, a queue name). */
export type StoreRef = Record<string, string>;

export interface WorkerOptions {
  concurrency: number;
  onJob: (p: Payload) => void;
}

export interface RunningWorker {
  /** Stops the worker and closes what it opened. */
  stop(): Promise<void>;
}

export interface Adapter {
  name: string;
  backend: "sqlite" | "postgres" | "redis";
  durable: boolean;
  /** The documented fast settings used, in words; printed under the table. */
  notes: string;
  /** A fresh database/schema/file/redis keyspace for this run. */
  setup(): Promise<void>;
  /** The store `setup()` made, for `startWorker` in a worker process (peers/worker-proc.ts). */
  ref(): StoreRef;
  enqueueOne(payload: Payload): Promise<void>;
  enqueueBatch(payloads: Payload[]): Promise<void>;
  /**
   * W5: a batch that becomes due only after `delayMs` (the engine's own "run at" / delay option).
   * Absent for an engine without one; the driver then skips W5 for it and says so.
   */
  enqueueDelayed?(payloads: Payload[], delayMs: number): Promise<void>;
  /**
   * W5 blocked: `payloads` jobs that wait on one unfinished job (due in a day) which they depend on.
   * Only for an engine with dependencies between jobs; the driver skips the figure otherwise.
   */
  enqueueBlocked?(payloads: Payload[]): Promise<void>;
  /** Measurements (by id) this engine skips here, with the reason printed under the tables. */
  skips?: Partial<Record<string, string>>;
  /**
   * A worker in the driver's own process sharing the driver's connection, where that matters for
   * latency (Ratchet: an enqueue wakes a worker of the same instance without a poll). Absent: the
   * driver calls the module's `startWorker` in its own process instead.
   */
  startLocalWorker?(opts: WorkerOptions): Promise<RunningWorker>;
  /** Jobs not yet completed (queued, running, or failed). */
  remaining(): Promise<number>;
  /**
   * Jobs without a committed outcome (queued or running), where the engine can count them more
   * cheaply than remaining(), which must also find the failed ones. A drain's clock then stops when
   * this reaches the jobs meant to be left, and remaining() is checked after it, untimed: a failed
   * job still fails the run, but the search for one is not timed as part of the drain.
   */
  unfinished?(): Promise<number>;
  teardown(): Promise<void>;
}

/**
 * What each queue engine's module exports: the driver side (`adapter`) and a worker that opens its
 * own connection to the store named by `ref`, in whichever process calls it (peers/worker-proc.ts
 * runs it in a child process).
 */
export interface QueueEngine {
  adapter(t: Targets): Promise<Adapter>;
  startWorker(t: Targets, ref: StoreRef, opts: WorkerOptions): Promise<RunningWorker>;
}

/**
 * W4, durable steps: `tasks` tasks (workflows) of `steps` checkpointed steps each, `inFlight` at a
 * time. Implemented by the engines that have durable steps (Ratchet's ctx.step, DBOS's runStep).
 */
export interface StepsAdapter {
  name: string;
  backend: "sqlite" | "postgres" | "redis";
  durable: boolean;
  notes: string;
  setup(): Promise<void>;
  /**
   * Runs the workload and returns the wall time in ms. `onStep(task, step)` must be called once
   * each time a step body actually executes (the driver checks each ran exactly once).
   */
  runSteps(opts: {
    tasks: number;
    steps: number;
    inFlight: number;
    onStep: (task: number, step: number) => void;
  }): Promise<number>;
  teardown(): Promise<void>;
}

export interface Targets {
  pgUrl: string;
  redisUrl: string;
  /** Where temporary SQLite files go. */
  tmpDir: string;
}

/** Loads a peer from bench/node_modules; the module's namespace, with a CommonJS default unwrapped. */
export async function loadPeer(name: string): Promise<any> {
  const spec: string = name;
  const mod: any = await import(spec);
  return mod;
}

export function rand(): string {
  return randomBytes(4).toString("hex");
}

/** A pg.Client on the target server (or another database of it), for DDL and counting. */
export async function pgClient(url: string, database?: string): Promise<any> {
  const pg = await loadPeer("pg");
  const Client = (pg.default ?? pg).Client;
  const u = new URL(url);
  if (database) u.pathname = `/${database}`;
  const c = new Client({ connectionString: u.toString() });
  c.on("error", () => {});
  await c.connect();
  return c;
}

/** `url` with its database replaced. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export const silentConsoleLogger = {
  error() {},
  warn() {},
  info() {},
  debug() {},
};
