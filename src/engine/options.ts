import { type Clock, type Random, systemClock, systemRandom } from "../core/clock.js";
import { DEFAULT_MAX_PAYLOAD_BYTES } from "../core/json.js";
import { DEFAULT_TICK_RESERVE_MS } from "../core/tick.js";
import { ConfigError } from "../errors.js";
import type { Store } from "../store/store.js";
import { describe, MAX_MS, type TaskDefinition } from "./definition.js";
import type { ScheduleOptions } from "./schedule.js";
import {
  DEFAULT_MAX_STREAM_BYTES,
  DEFAULT_MAX_STREAM_CHUNK_BYTES,
  DEFAULT_STREAM_INTERVAL_MS,
} from "./stream.js";

export interface Logger {
  info(msg: string, meta?: unknown): void;
  warn(msg: string, meta?: unknown): void;
  error(msg: string, meta?: unknown): void;
}

export const silentLogger: Logger = { info() {}, warn() {}, error() {} };
export const consoleLogger: Logger = {
  info: (m, meta) => console.error(`[ratchet] ${m}`, meta ?? ""),
  warn: (m, meta) => console.error(`[ratchet] warning: ${m}`, meta ?? ""),
  error: (m, meta) => console.error(`[ratchet] error: ${m}`, meta ?? ""),
};

export interface OpenOptions {
  /** "sqlite:PATH" (default "sqlite:./ratchet.db"), "sqlite::memory:", or a Store. Env RATCHET_STORE is read by the CLI. */
  store?: string | Store;
  tasks?: readonly TaskDefinition[];
  /** Schedules to create or update at open (spec §14.1); others in the store are left as they are. */
  schedules?: readonly ScheduleDecl[];
  clock?: Clock;
  random?: Random;
  /** Lease = maxMs + leaseGraceMs (spec §3.2). Default 10 s. */
  leaseGraceMs?: number;
  /** Admission limit per queue (spec §2.7). A number for every queue, or per queue with "*" as the fallback. Default 1,000,000. */
  maxDepth?: number | Record<string, number>;
  /** SQLite synchronous mode (spec §10.2). Default NORMAL. */
  synchronous?: "NORMAL" | "FULL";
  /** The largest tick budget you run with; definitions that cannot fit it are rejected (spec §8.4). */
  tickBudgetMs?: number;
  /** PostgreSQL settings for a postgres:// store. */
  postgres?: {
    schema?: string;
    poolMax?: number;
    /** Use this pg.Pool (Ratchet will not end it); the store URL is then only used for its scheme. */
    pool?: import("pg").Pool;
  };
  /** Part of a tick's budget never spent on starting work (spec §8.3). Default 3 s. */
  tickReserveMs?: number;
  /** Longest idle poll of a worker. Default 500 ms. */
  pollIntervalMs?: number;
  /**
   * How often a worker runs the task-tree reconcile and checks its running
   * tasks for abort marks set elsewhere (spec §12.10). Default 1000 ms.
   */
  maintenanceIntervalMs?: number;
  /** Bound of a task input (serialised JSON). Default 1 MiB. */
  maxPayloadBytes?: number;
  /** Bound of a step or task result. Default 1 MiB. */
  maxResultBytes?: number;
  /** spec §16.2: a streamed chunk is committed at most this long after the commit before. Default 100 ms. */
  streamIntervalMs?: number;
  /** spec §16.6: bound of one stream chunk (its JSON text). Default 64 KiB. */
  maxStreamChunkBytes?: number;
  /** spec §16.6: bound of one stream, all its chunks together. Default 16 MiB. */
  maxStreamBytes?: number;
  workerId?: string;
  logger?: Logger;
}

export interface ScheduleDecl extends ScheduleOptions {
  name: string;
  cron: string;
  task: TaskDefinition | string;
  input?: unknown;
}

export interface ResolvedOptions {
  clock: Clock;
  random: Random;
  leaseGraceMs: number;
  maxDepth: (queue: string) => number;
  tickBudgetMs: number | undefined;
  tickReserveMs: number;
  pollIntervalMs: number;
  maintenanceIntervalMs: number;
  maxPayloadBytes: number;
  maxResultBytes: number;
  streamIntervalMs: number;
  maxStreamChunkBytes: number;
  maxStreamBytes: number;
  logger: Logger;
}

function positive(v: unknown, what: string, max = MAX_MS): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > max) {
    throw new ConfigError(`${what} must be an integer in [0, ${max}] (got ${describe(v)})`);
  }
  return v;
}

export function resolveOptions(o: OpenOptions): ResolvedOptions {
  const depth = o.maxDepth ?? 1_000_000;
  let maxDepth: (q: string) => number;
  if (typeof depth === "number") {
    const d = positive(depth, "maxDepth", Number.MAX_SAFE_INTEGER);
    maxDepth = () => d;
  } else if (depth && typeof depth === "object") {
    const map = new Map<string, number>();
    for (const [k, v] of Object.entries(depth))
      map.set(k, positive(v, `maxDepth["${k}"]`, Number.MAX_SAFE_INTEGER));
    const fallback = map.get("*") ?? 1_000_000;
    maxDepth = (q) => map.get(q) ?? fallback;
  } else throw new ConfigError("maxDepth must be a number or an object of numbers");
  return {
    clock: o.clock ?? systemClock,
    random: o.random ?? systemRandom,
    leaseGraceMs: positive(o.leaseGraceMs ?? 10_000, "leaseGraceMs"),
    maxDepth,
    tickBudgetMs: o.tickBudgetMs === undefined ? undefined : positive(o.tickBudgetMs, "tickBudgetMs"),
    tickReserveMs: positive(o.tickReserveMs ?? DEFAULT_TICK_RESERVE_MS, "tickReserveMs"),
    pollIntervalMs: Math.max(1, positive(o.pollIntervalMs ?? 500, "pollIntervalMs")),
    maxPayloadBytes: positive(
      o.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
      "maxPayloadBytes",
      64 * 1024 * 1024,
    ),
    maxResultBytes: positive(
      o.maxResultBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
      "maxResultBytes",
      64 * 1024 * 1024,
    ),
    maintenanceIntervalMs: Math.max(1, positive(o.maintenanceIntervalMs ?? 1000, "maintenanceIntervalMs")),
    streamIntervalMs: Math.max(
      1,
      positive(o.streamIntervalMs ?? DEFAULT_STREAM_INTERVAL_MS, "streamIntervalMs", 60_000),
    ),
    maxStreamChunkBytes: Math.max(
      16,
      positive(
        o.maxStreamChunkBytes ?? DEFAULT_MAX_STREAM_CHUNK_BYTES,
        "maxStreamChunkBytes",
        16 * 1024 * 1024,
      ),
    ),
    maxStreamBytes: Math.max(
      16,
      positive(o.maxStreamBytes ?? DEFAULT_MAX_STREAM_BYTES, "maxStreamBytes", 1024 * 1024 * 1024),
    ),
    logger: o.logger ?? consoleLogger,
  };
}

/**
 * Parses a store URL. spec §10. Each store's module is loaded only when a URL names it: loading pg
 * costs a process 31–44 ms (on Node 20 its Cloudflare check builds a `Response`, which loads undici,
 * ~18 ms of that), and SQLite users never need it; better-sqlite3's native module likewise waits for
 * a sqlite: URL. A fresh process importing Ratchet and opening a SQLite store, fifteen runs
 * alternating with the build before (`node dist/bench/coldstart.js --base …`): import 57.5 → 22.5
 * ms, import and open 66.9 → 42.7 ms, the process's CPU 129 → 100 ms; on PostgreSQL (nine runs,
 * `--store pg`) import and open 78.7 → 72.9 ms, CPU 138 → 124 ms. Test: test/process/lazy-stores.
 */
export async function openStore(
  spec: string,
  clock: Clock,
  synchronous: "NORMAL" | "FULL" | undefined,
  pgOptions: { schema?: string; poolMax?: number; clock?: Clock; pool?: import("pg").Pool } = {},
): Promise<Store> {
  if (typeof spec !== "string")
    throw new ConfigError("store must be a string such as sqlite:./ratchet.db, or a Store");
  if (spec.startsWith("sqlite:")) {
    const path = spec.slice("sqlite:".length);
    if (path.length === 0)
      throw new ConfigError("store sqlite: needs a path, e.g. sqlite:./ratchet.db or sqlite::memory:");
    if (synchronous !== undefined && synchronous !== "NORMAL" && synchronous !== "FULL") {
      throw new ConfigError(`synchronous must be "NORMAL" or "FULL" (got ${describe(synchronous)})`);
    }
    const { SqliteStore } = await import("../store/sqlite/sqlite-store.js");
    return new SqliteStore({ path, clock, synchronous });
  }
  if (spec.startsWith("postgres://") || spec.startsWith("postgresql://")) {
    // The schema may ride in the URL (?schema=name); pg would send unknown parameters to the server.
    const url = new URL(spec);
    const schema = url.searchParams.get("schema") ?? undefined;
    url.searchParams.delete("schema");
    const { PostgresStore } = await import("../store/postgres/postgres-store.js");
    return new PostgresStore({
      connectionString: url.toString(),
      ...pgOptions,
      schema: pgOptions.schema ?? schema,
    });
  }
  throw new ConfigError(
    `unsupported store "${spec}": use sqlite:PATH, sqlite::memory: or postgres://USER@HOST/DB`,
  );
}
