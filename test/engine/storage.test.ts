import Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import { defineTask, Ratchet } from "../../src/index.js";
import { LATEST_VERSION, MIGRATIONS } from "../../src/store/sqlite/migrations.js";
import type { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import {
  deferred,
  drain,
  expectCode,
  FakeClock,
  onCleanup,
  openRatchet,
  openStore,
  silentLogger,
  tempDbPath,
} from "./helpers.js";

const noop = defineTask({ name: "noop", maxMs: 1_000, run: () => "ok" });

describe("storage (spec §10–§11)", () => {
  it("§10.1 two instances opening the same new file at once both migrate safely", async () => {
    const path = tempDbPath();
    const opens = await Promise.all(
      Array.from({ length: 4 }, () =>
        Ratchet.open({ store: `sqlite:${path}`, tasks: [noop], logger: silentLogger }),
      ),
    );
    for (const r of opens) onCleanup(() => r.close());
    const db = (opens[0]!.store as SqliteStore).db;
    const versions = db.prepare("SELECT version FROM ratchet_schema ORDER BY version").all() as {
      version: number;
    }[];
    expect(versions.map((v) => v.version)).toEqual(MIGRATIONS.map((m) => m.version));
    const id = await opens[1]!.enqueue(noop);
    await drain(opens[2]!);
    expect((await opens[3]!.get(id))!.outcome).toBe("completed");
  });

  it("§10.1 reopening a migrated file runs no migration again and keeps the data", async () => {
    const path = tempDbPath();
    const a = await Ratchet.open({ store: `sqlite:${path}`, tasks: [noop], logger: silentLogger });
    const id = await a.enqueue(noop, { keep: true });
    await a.close();
    const b = await openRatchet([noop], { store: `sqlite:${path}` });
    expect((await b.get(id))!.input).toEqual({ keep: true });
    const n = (b.store as SqliteStore).db.prepare("SELECT count(*) AS n FROM ratchet_schema").get() as {
      n: number;
    };
    expect(n.n).toBe(MIGRATIONS.length);
  });

  it("§10.1 a schema newer than the code is refused with RATCHET_SCHEMA_TOO_NEW, and nothing is written", async () => {
    const path = tempDbPath();
    const a = await Ratchet.open({ store: `sqlite:${path}`, tasks: [noop], logger: silentLogger });
    await a.close();
    const raw = new Database(path);
    raw.prepare("INSERT INTO ratchet_schema (version) VALUES (?)").run(LATEST_VERSION + 1);
    raw.close();
    await expectCode(
      () => Ratchet.open({ store: `sqlite:${path}`, tasks: [noop], logger: silentLogger }),
      "RATCHET_SCHEMA_TOO_NEW",
    );
    const check = new Database(path);
    const max = check.prepare("SELECT max(version) AS v FROM ratchet_schema").get() as { v: number };
    check.close();
    expect(max.v).toBe(LATEST_VERSION + 1);
  });

  it("§10.2 the SQLite store uses WAL and busy_timeout, synchronous NORMAL by default and FULL on request", async () => {
    const path = tempDbPath();
    const a = await openRatchet([noop], { store: `sqlite:${path}` });
    const db = (a.store as SqliteStore).db;
    expect(db.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(db.pragma("synchronous", { simple: true })).toBe(1);
    expect(db.pragma("busy_timeout", { simple: true })).toBeGreaterThan(0);
    const b = await openRatchet([noop], { store: `sqlite:${tempDbPath()}`, synchronous: "FULL" });
    expect((b.store as SqliteStore).db.pragma("synchronous", { simple: true })).toBe(2);
    await expectCode(
      () => Ratchet.open({ store: "sqlite::memory:", synchronous: "OFF" as "FULL", logger: silentLogger }),
      "RATCHET_CONFIG",
    );
    await expectCode(() => Ratchet.open({ store: "postgres://x", logger: silentLogger }), "RATCHET_CONFIG");
  });

  it("§10.2 a committed task survives closing and reopening the file", async () => {
    const path = tempDbPath();
    const a = await Ratchet.open({ store: `sqlite:${path}`, tasks: [noop], logger: silentLogger });
    const id = await a.enqueue(noop);
    await drain(a);
    await a.close();
    const b = await openRatchet([noop], { store: `sqlite:${path}` });
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
    const clock = new FakeClock();
    const store = await openStore(clock);
    const [t] = await store.enqueue(
      [
        {
          name: "t",
          version: 1,
          queue: "default",
          input: "null",
          maxAttempts: 4,
          priority: 0,
          maxMs: 1,
          delayMs: 0,
          dedupe: null,
          job: null,
          needs: [],
        },
      ],
      { maxDepth: () => 10 },
    );
    expect(() =>
      store.db.prepare("UPDATE ratchet_tasks SET outcome = 'completed' WHERE id = ?").run(t!.id),
    ).toThrow();
    expect(() =>
      store.db.prepare("UPDATE ratchet_tasks SET status = 'terminal' WHERE id = ?").run(t!.id),
    ).toThrow();
    expect(() =>
      store.db.prepare("UPDATE ratchet_tasks SET status = 'blocked' WHERE id = ?").run(t!.id),
    ).toThrow();
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
    const r = await openRatchet([t], { clock: { now: () => Date.now() } });
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
