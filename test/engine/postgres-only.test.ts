/**
 * PostgreSQL-specific rules (spec §13) that the shared suites cannot express:
 * the database clock, and exactness under concurrent enqueues from several
 * connections (several "machines").
 */
import pg from "pg";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { QueueFullError } from "../../src/errors.js";
import { compile } from "../../src/store/postgres/named.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { claimFast } from "../../src/store/postgres/sql.js";
import type { NewTask } from "../../src/store/store.js";
import { dropSchemas, newSchemaName, PG_URL, pgGate } from "../pg-available.js";

const task = (over: Partial<NewTask> = {}): NewTask => ({
  name: "t",
  version: 1,
  queue: "default",
  input: "null",
  priority: 0,
  maxMs: 1_000,
  maxAttempts: 4,
  delayMs: 0,
  dedupe: null,
  job: null,
  needs: [],
  ...over,
});

describe("PostgreSQL only (spec §13)", () => {
  if (!pgGate(it)) return;
  const schemas: string[] = [];
  const stores: PostgresStore[] = [];
  /** Stores with their own pools on one schema, as separate machines would have. */
  async function machines(n: number): Promise<PostgresStore[]> {
    const schema = newSchemaName();
    schemas.push(schema);
    const out = Array.from({ length: n }, () => new PostgresStore({ connectionString: PG_URL, schema }));
    stores.push(...out);
    await Promise.all(out.map((s) => s.migrate()));
    return out;
  }
  afterEach(async () => {
    vi.restoreAllMocks();
    await Promise.all(stores.splice(0).map((s) => s.close()));
  });
  afterAll(() => dropSchemas(schemas));

  it("§13.2 leases are computed with the database clock, not the worker's", async () => {
    const [store] = await machines(1);
    await store!.enqueue([task({ maxMs: 1_000 })], { maxDepth: () => 100 });
    // The worker's clock is an hour ahead; the lease must not move with it.
    const real = Date.now;
    vi.spyOn(Date, "now").mockImplementation(() => real() + 3_600_000);
    const dbBefore = await store!.now();
    const [claimed] = await store!.claim({
      workerId: "w",
      queues: ["default"],
      names: ["t"],
      limit: 1,
      leaseGraceMs: 500,
    });
    const dbAfter = await store!.now();
    expect(claimed!.leaseUntil).toBeGreaterThanOrEqual(dbBefore + 1_500);
    expect(claimed!.leaseUntil).toBeLessThanOrEqual(dbAfter + 1_500);
    expect(Math.abs(dbBefore - real())).toBeLessThan(60_000);
  });

  it("§13.5 admission control is exact when several machines enqueue into one queue at once", async () => {
    const [a, b] = await machines(2);
    const attempts = Array.from({ length: 24 }, (_, i) =>
      (i % 2 ? a! : b!).enqueue([task()], { maxDepth: () => 10 }).then(
        () => "ok" as const,
        (e: unknown) => (e instanceof QueueFullError ? ("full" as const) : Promise.reject(e)),
      ),
    );
    const results = await Promise.all(attempts);
    expect(results.filter((r) => r === "ok")).toHaveLength(10);
    expect(results.filter((r) => r === "full")).toHaveLength(14);
    const [stats] = await a!.stats();
    expect(stats!.byStatus.pending).toBe(10);
  });

  it("§2.3 / §13.5 concurrent enqueues with one dedupe key from several machines create one task", async () => {
    const [a, b, c] = await machines(3);
    const ids = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        [a!, b!, c!][i % 3]!.enqueue([task({ dedupe: "once" })], { maxDepth: () => 1_000 }),
      ),
    );
    expect(new Set(ids.map(([r]) => r!.id)).size).toBe(1);
    expect(ids.filter(([r]) => !r!.deduped)).toHaveLength(1);
    const [stats] = await a!.stats();
    expect(stats!.byStatus.pending).toBe(1);
  });

  it("§13.4 several machines migrating the same schema at once end with one schema at the latest version", async () => {
    const schema = newSchemaName();
    schemas.push(schema);
    const many = Array.from({ length: 4 }, () => new PostgresStore({ connectionString: PG_URL, schema }));
    stores.push(...many);
    await Promise.all(many.map((s) => s.migrate()));
    const versions = await Promise.all(many.map((s) => s.schemaVersion()));
    expect(new Set(versions).size).toBe(1);
    const rows = await many[0]!.pool.query(`SELECT count(*)::int AS n FROM "${schema}".ratchet_schema`);
    expect(rows.rows[0].n).toBe(versions[0]);
  });

  it("§3.2 / §3.5 a fast claim carries each task whole and in order: names JSON escapes, inputs and checkpoints too long for its text", async () => {
    const [store] = await machines(1);
    const s = store!;
    const names = ["t", 'q"uo\\te', "ünï ✓ \u2028", "t"];
    // A claim of 4,096 takes 32 in its small form (each may inline 1 MiB), then 4,064 in its large
    // one (CLAIM_TEXT_BUDGET / 4,064 = 8,256 bytes each): the even ones from index 32 on, with 10 kB
    // inputs, are read apart. Some are stored at version 3; index 7 is marked for abort while held.
    const long = "x".repeat(10_000);
    const tasks = Array.from({ length: 40 }, (_, i) =>
      task({
        name: names[i % names.length]!,
        input: JSON.stringify({ i, pad: i >= 32 && i % 2 === 0 ? long : "", s: '\u00e9"\\' }),
        job: i % 3 === 0 ? `job-${i}` : null,
        version: i % 5 === 1 ? 3 : 1,
        priority: 0,
      }),
    );
    const ids = (await s.enqueue(tasks, { maxDepth: () => 1_000 })).map((e) => e.id);
    // Task 35 gets a checkpoint longer than its share (released, so claimed again with epoch 2).
    const req = { workerId: "w", queues: ["default"], names: [...new Set(names)], leaseGraceMs: 1_000 };
    const all = async (limit: number) => s.claim({ ...req, limit });
    const first = await all(4_096);
    expect(first.map((c) => c.id)).toEqual(ids);
    const c35 = first[35]!;
    await s.setCheckpoint(
      { taskId: c35.id, token: c35.epoch, claimedAt: c35.claimedAt, mode: "run" },
      JSON.stringify(long),
      "",
    );
    expect((await s.abort(first[7]!.id)).state).toBe("marked");
    const back = first.filter((c) => c.id !== c35.id);
    expect(
      await s.settle(
        back.map((c) => ({
          kind: "release",
          fence: { taskId: c.id, token: c.epoch, claimedAt: c.claimedAt, mode: "run" },
        })),
      ),
    ).toEqual(back.map(() => "ok"));
    expect(
      await s.settle([
        {
          kind: "release",
          fence: { taskId: c35.id, token: c35.epoch, claimedAt: c35.claimedAt, mode: "run" },
        },
      ]),
    ).toEqual(["ok"]);
    for (const [round, claimed] of [first, await all(4_096)].entries()) {
      expect(claimed.map((c) => c.id)).toEqual(ids);
      claimed.forEach((c, i) => {
        expect(c).toMatchObject({
          name: names[i % names.length],
          queue: "default",
          status: "running",
          version: i % 5 === 1 ? 3 : 1,
          input: { i, pad: i >= 32 && i % 2 === 0 ? long : "", s: 'é"\\' },
          job: i % 3 === 0 ? `job-${i}` : null,
          epoch: round + 1,
          attempts: 1,
          fresh: round === 0,
          checkpoint: round === 1 && i === 35 ? long : null,
          lockedBy: "w",
          abortRequested: round === 1 && i === 7,
        });
        expect(c.leaseUntil).toBe(c.claimedAt! + 1_000 + 1_000);
      });
    }
  });

  it("§3.2 / §5 a fast claim carries a retried task's attempt count, epoch and first start", async () => {
    const [store] = await machines(1);
    const s = store!;
    const [x] = (await s.enqueue([task({ queue: "a" })], { maxDepth: () => 100 })).map((e) => e.id);
    const req = { workerId: "w", names: ["t"], limit: 64, leaseGraceMs: 1_000 };
    const [first] = await s.claim({ ...req, queues: ["a"] });
    expect(first).toMatchObject({ id: x, attempts: 1, epoch: 1, fresh: true });
    const error = { name: "Error", message: "boom" };
    expect(
      await s.settle([
        {
          kind: "retry",
          fence: { taskId: x!, token: first!.epoch, claimedAt: first!.claimedAt },
          delayMs: 0,
          error,
        },
      ]),
    ).toEqual(["ok"]);
    // A claim of another queue promotes the due timer (spec §3.4) and claims nothing, so the next
    // claim of "a" finds the task pending and takes it in the fast form (sql.ts claimFast), which
    // the spy below checks: a claim that promotes, or finds a lease to reclaim, goes the full way.
    expect(await s.claim({ ...req, queues: ["b"] })).toEqual([]);
    expect((await s.get(x!))!.status).toBe("pending");
    const texts: string[] = [];
    const query = pg.Client.prototype.query;
    vi.spyOn(pg.Client.prototype, "query").mockImplementation(function (this: pg.Client, ...a: unknown[]) {
      const q = a[0] as string | { text?: string };
      texts.push(typeof q === "string" ? q : (q.text ?? ""));
      return (query as (...x: unknown[]) => unknown).apply(this, a);
    } as typeof query);
    const [again] = await s.claim({ ...req, queues: ["a"] });
    vi.restoreAllMocks();
    expect(texts.filter((t) => t.includes("string_agg"))).toHaveLength(1);
    expect(
      texts.some((t) => /lease_until <= .* ORDER BY lease_until/s.test(t) && !t.includes("string_agg")),
    ).toBe(false);
    expect(again).toMatchObject({
      id: x,
      queue: "a",
      attempts: 2,
      epoch: 2,
      fresh: false,
      startedAt: first!.startedAt,
      status: "running",
    });
    expect(again!.claimedAt).toBeGreaterThanOrEqual(first!.claimedAt!);
  });

  it("§14.9 a seat release passes over a parked task another transaction woke and claimed: it never runs twice", async () => {
    const [store] = await machines(1);
    const s = store!;
    const seat = { seat: "g", rate: null, fair: null };
    const [h, x] = (
      await s.enqueue([task({ gates: seat }), task({ gates: seat })], { maxDepth: () => 100 })
    ).map((e) => e.id);
    const req = {
      workerId: "A",
      queues: ["default"],
      names: ["t"],
      limit: 5,
      leaseGraceMs: 1_000,
      limits: { seats: { g: 1 }, rates: {} },
    };
    const [held] = await s.claim(req);
    expect(held!.id).toBe(h);
    expect((await s.get(x!))!.waitOn).toBe("seat");
    // Another session wakes X and claims it for worker B, holding X's row until it commits…
    const other = new pg.Client({ connectionString: PG_URL });
    await other.connect();
    try {
      const sql = (text: string) => text.replaceAll("{s}", `"${s.schema}"`);
      await other.query("BEGIN");
      await other.query(
        sql("UPDATE {s}.ratchet_tasks SET status = 'pending', wait_on = NULL WHERE id = $1"),
        [x],
      );
      // …while H completes: its release trigger must neither wait for X nor set it pending again.
      const settled = await s.settle([
        {
          kind: "complete",
          fence: { taskId: h!, token: held!.epoch, claimedAt: held!.claimedAt },
          result: "null",
        },
      ]);
      expect(settled).toEqual(["ok"]);
      await other.query(
        sql(
          "UPDATE {s}.ratchet_tasks SET status = 'running', attempts = attempts + 1, epoch = epoch + 1, locked_by = 'B', lease_until = 9e15 WHERE id = $1",
        ),
        [x],
      );
      await other.query("COMMIT");
    } finally {
      await other.end();
    }
    expect(await s.get(x!)).toMatchObject({ status: "running", lockedBy: "B" });
    expect(await s.claim({ ...req, workerId: "C" })).toEqual([]);
  });

  it("§10.1 / §13.4 opening a schema already at the latest version waits for no migration lock; a new one does", async () => {
    const [first] = await machines(1);
    const schema = first!.schema;
    const holder = new pg.Client(PG_URL);
    await holder.connect();
    try {
      // Another process holds the migration lock (as one migrating would) for the whole test.
      await holder.query("BEGIN");
      await holder.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`ratchet-migrate:${schema}`]);
      const again = new PostgresStore({ connectionString: PG_URL, schema });
      stores.push(again);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        again.migrate(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error("the open waited for the migration lock")), 10_000);
        }),
      ]).finally(() => clearTimeout(timer));
      expect(await again.schemaVersion()).toBe(await first!.schemaVersion());
      // A schema not yet made takes the lock and waits for it.
      const fresh = newSchemaName();
      schemas.push(fresh);
      await holder.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`ratchet-migrate:${fresh}`]);
      const waiting = new PostgresStore({ connectionString: PG_URL, schema: fresh });
      stores.push(waiting);
      let done = false;
      const migrating = waiting.migrate().then(() => {
        done = true;
      });
      await new Promise((r) => setTimeout(r, 300));
      expect(done).toBe(false);
      await holder.query("COMMIT");
      await migrating;
      expect(await waiting.schemaVersion()).toBe(await first!.schemaVersion());
    } finally {
      await holder.query("ROLLBACK").catch(() => {});
      await holder.end();
    }
  });

  it("§13.8 only the claim's own transaction commits without waiting for the disk: the settlement after it on the same connection waits", async () => {
    const schema = newSchemaName();
    schemas.push(schema);
    // One connection: the claim and the settlement after it share it, as they may in any pool.
    const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
    const store = new PostgresStore({ pool, schema });
    try {
      await store.migrate();
      await store.enqueue([task(), task()], { maxDepth: () => 100 });
      const claimed = await store.claim({
        workerId: "w",
        queues: ["default"],
        names: ["t"],
        limit: 2,
        leaseGraceMs: 500,
      });
      expect(claimed).toHaveLength(2);
      // set_config(…, true) lasts to the end of the claim's transaction; a session-wide setting would
      // let every later commit on this connection (completions, enqueues) be lost in a crash.
      expect((await pool.query("SHOW synchronous_commit")).rows[0].synchronous_commit).toBe("on");
      const fence = { taskId: claimed[0]!.id, token: claimed[0]!.epoch, claimedAt: claimed[0]!.claimedAt };
      expect(await store.settle([{ kind: "complete", fence, result: "1" }])).toEqual(["ok"]);
      expect((await pool.query("SHOW synchronous_commit")).rows[0].synchronous_commit).toBe("on");
    } finally {
      await store.close();
      await pool.end();
    }
  });

  it("§13.8 / §3.7 a claim lost in a crash: its token is issued again, and the fence tells the claims apart by their time", async () => {
    const [store] = await machines(1);
    const [id] = (await store!.enqueue([task({ maxMs: 60_000 })], { maxDepth: () => 100 })).map((e) => e.id);
    const schema = schemas.at(-1)!;
    const raw = new pg.Client({ connectionString: PG_URL });
    await raw.connect();
    try {
      const cols = "status, epoch, attempts, lease_until, locked_by, started_at, claimed_at";
      const before = (await raw.query(`SELECT ${cols} FROM "${schema}".ratchet_tasks WHERE id = $1`, [id]))
        .rows[0];
      const req = { workerId: "w", queues: ["default"], names: ["t"], limit: 1, leaseGraceMs: 500 };
      const [lost] = await store!.claim(req);
      expect(lost!.id).toBe(id);
      // The claim's commit did not reach the disk before the crash: the row is as it was before it.
      await raw.query(
        `UPDATE "${schema}".ratchet_tasks SET (${cols}) = ($2, $3, $4, $5, $6, $7, $8) WHERE id = $1`,
        [id, ...Object.values(before)],
      );
      // The database clock moves on (a crash and recovery take far longer than this).
      await new Promise((r) => setTimeout(r, 5));
      // The same worker claims the task again: the same token, a later claim time.
      const [again] = await store!.claim(req);
      expect(again!.id).toBe(id);
      expect(again!.epoch).toBe(lost!.epoch);
      expect(again!.claimedAt).toBeGreaterThan(lost!.claimedAt);
      const stale = { taskId: id!, token: lost!.epoch, claimedAt: lost!.claimedAt };
      const fence = { taskId: id!, token: again!.epoch, claimedAt: again!.claimedAt };
      // Every write of the lost claim's holder is refused and changes nothing.
      await expect(store!.commitStep(stale, "s", "1")).rejects.toMatchObject({ code: "RATCHET_LEASE_LOST" });
      await expect(store!.commitSteps([{ fence: stale, name: "s", result: "1" }])).resolves.toEqual([
        "lease_lost",
      ]);
      await expect(store!.heartbeat(stale, 1_000, 500)).rejects.toMatchObject({ code: "RATCHET_LEASE_LOST" });
      await expect(store!.progress(stale, 0.5, null)).rejects.toMatchObject({ code: "RATCHET_LEASE_LOST" });
      const row = await store!.get(id!);
      expect(
        await store!.settle([
          { kind: "complete", fence: stale, result: '"lost"' },
          { kind: "retry", fence: stale, delayMs: 0, error: { name: "E", message: "x" } },
          { kind: "release", fence: stale },
        ]),
      ).toEqual(["lease_lost", "lease_lost", "lease_lost"]);
      expect(await store!.get(id!)).toEqual(row);
      expect(await store!.steps(id!)).toEqual([]);
      // The claim that stands writes, and its outcome is the one kept.
      await store!.commitStep(fence, "s", "2");
      expect(await store!.settle([{ kind: "complete", fence, result: '"kept"' }])).toEqual(["ok"]);
      const done = await store!.get(id!);
      expect(done!.outcome).toBe("completed");
      expect(done!.result).toBe("kept");
      expect((await store!.steps(id!)).map((s) => s.result)).toEqual([2]);
    } finally {
      await raw.end();
    }
  });
  it("§3.4 no plan of a claim statement scans the task table, the generic plan the cache keeps included", async () => {
    // 5,000 future tasks and a few due ones, analyzed. A generic plan is costed without the
    // parameters' values: with the promotion's bound a parameter, it took the promotion for a tenth
    // of the waiting rows and joined them to a scan of the whole table (sql.ts PROMOTE_CTE).
    const [store] = await machines(1);
    const unlimited = { maxDepth: () => 1_000_000 };
    for (let i = 0; i < 5; i++)
      await store!.enqueue(
        Array.from({ length: 1_000 }, () => task({ delayMs: 86_400_000 })),
        unlimited,
      );
    await store!.enqueue(
      Array.from({ length: 20 }, () => task()),
      unlimited,
    );
    const raw = new pg.Client(PG_URL);
    await raw.connect();
    try {
      await raw.query(`ANALYZE "${store!.schema}".ratchet_tasks`);
      for (const mode of ["force_generic_plan", "force_custom_plan"]) {
        await raw.query(`SET plan_cache_mode = ${mode}`);
        // The small form (one claim's worth of free slots) and the large one (a prefetching refill).
        for (const [n, stmt] of [16, 512].entries()) {
          const c = compile(claimFast(stmt), `"${store!.schema}"`);
          const name = `claim_${mode}_${n}`;
          await raw.query(`PREPARE ${name} AS ${c.text}`);
          const values: Record<string, string> = {
            grace: "1000",
            worker: "'w'",
            queue: "'default'",
            queues: "'{default}'",
            names: "'{t}'",
            limit: String(stmt),
            now: "NULL",
          };
          const args = c.params.map((p) => values[p] ?? "NULL").join(", ");
          const plan = (await raw.query(`EXPLAIN EXECUTE ${name}(${args})`)).rows
            .map((r: { "QUERY PLAN": string }) => r["QUERY PLAN"])
            .join("\n");
          expect(plan, `${mode}, claimFast(${stmt})`).not.toMatch(/Seq Scan on ratchet_tasks/);
          expect(plan, `${mode}, claimFast(${stmt})`).toMatch(/ratchet_tasks_ready/);
        }
      }
    } finally {
      await raw.end();
    }
  });
});
