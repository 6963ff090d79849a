import { describe, expect, it } from "vitest";
import { AbortedError, LeaseLostError } from "../../src/errors.js";
import { CLAIM_ONE, LIST_READY, READY, SELECT_EXPIRED, SELECT_PENDING } from "../../src/store/sqlite/sql.js";
import type { Fence } from "../../src/store/store.js";
import { claimReq, expectCode, FakeClock, newTask, openStore, unlimited } from "./helpers.js";

const GRACE = 10_000;

async function setup(tasks = [newTask()]) {
  const clock = new FakeClock();
  const store = await openStore(clock);
  const ids = (await store.enqueue(tasks, unlimited)).map((e) => e.id);
  return { clock, store, ids };
}

describe("claims and leases (spec §3)", () => {
  it("§3.2 a claim sets running, attempts+1, epoch+1, lease = now + maxMs + grace, locked_by = worker", async () => {
    const { clock, store, ids } = await setup([newTask({ maxMs: 2_500 })]);
    clock.advance(123);
    const [c] = await store.claim(claimReq({ workerId: "worker-A", leaseGraceMs: GRACE }));
    expect(c!.id).toBe(ids[0]);
    expect(c!.reclaimed).toBe(false);
    const t = (await store.get(ids[0]!))!;
    expect(t.status).toBe("running");
    expect(t.attempts).toBe(1);
    expect(t.epoch).toBe(1);
    expect(t.leaseUntil).toBe(clock.now() + 2_500 + GRACE);
    expect(t.lockedBy).toBe("worker-A");
    expect(t.claimedAt).toBe(clock.now());
    // The rows the claim returns are the ownership: a second claim gets nothing.
    expect(await store.claim(claimReq({ workerId: "worker-B" }))).toEqual([]);
  });

  it("§3.2 the claim is one conditional UPDATE … WHERE <ready> … RETURNING built from the shared READY fragment", () => {
    expect(CLAIM_ONE.trim().startsWith("UPDATE ratchet_tasks")).toBe(true);
    expect(CLAIM_ONE).toContain(READY);
    expect(CLAIM_ONE).toContain("RETURNING");
    expect(LIST_READY).toContain(READY);
  });

  it("§3.2 / §8.5 two stores on one file never both claim the same task", async () => {
    const clock = new FakeClock();
    const { tempDbPath } = await import("./helpers.js");
    const path = tempDbPath();
    const a = await openStore(clock, path);
    const b = await openStore(clock, path);
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

  it("§3.3 an expired lease is reclaimed by the same claim: attempts+1, epoch+1, event 'reclaimed'", async () => {
    const { clock, store, ids } = await setup([newTask({ maxMs: 1_000 })]);
    await store.claim(claimReq({ workerId: "dead" }));
    clock.advance(1_000 + GRACE - 1);
    expect(await store.claim(claimReq({ workerId: "w2" }))).toEqual([]);
    clock.advance(1);
    const [c] = await store.claim(claimReq({ workerId: "w2" }));
    expect(c!.id).toBe(ids[0]);
    expect(c!.reclaimed).toBe(true);
    const t = (await store.get(ids[0]!))!;
    expect(t.attempts).toBe(2);
    expect(t.epoch).toBe(2);
    expect(t.lockedBy).toBe("w2");
    expect(t.leaseUntil).toBe(clock.now() + 1_000 + GRACE);
    const events = await store.events(ids[0]!);
    expect(events.map((e) => e.kind)).toEqual(["reclaimed"]);
  });

  it("§3.7 a stale holder's step commit, heartbeat, progress and settlement are refused and change nothing", async () => {
    const { clock, store, ids } = await setup([newTask({ maxMs: 1_000 })]);
    const id = ids[0]!;
    const [old] = await store.claim(claimReq({ workerId: "old" }));
    const stale: Fence = { taskId: id, token: old!.epoch };
    clock.advance(1_000 + GRACE);
    const [cur] = await store.claim(claimReq({ workerId: "new" }));
    expect(cur!.epoch).toBe(stale.token + 1);
    const before = (await store.get(id))!;

    await expect(store.commitStep(stale, "s", "1")).rejects.toBeInstanceOf(LeaseLostError);
    await expectCode(() => store.commitStep(stale, "s", "1"), "RATCHET_LEASE_LOST");
    await expectCode(() => store.heartbeat(stale, 1_000, GRACE), "RATCHET_LEASE_LOST");
    await expectCode(() => store.progress(stale, 0.5, "x"), "RATCHET_LEASE_LOST");
    const results = await store.settle([
      { kind: "complete", fence: stale, result: "1" },
      { kind: "retry", fence: stale, delayMs: 5, error: { name: "E", message: "m" } },
      { kind: "fail", fence: stale, outcome: "failed", error: { name: "E", message: "m" } },
      { kind: "sleep", fence: stale, step: "nap", delayMs: 5 },
      { kind: "aborted", fence: stale, error: null },
      { kind: "release", fence: stale },
    ]);
    expect(results).toEqual(Array(6).fill("lease_lost"));
    expect(await store.get(id)).toEqual(before);
    expect(await store.steps(id)).toEqual([]);

    // The current holder's writes do land, in the same batch as a stale one.
    const fresh: Fence = { taskId: id, token: cur!.epoch };
    expect(
      await store.settle([
        { kind: "complete", fence: stale, result: '"stale"' },
        { kind: "complete", fence: fresh, result: '"fresh"' },
      ]),
    ).toEqual(["lease_lost", "ok"]);
    expect((await store.get(id))!.result).toBe("fresh");
  });

  it("§3.7 a holder's writes are refused once the task is settled", async () => {
    const { store, ids } = await setup();
    const [c] = await store.claim(claimReq());
    const fence = { taskId: ids[0]!, token: c!.epoch };
    expect(await store.settle([{ kind: "complete", fence, result: "null" }])).toEqual(["ok"]);
    await expectCode(() => store.commitStep(fence, "late", "1"), "RATCHET_LEASE_LOST");
    await expectCode(() => store.heartbeat(fence, 1_000, GRACE), "RATCHET_LEASE_LOST");
    expect(
      await store.settle([{ kind: "fail", fence, outcome: "failed", error: { name: "E", message: "m" } }]),
    ).toEqual(["lease_lost"]);
    expect((await store.get(ids[0]!))!.outcome).toBe("completed");
  });

  it("§3.8 a heartbeat extends the lease to now + maxMs + grace", async () => {
    const { clock, store, ids } = await setup([newTask({ maxMs: 1_000 })]);
    const [c] = await store.claim(claimReq());
    const fence = { taskId: ids[0]!, token: c!.epoch };
    clock.advance(900);
    await store.heartbeat(fence, 1_000, GRACE);
    expect((await store.get(ids[0]!))!.leaseUntil).toBe(clock.now() + 1_000 + GRACE);
    // The old lease end has passed, the new one has not: no reclaim.
    clock.advance(1_000 + GRACE - 1);
    expect(await store.claim(claimReq({ workerId: "other" }))).toEqual([]);
  });

  it("§3.9 the token only increases, across release and retry()", async () => {
    const { clock, store, ids } = await setup([newTask({ maxMs: 1_000 })]);
    const id = ids[0]!;
    const tokens: number[] = [];
    const [a] = await store.claim(claimReq());
    tokens.push(a!.epoch);
    await store.settle([{ kind: "release", fence: { taskId: id, token: a!.epoch } }]);
    expect((await store.get(id))!.epoch).toBe(a!.epoch);
    const [b] = await store.claim(claimReq());
    tokens.push(b!.epoch);
    await store.settle([
      {
        kind: "fail",
        fence: { taskId: id, token: b!.epoch },
        outcome: "failed",
        error: { name: "E", message: "m" },
      },
    ]);
    await store.retry(id);
    expect((await store.get(id))!.epoch).toBe(b!.epoch);
    const [c] = await store.claim(claimReq());
    tokens.push(c!.epoch);
    clock.advance(1_000 + GRACE);
    const [d] = await store.claim(claimReq());
    tokens.push(d!.epoch);
    expect(tokens).toEqual([1, 2, 3, 4]);
    // The released holder's fence (token 1) can never match again.
    await expectCode(() => store.commitStep({ taskId: id, token: 1 }, "x", "1"), "RATCHET_LEASE_LOST");
  });

  it("§4.5 / §7.2 an abort mark refuses the holder's step, heartbeat, progress and outcome writes", async () => {
    const { store, ids } = await setup();
    const id = ids[0]!;
    const [c] = await store.claim(claimReq());
    const fence = { taskId: id, token: c!.epoch };
    expect(await store.abort(id)).toEqual({ state: "marked" });
    await expect(store.commitStep(fence, "s", "1")).rejects.toBeInstanceOf(AbortedError);
    await expectCode(() => store.heartbeat(fence, 1_000, GRACE), "RATCHET_ABORTED");
    await expectCode(() => store.progress(fence, 0.1, null), "RATCHET_ABORTED");
    expect(await store.settle([{ kind: "complete", fence, result: "1" }])).toEqual(["abort_marked"]);
    expect(await store.settle([{ kind: "sleep", fence, step: "n", delayMs: 10 }])).toEqual(["abort_marked"]);
    expect(await store.steps(id)).toEqual([]);
    expect(await store.settle([{ kind: "aborted", fence, error: null }])).toEqual(["ok"]);
    expect((await store.get(id))!.outcome).toBe("aborted");
  });

  it("§3.1 listReady and claim agree: everything listed is claimable, and nothing else is claimed", async () => {
    const clock = new FakeClock();
    const store = await openStore(clock);
    const [a, b, c, d] = (
      await store.enqueue(
        [
          newTask({ maxMs: 1_000 }),
          newTask({ maxMs: 1_000, priority: 5 }),
          newTask({ maxMs: 1_000, delayMs: 600_000 }),
          newTask({ maxMs: 1_000, needs: [{ index: 0 }] }),
        ],
        unlimited,
      )
    ).map((e) => e.id);
    // b is running with a lease that expires; a stays pending.
    const [held] = await store.claim(claimReq({ limit: 1 }));
    expect(held!.id).toBe(b);
    clock.advance(1_000 + GRACE);
    const listed = (await store.listReady("default", 100)).map((t) => t.id).sort();
    expect(listed).toEqual([a, b].sort());
    expect(listed).not.toContain(c);
    expect(listed).not.toContain(d);
    const claimed = (await store.claim(claimReq({ limit: 100 }))).map((t) => t.id).sort();
    expect(claimed).toEqual(listed);
    expect(await store.listReady("default", 100)).toEqual([]);
  });

  it("§3.4 future runAfter and needs-blocked tasks are not claimed and not listed; a due timer is promoted before the claim", async () => {
    const { clock, store, ids } = await setup([
      newTask({ delayMs: 5_000 }),
      newTask({ needs: [{ index: 0 }] }),
    ]);
    const [timer, blocked] = ids as [number, number];
    expect(await store.listReady("default", 10)).toEqual([]);
    expect(await store.claim(claimReq())).toEqual([]);
    expect((await store.get(timer))!.status).toBe("waiting");
    clock.advance(5_000);
    const claimed = await store.claim(claimReq());
    expect(claimed.map((t) => t.id)).toEqual([timer]);
    expect((await store.get(blocked))!.status).toBe("waiting");
    await store.settle([
      { kind: "complete", fence: { taskId: timer, token: claimed[0]!.epoch }, result: "1" },
    ]);
    // §6.2: the last need completed, so the dependent is due at once.
    expect((await store.get(blocked))!.status).toBe("pending");
    expect((await store.claim(claimReq())).map((t) => t.id)).toEqual([blocked]);
  });

  it("§6.2 a dependent whose needs complete before its runAfter stays waiting until then", async () => {
    const { clock, store, ids } = await setup([
      newTask(),
      newTask({ needs: [{ index: 0 }], delayMs: 60_000 }),
    ]);
    const [a, b] = ids as [number, number];
    const [c] = await store.claim(claimReq());
    await store.settle([{ kind: "complete", fence: { taskId: a, token: c!.epoch }, result: "1" }]);
    const t = (await store.get(b))!;
    expect(t.status).toBe("waiting");
    expect(t.needsPending).toBe(0);
    expect(t.wakeAt).toBe(t.runAfter);
    clock.advance(60_000);
    expect((await store.claim(claimReq())).map((x) => x.id)).toEqual([b]);
  });

  it("§3.4 due timers are promoted in bounded batches, and all get promoted eventually", async () => {
    const { clock, store } = await setup([]);
    await store.enqueue(
      Array.from({ length: 2_500 }, () => newTask({ delayMs: 1_000 })),
      unlimited,
    );
    clock.advance(1_000);
    let total = 0;
    for (let i = 0; i < 10 && total < 2_500; i++)
      total += (await store.claim(claimReq({ limit: 1_000 }))).length;
    expect(total).toBe(2_500);
  });

  it("§3.5 higher priority is claimed first; equal priority in FIFO (id) order", async () => {
    const { store, ids } = await setup([
      newTask({ priority: 0 }),
      newTask({ priority: 0 }),
      newTask({ priority: 7 }),
      newTask({ priority: -3 }),
      newTask({ priority: 7 }),
    ]);
    const order: number[] = [];
    for (let i = 0; i < 5; i++) order.push(...(await store.claim(claimReq({ limit: 1 }))).map((t) => t.id));
    expect(order).toEqual([ids[2], ids[4], ids[0], ids[1], ids[3]]);
    // A batch claim returns the same order.
    const second = await setup([
      newTask({ priority: 1 }),
      newTask({ priority: 2 }),
      newTask({ priority: 3 }),
    ]);
    expect((await second.store.claim(claimReq({ limit: 3 }))).map((t) => t.id)).toEqual(
      [...second.ids].reverse(),
    );
  });

  it("§3.5 aging: a task waiting one hour outranks a fresh priority +9 task, but not a fresh +11", async () => {
    const clock = new FakeClock();
    const store = await openStore(clock);
    const [old] = await store.enqueue([newTask({ priority: 0 })], unlimited);
    clock.advance(3_600_000);
    const [p9, p11] = await store.enqueue([newTask({ priority: 9 }), newTask({ priority: 11 })], unlimited);
    const order: number[] = [];
    for (let i = 0; i < 3; i++) order.push(...(await store.claim(claimReq({ limit: 1 }))).map((t) => t.id));
    expect(order).toEqual([p11!.id, old!.id, p9!.id]);
  });

  it("§3.5 age counts from creation and is kept across retries", async () => {
    const clock = new FakeClock();
    const store = await openStore(clock);
    const [old] = await store.enqueue([newTask({ maxMs: 1_000 })], unlimited);
    const [c] = await store.claim(claimReq());
    await store.settle([
      {
        kind: "retry",
        fence: { taskId: old!.id, token: c!.epoch },
        delayMs: 1_000,
        error: { name: "E", message: "m" },
      },
    ]);
    clock.advance(3_600_000);
    const [fresh] = await store.enqueue([newTask({ priority: 9 })], unlimited);
    expect((await store.claim(claimReq({ limit: 1 }))).map((t) => t.id)).toEqual([old!.id]);
    expect((await store.claim(claimReq({ limit: 1 }))).map((t) => t.id)).toEqual([fresh!.id]);
  });

  it("§3.6 a claim takes only tasks in its queues and with names it has", async () => {
    const { store, ids } = await setup([
      newTask({ name: "a" }),
      newTask({ name: "b" }),
      newTask({ name: "a", queue: "q2" }),
      newTask({ name: "c", queue: "q2" }),
    ]);
    expect((await store.claim(claimReq({ names: ["a"], queues: ["default"] }))).map((t) => t.id)).toEqual([
      ids[0],
    ]);
    expect(await store.claim(claimReq({ names: ["zzz"], queues: ["default", "q2"] }))).toEqual([]);
    expect((await store.claim(claimReq({ names: ["a", "b"], queues: ["q2"] }))).map((t) => t.id)).toEqual([
      ids[2],
    ]);
    expect(await store.claim(claimReq({ names: [], queues: ["q2"] }))).toEqual([]);
    expect((await store.get(ids[1]!))!.status).toBe("pending");
    expect((await store.get(ids[3]!))!.status).toBe("pending");
  });

  it("§3.6 an expired lease is reclaimed only by a worker with that queue and name", async () => {
    const { clock, store, ids } = await setup([newTask({ name: "a", queue: "q", maxMs: 1_000 })]);
    await store.claim(claimReq({ names: ["a"], queues: ["q"] }));
    clock.advance(1_000 + GRACE);
    expect(await store.claim(claimReq({ names: ["b"], queues: ["q"] }))).toEqual([]);
    expect(await store.claim(claimReq({ names: ["a"], queues: ["default"] }))).toEqual([]);
    expect((await store.claim(claimReq({ names: ["a"], queues: ["q"] }))).map((t) => t.id)).toEqual(ids);
  });

  it("§3.4 the claim of pending rows uses index ratchet_tasks_ready, never a table scan", async () => {
    const { store } = await setup([]);
    await store.enqueue(
      Array.from({ length: 200 }, (_, i) => newTask({ delayMs: i % 2 ? 10_000 : 0 })),
      unlimited,
    );
    store.db.exec("ANALYZE");
    const plan = store.db
      .prepare(`EXPLAIN QUERY PLAN ${SELECT_PENDING}`)
      .all({ names: '["t"]', queue: "default", limit: 10 }) as {
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

  it("§3.4 the reclaim of expired leases uses index ratchet_tasks_lease, never a table scan", async () => {
    const { store } = await setup([]);
    const plan = store.db
      .prepare(`EXPLAIN QUERY PLAN ${SELECT_EXPIRED}`)
      .all({ now: 0, names: '["t"]', queues: '["default"]', limit: 10 }) as {
      detail: string;
    }[];
    const details = plan.map((p) => p.detail);
    expect(details.some((d) => d.includes("ratchet_tasks_lease"))).toBe(true);
    for (const d of details) expect(d).not.toMatch(/^SCAN ratchet_tasks\b(?!.*USING)/);
  });
});
