/**
 * White-box claim tests that need SQLite itself (its SQL text, query plans,
 * two connections on one file). Everything the Store contract promises is in
 * the conformance suite (src/testing/conformance, run by test/conformance).
 */
import { existsSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { admitRead, FIRST_PARKED } from "../../src/store/gates.js";
import { BACKSTOP_PAGES } from "../../src/store/sqlite/checkpointer.js";
import { CLAIM_ONE, LIST_READY, READY, selectExpired, selectPending } from "../../src/store/sqlite/sql.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { reconcile } from "../../src/store/tree/ops.js";
import { runSync, sqliteParams, sqliteSql } from "../../src/store/tree/program.js";
import {
  claimReq,
  expectCode,
  FakeClock,
  newTask,
  onCleanup,
  openSqliteStore,
  tempDbPath,
  unlimited,
  until,
} from "./helpers.js";

describe("claims on SQLite (spec §3)", () => {
  it("§3.2 the claim is one conditional UPDATE … WHERE <ready> … RETURNING built from the shared READY fragment", () => {
    expect(CLAIM_ONE.trim().startsWith("UPDATE ratchet_tasks")).toBe(true);
    expect(CLAIM_ONE).toContain(READY);
    expect(CLAIM_ONE).toContain("RETURNING");
    expect(LIST_READY).toContain(READY);
  });

  it("§3.2 / §8.5 two stores on one file never both claim the same task", async () => {
    const clock = new FakeClock();
    const path = tempDbPath();
    const a = await openSqliteStore(clock, path);
    const b = await openSqliteStore(clock, path);
    await a.enqueue(
      Array.from({ length: 50 }, () => newTask()),
      unlimited,
    );
    const got: number[] = [];
    for (let i = 0; i < 20; i++) {
      const [x, y] = await Promise.all([
        a.claim(claimReq({ workerId: "a", limit: 2 })),
        b.claim(claimReq({ workerId: "b", limit: 3 })),
      ]);
      got.push(...x.map((t) => t.id), ...y.map((t) => t.id));
    }
    expect(got).toHaveLength(50);
    expect(new Set(got).size).toBe(50);
  });

  it("§3.4 the claim of pending rows uses index ratchet_tasks_ready, never a table scan", async () => {
    const store = await openSqliteStore(new FakeClock());
    await store.enqueue(
      Array.from({ length: 200 }, (_, i) => newTask({ delayMs: i % 2 ? 10_000 : 0 })),
      unlimited,
    );
    store.db.exec("ANALYZE");
    const plan = store.db
      .prepare(`EXPLAIN QUERY PLAN ${selectPending(2)}`)
      .all({ n0: "t", n1: "u", queue: "default", limit: 10 }) as {
      detail: string;
    }[];
    const details = plan.map((p) => p.detail);
    expect(details.some((d) => d.includes("ratchet_tasks_ready"))).toBe(true);
    // The index also gives the claim order: no sort step.
    expect(details.some((d) => d.includes("TEMP B-TREE"))).toBe(false);
    for (const d of details) {
      expect(d, `plan step "${d}"`).not.toMatch(/^SCAN ratchet_tasks\b(?!.*USING)/);
    }
  });

  it("§14.9 admission and seat wake-ups read through the seat indexes and primary keys, never a scan", async () => {
    const store = await openSqliteStore(new FakeClock());
    const seat = { seat: "g\u001fk", rate: null, fair: null };
    await store.enqueue(
      Array.from({ length: 300 }, (_, i) => newTask({ gates: i % 3 ? seat : null })),
      unlimited,
    );
    store.db.exec("ANALYZE");
    const plans: [string, Record<string, unknown>][] = [
      [sqliteSql(admitRead(false)), { names: '["g","g\u001fk"]', seats: '["g\u001fk"]', buckets: '["b"]' }],
      [sqliteSql(admitRead(true)), { names: "[]", seats: '["g\u001fk"]', buckets: "[]", batch: "[1,2]" }],
      [sqliteSql(FIRST_PARKED), { seat: "g\u001fk", n: 1 }],
    ];
    for (const [sql, p] of plans) {
      const details = (store.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(p) as { detail: string }[]).map(
        (x) => x.detail,
      );
      for (const d of details)
        expect(d, `plan step "${d}" of ${sql.slice(0, 60)}`).not.toMatch(/^SCAN ratchet_/);
      if (sql.includes("status = 'running'"))
        expect(details.some((d) => d.includes("ratchet_tasks_seat"))).toBe(true);
      if (sql.includes("wait_on = 'seat'"))
        expect(details.some((d) => d.includes("ratchet_tasks_seat_parked"))).toBe(true);
    }
  });

  it("§12.10 the maintenance reconcile reads through indexes only: its cost does not grow with waiting tasks", async () => {
    const store = await openSqliteStore(new FakeClock());
    await store.enqueue(
      Array.from({ length: 500 }, () => newTask({ delayMs: 86_400_000 })),
      unlimited,
    );
    store.db.exec("ANALYZE");
    const scans: string[] = [];
    store.db.exec("BEGIN");
    try {
      runSync(reconcile(null), (op) => {
        if (op.op === "live") return 0;
        if (op.op !== "q") return undefined;
        const sql = sqliteSql(op.sql);
        const p = { now: 0, ...sqliteParams(op.p) };
        for (const r of store.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(p) as { detail: string }[])
          if (/^SCAN (t|ratchet_tasks)\b(?!.*USING)/.test(r.detail))
            scans.push(`${r.detail}: ${sql.slice(0, 80)}`);
        const st = store.db.prepare(sql);
        if (st.reader) return st.all(p);
        st.run(p);
        return [];
      });
    } finally {
      store.db.exec("ROLLBACK");
    }
    expect(scans).toEqual([]);
  });

  it("§3.4 the reclaim of expired leases uses index ratchet_tasks_lease, never a table scan", async () => {
    const store = await openSqliteStore(new FakeClock());
    const plan = store.db
      .prepare(`EXPLAIN QUERY PLAN ${selectExpired(1, 2)}`)
      .all({ now: 0, n0: "t", n1: "u", q0: "default", limit: 10 }) as {
      detail: string;
    }[];
    const details = plan.map((p) => p.detail);
    expect(details.some((d) => d.includes("ratchet_tasks_lease"))).toBe(true);
    for (const d of details) expect(d).not.toMatch(/^SCAN ratchet_tasks\b(?!.*USING)/);
  });
});

/**
 * Another connection (a worker thread, so that this thread may block in the store's wait) takes the
 * write lock, holds it `ms`, then commits; resolves once the lock is held, with a promise of the commit.
 */
async function holdWriteLock(path: string, ms: number): Promise<{ released: Promise<void> }> {
  const driver = createRequire(import.meta.url).resolve("better-sqlite3");
  const w = new Worker(
    `const { parentPort, workerData } = require("node:worker_threads");
     const Database = require(workerData.driver);
     const db = new Database(workerData.path);
     db.exec("BEGIN IMMEDIATE");
     parentPort.postMessage("held");
     Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, workerData.ms);
     db.exec("COMMIT");
     db.close();
     parentPort.postMessage("released");`,
    { eval: true, workerData: { driver, path, ms } },
  );
  onCleanup(async () => {
    await w.terminate();
  });
  let released!: () => void;
  const done = new Promise<void>((r) => {
    released = r;
  });
  await new Promise<void>((held, fail) => {
    w.on("error", fail);
    w.on("message", (m) => (m === "held" ? held() : released()));
  });
  return { released: done };
}

/** Whether another connection holds the write lock now: a BEGIN IMMEDIATE that may not wait. */
function lockIsHeld(path: string): boolean {
  const Database = createRequire(import.meta.url)("better-sqlite3") as typeof import("better-sqlite3");
  const db = new Database(path, { timeout: 0 });
  try {
    db.exec("BEGIN IMMEDIATE");
    db.exec("ROLLBACK");
    return false;
  } catch (e) {
    if ((e as { code?: string }).code === "SQLITE_BUSY") return true;
    throw e;
  } finally {
    db.close();
  }
}

describe("fences on SQLite (spec §3.7)", () => {
  it("§3.7 a write whose token matches but whose claim time does not is refused: the fence is the token and the claim's time", async () => {
    const clock = new FakeClock();
    const store = await openSqliteStore(clock);
    const id = (await store.enqueue([newTask({ maxMs: 60_000 })], unlimited))[0]!.id;
    const cols = "status, epoch, attempts, lease_until, locked_by, started_at, claimed_at";
    const before = store.db.prepare(`SELECT ${cols} FROM ratchet_tasks WHERE id = ?`).get(id) as Record<
      string,
      unknown
    >;
    const [lost] = await store.claim(claimReq({ workerId: "w" }));
    // The row as if the claim had never committed (what a claim lost in a PostgreSQL crash leaves, §13.8).
    store.db
      .prepare(`UPDATE ratchet_tasks SET (${cols}) = (?, ?, ?, ?, ?, ?, ?) WHERE id = ?`)
      .run(...Object.values(before), id);
    clock.advance(1);
    const [again] = await store.claim(claimReq({ workerId: "w" }));
    expect(again!.epoch).toBe(lost!.epoch);
    const stale = { taskId: id, token: lost!.epoch, claimedAt: lost!.claimedAt };
    const fence = { taskId: id, token: again!.epoch, claimedAt: again!.claimedAt };
    await expectCode(() => store.commitStep(stale, "s", "1"), "RATCHET_LEASE_LOST");
    expect(await store.commitSteps([{ fence: stale, name: "s", result: "1" }])).toEqual(["lease_lost"]);
    await expectCode(() => store.heartbeat(stale, 1_000, 500), "RATCHET_LEASE_LOST");
    await expectCode(() => store.progress(stale, 0.5, null), "RATCHET_LEASE_LOST");
    expect(await store.settle([{ kind: "complete", fence: stale, result: '"lost"' }])).toEqual([
      "lease_lost",
    ]);
    expect(await store.steps(id)).toEqual([]);
    expect(await store.settle([{ kind: "complete", fence, result: '"kept"' }])).toEqual(["ok"]);
    expect((await store.get(id))!.result).toBe("kept");
  });
});

describe("the write lock on SQLite (spec §10.2)", () => {
  it("§10.2 a write that finds the lock held by another connection waits for it, then commits", async () => {
    const path = tempDbPath();
    const store = await openSqliteStore(new FakeClock(), path);
    const lock = await holdWriteLock(path, 300);
    // Held when the write begins (SQLite's own busy handler is off: without the store's wait, the
    // write would fail at once).
    expect(lockIsHeld(path)).toBe(true);
    const [e] = await store.enqueue([newTask()], unlimited);
    await lock.released;
    expect((await store.get(e!.id))?.status).toBe("pending");
  });

  it("§10.2 past busyTimeoutMs the write fails with RATCHET_STORE and changes nothing", async () => {
    const path = tempDbPath();
    await openSqliteStore(new FakeClock(), path);
    const store = new SqliteStore({ path, clock: new FakeClock(), busyTimeoutMs: 30 });
    onCleanup(() => store.close());
    const lock = await holdWriteLock(path, 1_000);
    expect(lockIsHeld(path)).toBe(true);
    const err = await expectCode(() => store.enqueue([newTask()], unlimited), "RATCHET_STORE");
    expect(err.message).toMatch(/locked|busy/i);
    await lock.released;
    expect(await store.list({ limit: 10 })).toEqual([]);
  });
});

describe("checkpoints on SQLite (spec §10.4)", () => {
  it("§10.4 the WAL goes back into the database file on the background thread, not in a commit", async () => {
    const path = tempDbPath();
    const store = await openSqliteStore(new FakeClock(), path);
    // The committing connection's own checkpoints are only the backstop.
    expect(store.db.pragma("wal_autocheckpoint", { simple: true })).toBe(BACKSTOP_PAGES);
    for (let i = 0; i < 20; i++)
      await store.enqueue(
        Array.from({ length: 100 }, () => newTask({ input: JSON.stringify("x".repeat(200)) })),
        unlimited,
      );
    // Far below SQLite's default threshold of 1,000 pages too: without the thread, these pages
    // would stay in the WAL and the database file would not grow.
    const walPages = statSync(`${path}-wal`).size / 4_096;
    expect(walPages).toBeLessThan(1_000);
    const pages = () =>
      (store.db.pragma("page_count", { simple: true }) as number) *
      (store.db.pragma("page_size", { simple: true }) as number);
    await until(() => store.checkpoints.done > 0 && statSync(path).size === pages(), "a checkpoint");
    expect(pages()).toBeGreaterThan(100 * 4_096);
    expect(store.db.prepare("SELECT count(*) AS n FROM ratchet_tasks").get()).toEqual({ n: 2_000 });
  });

  it("§10.4 close lets the thread's connection go first, so the store's own close removes the WAL", async () => {
    const path = tempDbPath();
    const store = new SqliteStore({ path, clock: new FakeClock() });
    await store.migrate();
    await store.enqueue([newTask()], unlimited);
    await until(() => store.checkpoints.done > 0, "a checkpoint");
    expect(existsSync(`${path}-wal`)).toBe(true);
    await store.close();
    expect(existsSync(`${path}-wal`)).toBe(false);
    // The data is in the file itself.
    const again = await openSqliteStore(new FakeClock(), path);
    expect((await again.list({ limit: 10 })).length).toBe(1);
  });

  it("§10.4 a commit that changed no row wakes no checkpoint: an idle worker's empty claims cost the thread nothing", async () => {
    const store = await openSqliteStore(new FakeClock(), tempDbPath());
    await store.enqueue([newTask()], unlimited);
    expect(store.checkpoints.dirty).toBe(true);
    const empty = () => store.claim(claimReq({ queues: ["empty"] }));
    await until(() => store.checkpoints.done > 0 && !store.checkpoints.dirty, "a checkpoint");
    // The first commit after a checkpoint may count the rows of commits that checkpoint already
    // held (at most one checkpoint more); once that one began, empty commits wake nothing.
    await empty();
    await until(() => !store.checkpoints.dirty, "the thread to begin the last checkpoint");
    // Claims of a queue with nothing in it: IMMEDIATE transactions that write nothing.
    for (let i = 0; i < 5; i++) expect(await empty()).toEqual([]);
    expect(store.checkpoints.dirty).toBe(false);
    await store.enqueue([newTask()], unlimited);
    expect(store.checkpoints.dirty).toBe(true);
  });
  it("§10.5 another connection's enqueue to the file wakes a subscriber; its own commits and another's claims do not", async () => {
    const clock = new FakeClock();
    const path = tempDbPath();
    const own = await openSqliteStore(clock, path);
    const other = await openSqliteStore(clock, path);
    let wakes = 0;
    const stop = await own.subscribe(() => wakes++);
    onCleanup(stop);
    await other.enqueue([newTask()], unlimited);
    await until(() => wakes === 1, "the wake of the other connection's enqueue");
    // Its own commits (enqueues, a claim) change nothing it has not seen: no wake for them.
    for (let i = 0; i < 5; i++) await own.enqueue([newTask()], unlimited);
    await own.claim(claimReq({ limit: 3 }));
    // Another connection's claims change the file but add no task: no wake either.
    for (let i = 0; i < 3; i++) expect((await other.claim(claimReq({ limit: 1 }))).length).toBe(1);
    await other.enqueue([newTask()], unlimited);
    await until(() => wakes >= 2, "the wake of the second enqueue");
    expect(wakes).toBe(2);
  });

  it("§10.5 a store in memory has nothing to watch: its subscription is a no-op", async () => {
    const store = new SqliteStore({ path: ":memory:", clock: new FakeClock() });
    await store.migrate();
    const stop = await store.subscribe(() => {
      throw new Error("no wake expected");
    });
    await store.enqueue([newTask()], unlimited);
    await stop();
    await store.close();
  });
});
