/** Conformance: readiness, claims, leases, reclaims and claim order (spec §3, §5.4). */
import { claimReq, completeId, type Define, ERR, fenceOf, GRACE, ids, must, newTask } from "./kit.js";

export function registerClaimTests(it: Define): void {
  it("§3.2 a claim sets running, attempts+1, epoch+1, lease = now + maxMs + grace, locked_by = worker", async ({
    clock,
    store,
    expect,
  }) => {
    const t0 = clock.now();
    const [id] = await ids(store, [newTask({ maxMs: 2_500 })]);
    clock.advance(123);
    const claimed = await store.claim(claimReq({ workerId: "worker-A", leaseGraceMs: GRACE }));
    expect(claimed).toHaveLength(1);
    const c = claimed[0]!;
    expect(c).toMatchObject({ id, reclaimed: false, status: "running", attempts: 1, epoch: 1 });
    const t = await must(store, id!);
    expect(t).toMatchObject({
      status: "running",
      attempts: 1,
      epoch: 1,
      leaseUntil: clock.now() + 2_500 + GRACE,
      lockedBy: "worker-A",
      claimedAt: clock.now(),
      startedAt: clock.now(),
      createdAt: t0,
    });
    // fresh may be false when a store does not know (ClaimedTask.fresh); a first claim never has steps.
    expect(typeof c.fresh).toBe("boolean");
    const { reclaimed: _, fresh: __, ...fields } = c;
    // The claim returns what a worker needs, as the stored record has it now.
    for (const [k, v] of Object.entries(fields))
      expect(v, `claimed.${k} equals the stored record's`).toEqual(t[k as keyof typeof t]);
    expect(Object.keys(fields).sort()).toEqual(
      [
        "id",
        "queue",
        "name",
        "version",
        "input",
        "status",
        "priority",
        "maxMs",
        "attempts",
        "epoch",
        "leaseUntil",
        "lockedBy",
        "job",
        "abortRequested",
        "startedAt",
        "claimedAt",
        "ownerId",
        "scope",
        "checkpoint",
        "seat",
        "rate",
      ].sort(),
    );
    // The rows a claim returns are the ownership: a second claim gets nothing.
    expect(await store.claim(claimReq({ workerId: "worker-B" }))).toEqual([]);
  });

  it("§3.2 a claim of many returns each task as stored: its job and scope, and a retried task's first start", async ({
    clock,
    store,
    expect,
  }) => {
    const [done, retried, rare, plain] = await ids(store, [
      newTask({ maxMs: 1_500 }),
      newTask({ maxMs: 2_500, input: '{"n":2}' }),
      newTask({ maxMs: 3_500, job: "nightly", scope: "tenant-1", input: '{"n":3}' }),
      newTask({ maxMs: 4_500, priority: -1, input: '{"n":4}' }),
    ]);
    const t0 = clock.now();
    const [c1, c2] = await store.claim(claimReq({ limit: 2 }));
    expect([c1!.id, c2!.id]).toEqual([done, retried]);
    await store.settle([{ kind: "complete", fence: fenceOf(c1!), result: "null" }]);
    await store.settle([{ kind: "retry", fence: fenceOf(c2!), delayMs: 0, error: ERR }]);
    clock.advance(777);
    // A claim that takes nothing promotes the retried task's timer, so the next claim finds three
    // pending tasks and nothing to promote (PostgreSQL: its one-statement form, sql.ts claimFast).
    expect(await store.claim(claimReq({ names: ["nobody"] }))).toEqual([]);
    // One claim takes a task that ran before (its start stays) between two that never ran.
    const claimed = await store.claim(claimReq({ limit: 10, workerId: "worker-C" }));
    expect(claimed.map((t) => t.id)).toEqual([retried, rare, plain]);
    expect(claimed.map((t) => t.startedAt)).toEqual([t0, clock.now(), clock.now()]);
    for (const c of claimed) {
      const t = await must(store, c.id);
      expect(t).toMatchObject({ status: "running", lockedBy: "worker-C", claimedAt: clock.now() });
      const { reclaimed: _, fresh: __, ...fields } = c;
      for (const [k, v] of Object.entries(fields))
        expect(v, `task ${c.id}: claimed.${k} equals the stored record's`).toEqual(t[k as keyof typeof t]);
    }
    expect(claimed[0]!.fresh).toBe(false);
    expect(claimed[1]).toMatchObject({ job: "nightly", scope: "tenant-1", input: { n: 3 }, attempts: 1 });
  });

  it("§3.2 a claim takes at most `limit` tasks", async ({ store, expect }) => {
    await ids(
      store,
      Array.from({ length: 5 }, () => newTask()),
    );
    expect(await store.claim(claimReq({ limit: 2 }))).toHaveLength(2);
    expect(await store.claim(claimReq({ limit: 10 }))).toHaveLength(3);
  });

  it("§3.2 / §8.5 concurrent claims on one store never hand a task to two claimers", async ({
    store,
    expect,
  }) => {
    const all = await ids(
      store,
      Array.from({ length: 40 }, () => newTask()),
    );
    const holder = new Map<number, string>();
    const dup: number[] = [];
    for (let round = 0; round < 20 && holder.size < all.length; round++) {
      const workers = ["a", "b", "c", "d"];
      const got = await Promise.all(
        workers.map((w, i) => store.claim(claimReq({ workerId: w, limit: i + 1 }))),
      );
      got.forEach((batch, i) => {
        for (const t of batch) {
          if (holder.has(t.id)) dup.push(t.id);
          holder.set(t.id, workers[i]!);
          expect(t.lockedBy).toBe(workers[i]);
        }
      });
    }
    expect(dup, "tasks claimed twice").toEqual([]);
    expect([...holder.keys()].sort((p, q) => p - q)).toEqual(all);
    for (const [id, w] of holder) expect((await must(store, id)).lockedBy).toBe(w);
  });

  it("§3.3 an expired lease is reclaimed by the claim: attempts+1, epoch+1, event 'reclaimed' naming the previous holder", async ({
    clock,
    store,
    expect,
  }) => {
    const [id] = await ids(store, [newTask({ maxMs: 1_000 })]);
    await store.claim(claimReq({ workerId: "dead" }));
    clock.advance(1_000 + GRACE - 1);
    expect(await store.claim(claimReq({ workerId: "w2" }))).toEqual([]);
    clock.advance(1);
    const [c] = await store.claim(claimReq({ workerId: "w2" }));
    expect(c).toMatchObject({ id, reclaimed: true, attempts: 2, epoch: 2, lockedBy: "w2" });
    expect(await must(store, id!)).toMatchObject({
      status: "running",
      attempts: 2,
      epoch: 2,
      lockedBy: "w2",
      leaseUntil: clock.now() + 1_000 + GRACE,
    });
    const events = await store.events(id!);
    expect(events.map((e) => e.kind)).toEqual(["reclaimed"]);
    expect(events[0]).toMatchObject({ taskId: id, at: clock.now(), detail: { previousHolder: "dead" } });
  });

  it("§3.3 a claim of many right after a backlog was drained still reclaims expired leases before it takes pending tasks", async ({
    clock,
    store,
    expect,
  }) => {
    // A store may pick its claim's form from what the last claim found (PostgreSQL does): after a
    // claim of 80 from a backlog, the next large claim must still see the expired leases.
    const all = await ids(
      store,
      Array.from({ length: 100 }, () => newTask({ maxMs: 1_000 })),
    );
    const first = await store.claim(claimReq({ workerId: "dead", limit: 80 }));
    expect(first.map((t) => t.id)).toEqual(all.slice(0, 80));
    clock.advance(1_000 + GRACE);
    const next = await store.claim(claimReq({ workerId: "w2", limit: 50 }));
    expect(next).toHaveLength(50);
    expect(next.every((t) => t.reclaimed && t.attempts === 2 && all.indexOf(t.id) < 80)).toBe(true);
    // The 20 never claimed are still pending.
    for (const id of all.slice(80)) expect((await must(store, id)).status).toBe("pending");
  });

  it("§5.4 a lease that expires on the last attempt ends the task failed at the next claim, without claiming it", async ({
    clock,
    store,
    expect,
  }) => {
    const [id, dep] = await ids(store, [
      newTask({ maxMs: 1_000, maxAttempts: 2 }),
      newTask({ needs: [{ index: 0 }] }),
    ]);
    await store.claim(claimReq({ workerId: "dead-1" }));
    clock.advance(1_000 + GRACE);
    expect((await store.claim(claimReq({ workerId: "dead-2" }))).map((t) => t.id)).toEqual([id]);
    clock.advance(1_000 + GRACE);
    expect(await store.claim(claimReq({ workerId: "w3" }))).toEqual([]);
    const t = await must(store, id!);
    expect(t).toMatchObject({
      status: "terminal",
      outcome: "failed",
      attempts: 2,
      lockedBy: null,
      leaseUntil: null,
      endedAt: clock.now(),
    });
    expect(t.error!.name).toBe("AttemptsExhausted");
    expect(t.error!.message).toContain("dead-2");
    expect((await store.events(id!)).map((e) => e.kind)).toEqual(["reclaimed", "failed"]);
    // §6.1: the failure cascades in the same transaction.
    expect(await must(store, dep!)).toMatchObject({ outcome: "upstream_failed" });
  });

  it("§5.4 / §7.2 a marked task whose last lease expires ends aborted at the next claim, not failed, without claiming it", async ({
    clock,
    store,
    expect,
  }) => {
    const [id, dep] = await ids(store, [
      newTask({ maxMs: 1_000, maxAttempts: 1 }),
      newTask({ needs: [{ index: 0 }] }),
    ]);
    await store.claim(claimReq({ workerId: "dead-1" }));
    expect((await store.abort(id!)).state).toBe("marked");
    clock.advance(1_000 + GRACE);
    expect(await store.claim(claimReq({ workerId: "w2" }))).toEqual([]);
    const t = await must(store, id!);
    expect(t).toMatchObject({
      status: "terminal",
      outcome: "aborted",
      attempts: 1,
      lockedBy: null,
      endedAt: clock.now(),
    });
    expect(t.error!.name).toBe("Aborted");
    expect(t.error!.message).toContain("dead-1");
    expect((await store.events(id!)).map((e) => e.kind)).toEqual(["abort_requested", "aborted"]);
    // §7.1: an abort cascades like a failure, in the same transaction.
    expect(await must(store, dep!)).toMatchObject({ outcome: "upstream_failed" });
  });

  it("§3.1 listReady and claim agree: everything listed is claimable, and nothing else is claimed", async ({
    clock,
    store,
    expect,
  }) => {
    const [a, b, c, d] = await ids(store, [
      newTask({ maxMs: 1_000 }),
      newTask({ maxMs: 1_000, priority: 5 }),
      newTask({ maxMs: 1_000, delayMs: 600_000 }),
      newTask({ maxMs: 1_000, needs: [{ index: 0 }] }),
    ]);
    // b is running with a lease that then expires; a stays pending.
    const [held] = await store.claim(claimReq({ limit: 1 }));
    expect(held!.id).toBe(b);
    clock.advance(1_000 + GRACE);
    const listed = (await store.listReady("default", 100)).map((t) => t.id).sort((p, q) => p - q);
    expect(listed).toEqual([a!, b!].sort((p, q) => p - q));
    expect(listed).not.toContain(c);
    expect(listed).not.toContain(d);
    expect(await store.listReady("other", 100)).toEqual([]);
    const claimed = (await store.claim(claimReq({ limit: 100 }))).map((t) => t.id).sort((p, q) => p - q);
    expect(claimed).toEqual(listed);
    expect(await store.listReady("default", 100)).toEqual([]);
  });

  it("§3.4 a timer is promoted exactly at its due time: not listed or claimed a millisecond before", async ({
    clock,
    store,
    expect,
  }) => {
    const [timer, blocked] = await ids(store, [
      newTask({ delayMs: 5_000 }),
      newTask({ needs: [{ index: 0 }] }),
    ]);
    expect(await store.listReady("default", 10)).toEqual([]);
    expect(await store.claim(claimReq())).toEqual([]);
    clock.advance(4_999);
    expect(await store.listReady("default", 10)).toEqual([]);
    expect(await store.claim(claimReq())).toEqual([]);
    expect((await must(store, timer!)).status).toBe("waiting");
    clock.advance(1);
    expect((await store.listReady("default", 10)).map((t) => t.id)).toEqual([timer]);
    const claimed = await store.claim(claimReq());
    expect(claimed.map((t) => t.id)).toEqual([timer]);
    expect((await must(store, timer!)).wakeAt).toBeNull();
    expect((await must(store, blocked!)).status).toBe("waiting");
  });

  it("§3.4 due timers are promoted in bounded batches, and every one is promoted eventually", async ({
    clock,
    store,
    expect,
  }) => {
    await ids(
      store,
      Array.from({ length: 1_500 }, () => newTask({ delayMs: 1_000 })),
    );
    clock.advance(1_000);
    let total = 0;
    for (let i = 0; i < 10 && total < 1_500; i++)
      total += (await store.claim(claimReq({ limit: 1_000 }))).length;
    expect(total).toBe(1_500);
  });

  it("§3.5 higher priority is claimed first; equal priority in id order; a batch claim returns that order", async ({
    store,
    another,
    expect,
  }) => {
    const order = await ids(store, [
      newTask({ priority: 0 }),
      newTask({ priority: 0 }),
      newTask({ priority: 7 }),
      newTask({ priority: -3 }),
      newTask({ priority: 7 }),
    ]);
    const got: number[] = [];
    for (let i = 0; i < 5; i++) got.push(...(await store.claim(claimReq({ limit: 1 }))).map((t) => t.id));
    expect(got).toEqual([order[2], order[4], order[0], order[1], order[3]]);
    const second = await another();
    const three = await ids(second, [
      newTask({ priority: 1 }),
      newTask({ priority: 2 }),
      newTask({ priority: 3 }),
    ]);
    expect((await second.claim(claimReq({ limit: 3 }))).map((t) => t.id)).toEqual([...three].reverse());
  });

  it("§3.4 / §3.5 a claim of many takes exactly the first `limit` tasks in claim order and leaves the rest", async ({
    store,
    expect,
  }) => {
    // Priorities scattered over 70 tasks, so claim order is not id order (PostgreSQL takes the first
    // few in one statement and the rest in another: the order must hold across the two).
    const prios = Array.from({ length: 70 }, (_, i) => (i * 37) % 11);
    const all = await ids(
      store,
      prios.map((priority) => newTask({ priority })),
    );
    const order = all
      .map((id, i) => ({ id, p: prios[i]! }))
      .sort((a, b) => b.p - a.p || a.id - b.id)
      .map((x) => x.id);
    const got = await store.claim(claimReq({ limit: 45 }));
    expect(got.map((t) => t.id)).toEqual(order.slice(0, 45));
    expect(got.every((t) => t.status === "running" && t.attempts === 1)).toBe(true);
    const rest = await store.claim(claimReq({ limit: 100 }));
    expect(rest.map((t) => t.id)).toEqual(order.slice(45));
  });

  it("§3.5 aging: a task waiting one hour outranks a fresh priority +9 task, but not a fresh +11", async ({
    clock,
    store,
    expect,
  }) => {
    const [old] = await ids(store, [newTask({ priority: 0 })]);
    clock.advance(3_600_000);
    const [p9, p11] = await ids(store, [newTask({ priority: 9 }), newTask({ priority: 11 })]);
    const got: number[] = [];
    for (let i = 0; i < 3; i++) got.push(...(await store.claim(claimReq({ limit: 1 }))).map((t) => t.id));
    expect(got).toEqual([p11, old, p9]);
  });

  it("§3.5 age counts from creation and is kept across retries", async ({ clock, store, expect }) => {
    const [old] = await ids(store, [newTask({ maxMs: 1_000 })]);
    const [c] = await store.claim(claimReq());
    await store.settle([{ kind: "retry", fence: fenceOf(c!), delayMs: 1_000, error: ERR }]);
    clock.advance(3_600_000);
    const [fresh] = await ids(store, [newTask({ priority: 9 })]);
    expect((await store.claim(claimReq({ limit: 1 }))).map((t) => t.id)).toEqual([old]);
    expect((await store.claim(claimReq({ limit: 1 }))).map((t) => t.id)).toEqual([fresh]);
  });

  it("§3.6 a claim takes only tasks in its queues and with its names", async ({ store, expect }) => {
    const [a, b, c, d] = await ids(store, [
      newTask({ name: "a" }),
      newTask({ name: "b" }),
      newTask({ name: "a", queue: "q2" }),
      newTask({ name: "c", queue: "q2" }),
    ]);
    expect((await store.claim(claimReq({ names: ["a"], queues: ["default"] }))).map((t) => t.id)).toEqual([
      a,
    ]);
    expect(await store.claim(claimReq({ names: ["zzz"], queues: ["default", "q2"] }))).toEqual([]);
    expect((await store.claim(claimReq({ names: ["a", "b"], queues: ["q2"] }))).map((t) => t.id)).toEqual([
      c,
    ]);
    expect(await store.claim(claimReq({ names: [], queues: ["q2"] }))).toEqual([]);
    expect(await store.claim(claimReq({ names: ["c"], queues: [] }))).toEqual([]);
    expect((await must(store, b!)).status).toBe("pending");
    expect((await must(store, d!)).status).toBe("pending");
    const both = await store.claim(claimReq({ names: ["b", "c"], queues: ["default", "q2"] }));
    expect(both.map((t) => t.id).sort((p, q) => p - q)).toEqual([b, d]);
  });

  it("§3.6 an expired lease is reclaimed only by a claim with that queue and name", async ({
    clock,
    store,
    expect,
  }) => {
    const [id] = await ids(store, [newTask({ name: "a", queue: "q", maxMs: 1_000 })]);
    await store.claim(claimReq({ names: ["a"], queues: ["q"] }));
    clock.advance(1_000 + GRACE);
    expect(await store.claim(claimReq({ names: ["b"], queues: ["q"] }))).toEqual([]);
    expect(await store.claim(claimReq({ names: ["a"], queues: ["default"] }))).toEqual([]);
    expect((await store.claim(claimReq({ names: ["a"], queues: ["q"] }))).map((t) => t.id)).toEqual([id]);
  });

  it("§6.2 a dependent whose needs complete before its runAfter waits until then", async ({
    clock,
    store,
    expect,
  }) => {
    const [a, b] = await ids(store, [newTask(), newTask({ needs: [{ index: 0 }], delayMs: 60_000 })]);
    await completeId(store, a!);
    const t = await must(store, b!);
    expect(t).toMatchObject({ status: "waiting", needsPending: 0, wakeAt: t.runAfter });
    clock.advance(59_999);
    expect(await store.claim(claimReq())).toEqual([]);
    clock.advance(1);
    expect((await store.claim(claimReq())).map((x) => x.id)).toEqual([b]);
  });
}
