import Database from "better-sqlite3";
import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { defineTask, Ratchet } from "../../src/index.js";
import { PG_LATEST_VERSION, PG_MIGRATIONS } from "../../src/store/postgres/migrations.js";
import type { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { LATEST_VERSION, MIGRATIONS } from "../../src/store/sqlite/migrations.js";
import type { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { PG_URL } from "../pg-available.js";
import {
  type Backend,
  createStore,
  deferred,
  drain,
  expectCode,
  FakeClock,
  forEachBackend,
  newTask,
  onCleanup,
  openRatchet,
  openStore,
  type StoreOptions,
  sharedStoreOptions,
  silentLogger,
  tempDbPath,
} from "./helpers.js";

const noop = defineTask({ name: "noop", maxMs: 1_000, run: () => "ok" });

/**
 * Runs raw SQL on the storage behind `loc`, outside Ratchet (white-box checks).
 * `{s}.` prefixes a table with the PostgreSQL schema (and vanishes on SQLite).
 */
async function rawSql(loc: StoreOptions, sql: string, params: unknown[] = []): Promise<unknown[]> {
  const store = loc.store as string;
  if (store.startsWith("sqlite:")) {
    const db = new Database(store.slice("sqlite:".length));
    try {
      const st = db.prepare(sql.replaceAll("{s}.", "").replace(/\$\d+/g, "?"));
      return st.reader ? st.all(...params) : [st.run(...params)];
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return (await client.query(sql.replaceAll("{s}.", `"${loc.postgres!.schema}".`), params)).rows;
  } finally {
    await client.end();
  }
}

const migrations = (b: Backend) => (b === "sqlite" ? MIGRATIONS : PG_MIGRATIONS);
const latest = (b: Backend) => (b === "sqlite" ? LATEST_VERSION : PG_LATEST_VERSION);

forEachBackend((backend) => {
  describe("storage (spec §10–§11)", () => {
    it("§10.1 several instances opening the same new storage at once all migrate safely", async () => {
      const loc = sharedStoreOptions();
      const opens = await Promise.all(
        Array.from({ length: 4 }, () => Ratchet.open({ ...loc, tasks: [noop], logger: silentLogger })),
      );
      for (const r of opens) onCleanup(() => r.close());
      const versions = await rawSql(loc, "SELECT version FROM {s}.ratchet_schema ORDER BY version");
      expect(versions.map((v) => Number((v as { version: unknown }).version))).toEqual(
        migrations(backend).map((m) => m.version),
      );
      const id = await opens[1]!.enqueue(noop);
      await drain(opens[2]!);
      expect((await opens[3]!.get(id))!.outcome).toBe("completed");
    });

    it("§10.1 reopening migrated storage runs no migration again and keeps the data", async () => {
      const loc = sharedStoreOptions();
      const a = await Ratchet.open({ ...loc, tasks: [noop], logger: silentLogger });
      const id = await a.enqueue(noop, { keep: true });
      await a.close();
      const b = await openRatchet([noop], loc);
      expect((await b.get(id))!.input).toEqual({ keep: true });
      expect(await (b.store as SqliteStore | PostgresStore).schemaVersion()).toBe(latest(backend));
      const n = await rawSql(loc, "SELECT count(*) AS n FROM {s}.ratchet_schema");
      expect(Number((n[0] as { n: unknown }).n)).toBe(migrations(backend).length);
    });

    it("§10.1 a schema newer than the code is refused with RATCHET_SCHEMA_TOO_NEW, and nothing is written", async () => {
      const loc = sharedStoreOptions();
      const a = await Ratchet.open({ ...loc, tasks: [noop], logger: silentLogger });
      await a.close();
      await rawSql(loc, "INSERT INTO {s}.ratchet_schema (version) VALUES ($1)", [latest(backend) + 1]);
      await expectCode(
        () => Ratchet.open({ ...loc, tasks: [noop], logger: silentLogger }),
        "RATCHET_SCHEMA_TOO_NEW",
      );
      const max = await rawSql(loc, "SELECT max(version) AS v FROM {s}.ratchet_schema");
      expect(Number((max[0] as { v: unknown }).v)).toBe(latest(backend) + 1);
    });

    it("§10.2 a committed task survives closing and reopening the storage", async () => {
      const loc = sharedStoreOptions();
      const a = await Ratchet.open({ ...loc, tasks: [noop], logger: silentLogger });
      const id = await a.enqueue(noop);
      await drain(a);
      await a.close();
      const b = await openRatchet([noop], loc);
      expect((await b.get(id))!.outcome).toBe("completed");
    });

    it("§10.3 terminal tasks are kept until pruned; prune deletes only old terminal tasks, in bounded batches", async () => {
      const clock = new FakeClock();
      const r = await openRatchet([noop], { clock });
      const done = await r.enqueueMany(Array.from({ length: 5 }, () => ({ task: noop })));
      await drain(r);
      const live = await r.enqueue(noop, null, { delayMs: 60_000 });
      clock.advance(10_000);
      expect(await r.store.prune(60_000, 100)).toBe(0); // not old enough
      expect(await r.store.prune(5_000, 2)).toBe(2);
      expect(await r.store.prune(5_000, 2)).toBe(2);
      expect(await r.store.prune(5_000, 2)).toBe(1);
      expect(await r.store.prune(5_000, 2)).toBe(0);
      for (const id of done) expect(await r.get(id)).toBeNull();
      expect((await r.get(live))!.status).toBe("waiting");
    });

    it("§11.1 the store reads the injected clock: created, claimed and ended times are the fake clock's", async () => {
      const clock = new FakeClock(Date.UTC(2030, 5, 1));
      const r = await openRatchet([noop], { clock });
      const id = await r.enqueue(noop);
      clock.advance(1_234);
      await drain(r);
      const rec = (await r.get(id))!;
      expect(rec.createdAt).toBe(Date.UTC(2030, 5, 1));
      expect(rec.claimedAt).toBe(Date.UTC(2030, 5, 1) + 1_234);
      expect(rec.endedAt).toBe(Date.UTC(2030, 5, 1) + 1_234);
      const store = await openStore(clock);
      expect(await store.now()).toBe(clock.now());
    });

    it("§1.1 a task has an outcome exactly when it is terminal (enforced by the schema)", async () => {
      const loc = sharedStoreOptions();
      const r = await openRatchet([noop], loc);
      const [t] = await r.store.enqueue([newTask()], { maxDepth: () => 10 });
      for (const sql of [
        "UPDATE {s}.ratchet_tasks SET outcome = 'completed' WHERE id = $1",
        "UPDATE {s}.ratchet_tasks SET status = 'terminal' WHERE id = $1",
        "UPDATE {s}.ratchet_tasks SET status = 'blocked' WHERE id = $1",
        "UPDATE {s}.ratchet_tasks SET status = 'terminal', outcome = 'done' WHERE id = $1",
        "UPDATE {s}.ratchet_tasks SET held_outcome = 'done' WHERE id = $1",
      ]) {
        await expect(rawSql(loc, sql, [t!.id]), sql).rejects.toThrow();
      }
      expect((await r.get(t!.id))!.status).toBe("pending");
      // Every allowed value passes (each rule is a list, written differently per store).
      for (const v of ["completed", "failed", "aborted", "faulted"])
        await rawSql(loc, "UPDATE {s}.ratchet_tasks SET held_outcome = $1 WHERE id = $2", [v, t!.id]);
      for (const v of ["completed", "failed", "aborted", "upstream_failed", "orphaned", "faulted"])
        await rawSql(loc, "UPDATE {s}.ratchet_tasks SET status = 'terminal', outcome = $1 WHERE id = $2", [
          v,
          t!.id,
        ]);
      for (const v of ["completing", "waiting", "running", "pending"])
        await rawSql(loc, "UPDATE {s}.ratchet_tasks SET status = $1, outcome = NULL WHERE id = $2", [
          v,
          t!.id,
        ]);
    });
  });

  describe("time (spec §11.2)", () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it("§11.2 a wall-clock jump does not expire a running invocation's deadline", async () => {
      vi.useFakeTimers({ toFake: ["Date"] });
      const started = deferred();
      const gate = deferred();
      const t = defineTask({
        name: "steady",
        maxMs: 60_000,
        retry: { maxAttempts: 1 },
        async run() {
          started.resolve();
          await gate.promise;
          return "done";
        },
      });
      // The worker's wall clock jumps. On SQLite the store reads that clock (spec §11.1); on PostgreSQL
      // it keeps the database clock, as in production (a store on the jumped clock would see the lease
      // as expired, and a claim that happened to run after the jump could rightly take the task).
      const clock = { now: () => Date.now() };
      const r = await openRatchet(
        [t],
        backend === "sqlite" ? { clock } : { clock, store: await createStore() },
      );
      const id = await r.enqueue(t);
      const ticking = r.tick({ budgetMs: 3_600_000 });
      await started.promise;
      vi.setSystemTime(Date.now() + 86_400_000);
      gate.resolve();
      await ticking;
      vi.useRealTimers();
      const rec = await r.waitFor(id, { timeoutMs: 10_000 });
      expect(rec.outcome).toBe("completed");
    });

    it("§11.2 a wall-clock jump does not cut short waitFor's timeout", async () => {
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
      const r = await openRatchet([noop]);
      const id = await r.enqueue(noop, null, { delayMs: 3_600_000 });
      let outcome: string | undefined;
      const waiting = r.waitFor(id, { timeoutMs: 60_000 }).then(
        () => {
          outcome = "resolved";
        },
        (e: { code?: string }) => {
          outcome = e.code;
        },
      );
      await vi.advanceTimersByTimeAsync(1_000);
      vi.setSystemTime(Date.now() + 86_400_000); // the wall clock jumps a day; no time passes
      await vi.advanceTimersByTimeAsync(1_000);
      expect(outcome).toBeUndefined();
      await r.abort(id);
      await vi.advanceTimersByTimeAsync(1_000);
      await waiting;
      expect(outcome).toBe("resolved");
    });

    it("§11.2 a wall-clock jump does not cut short the shutdown wait for in-flight work", async () => {
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
      const started = deferred();
      const gate = deferred();
      const t = defineTask({
        name: "inflight",
        async run() {
          started.resolve();
          await gate.promise;
          return "finished";
        },
      });
      const r = await openRatchet([t], { pollIntervalMs: 10 });
      const id = await r.enqueue(t);
      await r.start({ concurrency: 1, shutdownTimeoutMs: 60_000 });
      for (let i = 0; i < 100 && (await r.get(id))!.status !== "running"; i++)
        await vi.advanceTimersByTimeAsync(5);
      await started.promise;
      const stopping = r.stop();
      await vi.advanceTimersByTimeAsync(200);
      vi.setSystemTime(Date.now() + 86_400_000); // the wall clock jumps a day; 200 ms have passed
      await vi.advanceTimersByTimeAsync(200);
      const kinds = (await r.store.events(id)).map((e) => e.kind);
      expect(kinds).not.toContain("released");
      expect((await r.get(id))!.status).toBe("running");
      gate.resolve();
      await vi.advanceTimersByTimeAsync(200);
      await stopping;
    });
  });
});

describe("storage on SQLite (spec §10.2)", () => {
  it("§10.1 a database at schema 5 migrates through 6 in place: its CHECKs rewritten, its rows and id sequence kept", async () => {
    const path = tempDbPath();
    const db = new Database(path);
    db.exec("CREATE TABLE ratchet_schema (version INTEGER NOT NULL)");
    for (const m of MIGRATIONS.filter((x) => x.version <= 5)) {
      db.exec(m.sql!);
      db.prepare("INSERT INTO ratchet_schema (version) VALUES (?)").run(m.version);
    }
    const insert =
      db.prepare(`INSERT INTO ratchet_tasks (id, queue, name, version, input, status, priority, order_key,
      max_ms, max_attempts, run_after, created_at, updated_at) VALUES (?, 'default', 'noop', 1, '{"k":1}', 'pending', 0, 0, 1000, 3, 0, 0, 0)`);
    insert.run(1);
    insert.run(7);
    db.prepare("DELETE FROM ratchet_tasks WHERE id = 7").run();
    db.close();

    const r = await openRatchet([noop], { store: `sqlite:${path}` });
    expect(await (r.store as SqliteStore).schemaVersion()).toBe(LATEST_VERSION);
    const text = (r.store as SqliteStore).db
      .prepare("SELECT sql FROM sqlite_schema WHERE name = 'ratchet_tasks'")
      .pluck()
      .get() as string;
    expect(text).not.toMatch(/ IN \(/);
    expect(text).toContain("CHECK (CASE status WHEN 'pending' THEN 1");
    expect((await r.get(1))!.input).toEqual({ k: 1 });
    // The sequence was not reset: a deleted id is never given again (spec §1.4).
    expect(await r.enqueue(noop)).toBe(8);
    await drain(r);
    expect((await r.get(1))!.outcome).toBe("completed");
    expect((r.store as SqliteStore).db.pragma("integrity_check", { simple: true })).toBe("ok");
  });

  it("§10.1 migration 6 stops, changing nothing, on a table whose CHECK text is not the one it expects", async () => {
    const path = tempDbPath();
    const db = new Database(path);
    db.exec("CREATE TABLE ratchet_schema (version INTEGER NOT NULL)");
    for (const m of MIGRATIONS.filter((x) => x.version <= 5)) {
      // A hand-edited schema: one of the three rules written differently.
      db.exec(m.sql!.replace("CHECK (held_outcome IN (", "CHECK (held_outcome  IN ("));
      db.prepare("INSERT INTO ratchet_schema (version) VALUES (?)").run(m.version);
    }
    const before = db.prepare("SELECT sql FROM sqlite_schema WHERE name = 'ratchet_tasks'").pluck().get();
    db.close();
    await expect(
      Ratchet.open({ store: `sqlite:${path}`, tasks: [noop], logger: silentLogger }),
    ).rejects.toThrow(/migration 6/);
    const after = new Database(path);
    onCleanup(() => {
      after.close();
    });
    expect(after.prepare("SELECT max(version) FROM ratchet_schema").pluck().get()).toBe(5);
    expect(after.prepare("SELECT sql FROM sqlite_schema WHERE name = 'ratchet_tasks'").pluck().get()).toBe(
      before,
    );
  });

  it("§10.2 the SQLite store uses WAL, waits for locks itself (SQLite's busy handler off), synchronous NORMAL by default and FULL on request", async () => {
    const path = tempDbPath();
    const a = await openRatchet([noop], { store: `sqlite:${path}` });
    const db = (a.store as SqliteStore).db;
    expect(db.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(db.pragma("synchronous", { simple: true })).toBe(1);
    // The store's own wait for a lock held elsewhere is tested in sqlite-only.test.ts.
    expect(db.pragma("busy_timeout", { simple: true })).toBe(0);
    const b = await openRatchet([noop], { store: `sqlite:${tempDbPath()}`, synchronous: "FULL" });
    expect((b.store as SqliteStore).db.pragma("synchronous", { simple: true })).toBe(2);
    await expectCode(
      () => Ratchet.open({ store: "sqlite::memory:", synchronous: "OFF" as "FULL", logger: silentLogger }),
      "RATCHET_CONFIG",
    );
    await expectCode(() => Ratchet.open({ store: "mysql://x", logger: silentLogger }), "RATCHET_CONFIG");
  });
});
