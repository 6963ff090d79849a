/**
 * Conformance: the task-tree, schedule and flow-key operations of the Store
 * contract (spec §12, §14), at the store level, so a new backend is held to
 * them before any engine runs on it.
 */
import type { NewChild } from "../../store/store.js";
import {
  claimId,
  completeId,
  type Define,
  fenceOf,
  ids,
  must,
  newTask,
  rejection,
  unlimited,
} from "./kit.js";

const child = (spawnName: string, background = false): NewChild => ({
  spawnName,
  background,
  task: newTask({ name: "k" }),
});

export function registerTreeTests(it: Define): void {
  it("§12.1 spawn creates an owned child once per (owner, name), inherits the scope, and needs the owner's claim", async ({
    store,
    expect,
  }) => {
    const [p] = await ids(store, [newTask({ name: "p", scope: "conv-1" })]);
    const c = await claimId(store, p!);
    const a = await store.spawn(fenceOf(c), child("a"), unlimited);
    expect(a.created).toBe(true);
    expect(await store.spawn(fenceOf(c), child("a"), unlimited)).toEqual({ id: a.id, created: false });
    const bg = await store.spawn(fenceOf(c), child("bg", true), unlimited);
    expect(await must(store, a.id)).toMatchObject({
      ownerId: p,
      scope: "conv-1",
      spawnName: "a",
      background: false,
      detached: false,
    });
    expect(await must(store, bg.id)).toMatchObject({ background: true, detached: true });
    expect((await store.children(p!)).map((t) => t.id)).toEqual([a.id, bg.id]);
    await rejection(
      () => store.spawn({ taskId: p!, token: c.epoch + 1, claimedAt: c.claimedAt }, child("x"), unlimited),
      "RATCHET_LEASE_LOST",
    );
    await rejection(() => store.spawn(fenceOf(c), child("q"), { maxDepth: () => 1 }), "RATCHET_QUEUE_FULL");
    expect(await store.children(p!)).toHaveLength(2);
  });

  it("§12.1 spawnMany creates a round of children in one transaction, in order; a repeat finds them; a refusal or a full queue writes none", async ({
    store,
    expect,
  }) => {
    const [p] = await ids(store, [newTask({ name: "p" })]);
    const c = await claimId(store, p!);
    const made = await store.spawnMany(fenceOf(c), [child("a"), child("b"), child("c")], unlimited);
    expect(made.map((m) => m.created)).toEqual([true, true, true]);
    expect((await store.children(p!)).map((t) => t.spawnName)).toEqual(["a", "b", "c"]);
    const again = await store.spawnMany(fenceOf(c), [child("a"), child("d"), child("c")], unlimited);
    expect(again.map((m) => m.created)).toEqual([false, true, false]);
    expect(again[0]!.id).toBe(made[0]!.id);
    expect(again[2]!.id).toBe(made[2]!.id);
    expect(await store.spawnMany(fenceOf(c), [], unlimited)).toEqual([]);
    await rejection(
      () =>
        store.spawnMany({ taskId: p!, token: c.epoch + 1, claimedAt: c.claimedAt }, [child("x")], unlimited),
      "RATCHET_LEASE_LOST",
    );
    // Five live tasks in the queue already: the second new child would pass a depth of 6, so neither is made.
    await rejection(
      () => store.spawnMany(fenceOf(c), [child("y"), child("z")], { maxDepth: () => 6 }),
      "RATCHET_QUEUE_FULL",
    );
    expect((await store.children(p!)).map((t) => t.spawnName)).toEqual(["a", "b", "c", "d"]);
  });

  it("§12.4 an owner that completes with a live child holds its outcome; the child's end finalizes it", async ({
    store,
    expect,
  }) => {
    const [p] = await ids(store, [newTask({ name: "p" })]);
    const c = await claimId(store, p!);
    const k = await store.spawn(fenceOf(c), child("a"), unlimited);
    expect(await store.settle([{ kind: "complete", fence: fenceOf(c), result: '"held"' }])).toEqual(["ok"]);
    expect(await must(store, p!)).toMatchObject({
      status: "completing",
      heldOutcome: "completed",
      outcome: null,
    });
    await completeId(store, k.id);
    expect(await must(store, p!)).toMatchObject({ status: "terminal", outcome: "completed", result: "held" });
  });

  it("§12.12 scopeLive(null) counts the live tasks of every scope that are not detached", async ({
    store,
    expect,
  }) => {
    expect(await store.scopeLive(null)).toBe(0);
    const [p, q, done] = await ids(store, [
      newTask({ name: "p", scope: "s1" }),
      newTask({ name: "q", scope: "s2" }),
      newTask({ name: "d" }),
    ]);
    await completeId(store, done!);
    const c = await claimId(store, p!);
    const k = await store.spawn(fenceOf(c), child("k"), unlimited);
    const bg = await store.spawn(fenceOf(c), child("bg", true), unlimited);
    expect(await store.scopeLive(null)).toBe(3); // p, q and k; not bg (detached), not d (terminal)
    expect(await store.scopeLive("s1")).toBe(2);
    await completeId(store, k.id);
    await completeId(store, q!);
    expect(await store.scopeLive(null)).toBe(1);
    expect(await store.settle([{ kind: "complete", fence: fenceOf(c), result: "1" }])).toEqual(["ok"]);
    expect((await must(store, bg.id)).status).not.toBe("terminal");
    expect(await store.scopeLive(null)).toBe(0);
  });

  it("§12.3 waitTasks returns terminal members at once, parks otherwise, refuses invalid waits, and wakes the waiter", async ({
    store,
    expect,
  }) => {
    const [w, m] = await ids(store, [newTask({ name: "w" }), newTask({ name: "m" })]);
    const c = await claimId(store, w!);
    await rejection(() => store.waitTasks(fenceOf(c), [w!], "allSettled"), "RATCHET_INVALID_WAIT");
    await rejection(() => store.waitTasks(fenceOf(c), [987_654], "allSettled"), "RATCHET_INVALID_WAIT");
    await rejection(() => store.waitTasks(fenceOf(c), [m!], "failFast"), "RATCHET_INVALID_WAIT");
    expect(await store.waitTasks(fenceOf(c), [m!], "allSettled")).toEqual({ state: "waiting" });
    expect(await must(store, w!)).toMatchObject({
      status: "waiting",
      waitOn: "tasks",
      waitPolicy: "allSettled",
    });
    expect(await store.waitMembers(w!)).toEqual([m]);
    await completeId(store, m!);
    expect((await must(store, w!)).status).toBe("pending");
    const again = await claimId(store, w!);
    const r = await store.waitTasks(fenceOf(again), [m!], "allSettled");
    expect(r.state).toBe("ready");
  });

  it("§12.3 an empty waitTasks is ready at once with no members, parks nothing, and is still fenced", async ({
    store,
    expect,
  }) => {
    const [w] = await ids(store, [newTask({ name: "w" })]);
    const c = await claimId(store, w!);
    for (const policy of ["allSettled", "failFast"] as const)
      expect(await store.waitTasks(fenceOf(c), [], policy)).toEqual({ state: "ready", members: [] });
    expect(await must(store, w!)).toMatchObject({ status: "running", attempts: 1 });
    expect(await store.waitMembers(w!)).toEqual([]);
    await rejection(
      () => store.waitTasks({ ...fenceOf(c), token: c.epoch + 1 }, [], "allSettled"),
      "RATCHET_LEASE_LOST",
    );
    await rejection(
      () => store.waitTasks({ ...fenceOf(c), mode: "abort" }, [], "allSettled"),
      "RATCHET_INVALID_WAIT",
    );
  });

  it("§12.5 / §12.6 abort cascades to ordinary children only; a task without registered code ends orphaned", async ({
    store,
    expect,
  }) => {
    await store.registerDefinitions([
      { name: "p", version: 1, hasAbort: false },
      { name: "k", version: 1, hasAbort: false },
    ]);
    const [p, ghost] = await ids(store, [newTask({ name: "p" }), newTask({ name: "ghost" })]);
    const c = await claimId(store, p!);
    const a = await store.spawn(fenceOf(c), child("a"), unlimited);
    const bg = await store.spawn(fenceOf(c), child("bg", true), unlimited);
    const res = await store.abort(p!);
    expect(res.state).toBe("marked");
    expect(res.marked).toContain(a.id);
    expect(await must(store, a.id)).toMatchObject({ status: "terminal", outcome: "aborted" }); // never started
    expect(await must(store, bg.id)).toMatchObject({ status: "pending", abortRequested: false });
    expect((await store.abort(ghost!)).state).toBe("orphaned");
    expect(await store.markedAmong([p!, bg.id])).toEqual([p]);
  });

  it("§12.7 a signal is kept for a later wait, wakes a parked waiter, and the first one per name wins", async ({
    store,
    expect,
  }) => {
    expect(await store.signal("early", '"a"')).toEqual({ first: true, woken: 0 });
    expect(await store.signal("early", '"b"')).toEqual({ first: false, woken: 0 });
    const [w1, w2] = await ids(store, [newTask({ name: "w" }), newTask({ name: "w" })]);
    const c1 = await claimId(store, w1!);
    expect(await store.waitEvent(fenceOf(c1), "early", 60_000)).toEqual({ state: "signalled", payload: "a" });
    const c2 = await claimId(store, w2!);
    expect(await store.waitEvent(fenceOf(c2), "late", 60_000)).toEqual({ state: "waiting" });
    expect(await must(store, w2!)).toMatchObject({ status: "waiting", waitOn: "event", eventName: "late" });
    expect(await store.signal("late", "1")).toEqual({ first: true, woken: 1 });
    expect((await must(store, w2!)).status).toBe("pending");
  });

  it("§14.2 a schedule's tick is won by exactly one claimTick; firedTick clears only that tick", async ({
    store,
    expect,
  }) => {
    const row = await store.upsertSchedule({
      name: "s",
      cron: "* * * * *",
      timezone: null,
      task: "t",
      input: "null",
      queue: null,
      priority: null,
      missed: "once",
      graceMs: 60_000,
      nextAt: 1_000,
    });
    expect(row).toMatchObject({ name: "s", nextAt: 1_000, firingAt: null });
    expect(await store.claimTick("s", 1_000, 61_000, 1_000)).toBe(true);
    expect(await store.claimTick("s", 1_000, 61_000, 1_000)).toBe(false);
    await store.firedTick("s", 999, 7);
    expect((await store.listSchedules())[0]).toMatchObject({ firingAt: 1_000, lastTask: null });
    await store.firedTick("s", 1_000, 7);
    expect((await store.listSchedules())[0]).toMatchObject({
      firingAt: null,
      lastAt: 1_000,
      lastTask: 7,
      nextAt: 61_000,
    });
    expect(await store.deleteSchedule("s")).toBe(true);
    expect(await store.listSchedules()).toEqual([]);
  });

  it("§14.6 a throttle key makes a second enqueue in the period return the first task and write nothing", async ({
    store,
    expect,
  }) => {
    const flow = { kind: "throttle" as const, key: "k", periodMs: 1_000, delayMs: 0, maxDelayMs: 0 };
    const [a] = await store.enqueue([newTask({ flow })], unlimited);
    const [b] = await store.enqueue([newTask({ flow, input: "2" })], unlimited);
    expect(a!.deduped).toBe(false);
    expect(b).toEqual({ id: a!.id, deduped: true, status: "pending" });
    expect((await must(store, a!.id)).input).toBeNull();
  });
}
