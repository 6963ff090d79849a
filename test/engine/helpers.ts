/**
 * Shared helpers for the engine tests. Nothing here sleeps to "let things
 * settle": waiting is always on a condition, bounded by a timeout.
 *
 * Backends: every engine test runs on SQLite and on PostgreSQL. A test file
 * wraps its body in `forEachBackend(...)`; `openRatchet`, `storeOptions`,
 * `sharedStoreOptions` and `openStore` then use the backend of the test that
 * is running (a module-level setting, set before each test). On PostgreSQL
 * every Ratchet gets a fresh schema (the counterpart of `sqlite::memory:`);
 * the schemas are dropped after the file.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, it } from "vitest";
import { type Clock, systemClock } from "../../src/core/clock.js";
import type { TaskDefinition } from "../../src/engine/definition.js";
import { type OpenOptions, silentLogger } from "../../src/engine/options.js";
import { Ratchet, type TickReport } from "../../src/engine/ratchet.js";
import { RatchetError } from "../../src/errors.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import type { ClaimRequest, NewTask, Store, TaskRecord } from "../../src/store/store.js";
import { FakeClock, seededRandom } from "../../src/testing/fake-clock.js";
import { dropSchemas, newSchemaName, PG_URL, pgGate } from "../pg-available.js";

export { FakeClock, seededRandom, silentLogger };

export type Backend = "sqlite" | "postgres";
export const BACKENDS: readonly Backend[] = ["sqlite", "postgres"];

let current: Backend = "sqlite";

/** The backend of the test that is running. */
export function backend(): Backend {
  return current;
}

/**
 * Registers `body` once per backend, inside describe("sqlite") and
 * describe("postgres"). Without a PostgreSQL server the postgres block is one
 * warning test locally and an error in CI (see test/pg-available.ts).
 */
export function forEachBackend(body: (backend: Backend) => void): void {
  for (const b of BACKENDS) {
    describe(b, () => {
      if (b === "postgres" && !pgGate(it)) return;
      beforeEach(() => {
        current = b;
      });
      body(b);
    });
  }
}

/** Resources opened by a test, closed after it (even when it fails). */
const cleanups: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  const list = cleanups.splice(0).reverse();
  for (const c of list) {
    try {
      await c();
    } catch {
      // Closing twice or after a failure must not hide the test's own error.
    }
  }
  current = "sqlite";
});

/** PostgreSQL schemas handed out in this file; dropped once all its tests ran. */
const schemas: string[] = [];

afterAll(async () => {
  await dropSchemas(schemas.splice(0));
});

export function onCleanup(fn: () => Promise<void> | void): void {
  cleanups.push(fn);
}

/** Store options for the current backend; `postgres` is only read for a postgres:// store. */
export type StoreOptions = Pick<OpenOptions, "store" | "postgres">;

/** Options that open fresh, empty storage on the current backend. */
export function storeOptions(): StoreOptions {
  if (current === "sqlite") return { store: "sqlite::memory:" };
  const schema = newSchemaName();
  schemas.push(schema);
  return { store: PG_URL, postgres: { schema } };
}

/** Options for storage that several instances open together: one SQLite file, or one PostgreSQL schema. */
export function sharedStoreOptions(): StoreOptions {
  return current === "sqlite" ? { store: `sqlite:${tempDbPath()}` } : storeOptions();
}

/** Opens a Ratchet on fresh storage of the current backend (unless `store` is given), closed after the test. */
export async function openRatchet(
  tasks: readonly TaskDefinition[],
  opts: Omit<OpenOptions, "tasks"> = {},
): Promise<Ratchet> {
  const r = await Ratchet.open({
    ...(opts.store === undefined ? storeOptions() : {}),
    logger: silentLogger,
    random: seededRandom(1),
    ...opts,
    tasks,
  });
  onCleanup(() => r.close());
  return r;
}

/** A fresh temp directory (removed after the test) and a database path inside it. */
export function tempDbPath(): string {
  const dir = mkdtempSync(join(tmpdir(), "ratchet-test-"));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, "ratchet.db");
}

/** A migrated SqliteStore for white-box (SQLite-only) tests, closed after the test. */
export async function openSqliteStore(clock: Clock, path = ":memory:"): Promise<SqliteStore> {
  const s = new SqliteStore({ path, clock });
  await s.migrate();
  onCleanup(() => s.close());
  return s;
}

/**
 * A store of the current backend over fresh storage, NOT migrated (Ratchet.open migrates), closed after
 * the test. Without `clock`, SQLite reads the system clock and PostgreSQL the database clock.
 */
export async function createStore(clock?: Clock): Promise<Store> {
  let s: Store;
  if (current === "sqlite") s = new SqliteStore({ path: ":memory:", clock: clock ?? systemClock });
  else {
    const schema = newSchemaName();
    schemas.push(schema);
    s = new PostgresStore({ connectionString: PG_URL, schema, ...(clock ? { clock } : {}) });
  }
  onCleanup(() => s.close());
  return s;
}

/** A migrated store of the current backend over fresh storage, closed after the test. */
export async function openStore(clock: Clock): Promise<Store> {
  const s = await createStore(clock);
  await s.migrate();
  return s;
}

/** A NewTask with defaults, for direct store calls. */
export function newTask(over: Partial<NewTask> = {}): NewTask {
  return {
    name: "t",
    version: 1,
    queue: "default",
    input: "null",
    maxAttempts: 4,
    priority: 0,
    maxMs: 1_000,
    delayMs: 0,
    dedupe: null,
    job: null,
    needs: [],
    ...over,
  };
}

export const unlimited = { maxDepth: () => 1_000_000 };

export function claimReq(over: Partial<ClaimRequest> = {}): ClaimRequest {
  return {
    workerId: "w1",
    queues: ["default"],
    names: ["t"],
    limit: 10,
    leaseGraceMs: 10_000,
    ...over,
  };
}

/** Polls `cond` until it returns a truthy value; throws after `timeoutMs`. */
export async function until<T>(
  cond: () => T | Promise<T>,
  what = "condition",
  timeoutMs = 10_000,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let delay = 1;
  for (;;) {
    const v = await cond();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 20);
  }
}

/** Waits until task `id` has the given status. */
export function untilStatus(r: Ratchet, id: number, status: TaskRecord["status"]): Promise<TaskRecord> {
  return until(async () => {
    const t = await r.get(id);
    return t?.status === status ? t : null;
  }, `task ${id} to be ${status}`);
}

/** A promise with its resolve function exposed. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Resolves when `signal` aborts. */
export function aborted(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason);
    else signal.addEventListener("abort", () => resolve(signal.reason), { once: true });
  });
}

/** All task rows (newest first), straight from the store. */
export async function allTasks(r: Ratchet): Promise<TaskRecord[]> {
  return r.store.list({ limit: 100_000 });
}

export async function countTasks(r: Ratchet): Promise<number> {
  const stats = await r.stats();
  let n = 0;
  for (const q of stats) for (const v of Object.values(q.byStatus)) n += v ?? 0;
  return n;
}

/** Runs `fn`, expects a RatchetError with `code`, and returns it. */
export async function expectCode(fn: () => unknown, code: string): Promise<RatchetError> {
  let caught: unknown;
  try {
    await fn();
  } catch (e) {
    caught = e;
  }
  if (caught === undefined) throw new Error(`expected ${code}, but nothing was thrown`);
  if (!(caught instanceof RatchetError)) {
    throw new Error(`expected RatchetError ${code}, got ${String(caught)}`, { cause: caught });
  }
  if (caught.code !== code) {
    throw new Error(`expected ${code}, got ${caught.code}: ${caught.message}`, { cause: caught });
  }
  return caught;
}

/** Ticks with a generous budget until `cond` holds (bounded number of rounds). */
export async function tickUntil(
  r: Ratchet,
  cond: () => boolean | Promise<boolean>,
  opts: { clock?: FakeClock; advanceMs?: number; rounds?: number } = {},
): Promise<void> {
  for (let i = 0; i < (opts.rounds ?? 50); i++) {
    if (await cond()) return;
    await drain(r);
    if (await cond()) return;
    if (opts.clock && opts.advanceMs) opts.clock.advance(opts.advanceMs);
  }
  throw new Error("tickUntil: condition not reached");
}

/** One tick with a budget large enough for any default definition (maxMs 60 s + reserve). */
export function drain(r: Ratchet): Promise<TickReport> {
  return r.tick({ budgetMs: 3_600_000 });
}
