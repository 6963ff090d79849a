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

export interface Adapter {
  name: string;
  backend: "sqlite" | "postgres" | "redis";
  durable: boolean;
  /** The documented fast settings used, in words; printed under the table. */
  notes: string;
  /** A fresh database/schema/file/redis keyspace for this run. */
  setup(): Promise<void>;
  enqueueOne(payload: Payload): Promise<void>;
  enqueueBatch(payloads: Payload[]): Promise<void>;
  /**
   * W5: a batch that becomes due only after `delayMs` (the engine's own "run at" / delay option).
   * Absent for an engine without one; the driver then skips W5 for it and says so.
   */
  enqueueDelayed?(payloads: Payload[], delayMs: number): Promise<void>;
  /** In-process for now: the worker shares the driver's event loop. */
  startWorker(opts: { concurrency: number; onJob: (p: Payload) => void }): Promise<{ stop(): Promise<void> }>;
  /** Jobs not yet completed (queued, running, or failed). */
  remaining(): Promise<number>;
  teardown(): Promise<void>;
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
