/** Conformance: enqueue, needs resolution, dedupe and admission (spec §1.4, §1.5, §2). */
import { QueueFullError } from "../../errors.js";
import type { Store } from "../../store/store.js";
import {
  all,
  claimId,
  claimReq,
  completeId,
  type Define,
  type Env,
  ERR,
  failId,
  fenceOf,
  ids,
  must,
  newTask,
  refusedUnchanged,
  unlimited,
} from "./kit.js";

export function registerEnqueueTests(it: Define): void {
  it("§1.4 / §2.2 a plain batch (no needs, no dedupe keys) returns one result per entry in batch order, ids increasing, across queues and delays", async ({
    clock,
    store,
    expect,
  }) => {
    const n = 300;
    const res = await store.enqueue(
      Array.from({ length: n }, (_, i) =>
        newTask({
          queue: i % 3 === 0 ? "q" : "r",
          input: JSON.stringify({ i }),
          priority: i % 5,
          delayMs: i % 4 === 0 ? 1_000 : 0,
        }),
      ),
      unlimited,
    );
    expect(res).toHaveLength(n);
    for (let i = 1; i < n; i++) expect(res[i]!.id > res[i - 1]!.id, `id ${i} after id ${i - 1}`).toBe(true);
    for (let i = 0; i < n; i += 37) {
      const t = await must(store, res[i]!.id);
      expect([t.input, t.queue, t.priority, t.status, t.runAfter]).toEqual([
        { i },
        i % 3 === 0 ? "q" : "r",
        i % 5,
        i % 4 === 0 ? "waiting" : "pending",
        clock.now() + (i % 4 === 0 ? 1_000 : 0),
      ]);
      expect(res[i]).toEqual({ id: t.id, deduped: false, status: t.status });
    }
  });

  it("§1.4 / §1.5 / §2.8 enqueue returns increasing integer ids and writes pending or waiting records", async ({
    clock,
    store,
    expect,
  }) => {
    const now = clock.now();
    const res = await store.enqueue(
      [
        newTask({
          name: "n",
          version: 2,
          queue: "q",
          input: '{"a":1}',
          priority: 3,
          maxMs: 2_000,
          dedupe: "d1",
          job: "J",
        }),
        newTask({ delayMs: 5_000 }),
        newTask({ needs: [{ index: 0 }] }),
      ],
      unlimited,
    );
    expect(res.map((r) => [r.status, r.deduped])).toEqual([
      ["pending", false],
      ["waiting", false],
      ["waiting", false],
    ]);
    const [a, b, c] = res.map((r) => r.id) as [number, number, number];
    for (const id of [a, b, c]) expect(Number.isSafeInteger(id) && id > 0, `id ${String(id)}`).toBe(true);
    expect(a < b && b < c, `ids ${a}, ${b}, ${c} increase`).toBe(true);
    expect(await store.get(a)).toEqual({
      id: a,
      queue: "q",
      name: "n",
      version: 2,
      input: { a: 1 },
      status: "pending",
      outcome: null,
      result: null,
      error: null,
      priority: 3,
      maxMs: 2_000,
      attempts: 0,
      epoch: 0,
      runAfter: now,
      wakeAt: null,
      leaseUntil: null,
      lockedBy: null,
      needsPending: 0,
      dedupe: "d1",
      job: "J",
      abortRequested: false,
      progress: null,
      progressNote: null,
      createdAt: now,
      updatedAt: now,
      startedAt: null,
      claimedAt: null,
      endedAt: null,
      // Task-tree fields (spec §12) of a task enqueued from outside.
      ownerId: null,
      scope: null,
      background: false,
      detached: false,
      spawnName: null,
      heldOutcome: null,
      waitOn: null,
      waitPolicy: null,
      eventName: null,
      checkpoint: null,
      blocked: null,
      seat: null,
      rate: null,
      fairKey: null,
    });
    expect(await store.get(b)).toMatchObject({
      status: "waiting",
      runAfter: now + 5_000,
      wakeAt: now + 5_000,
    });
    expect(await store.get(c)).toMatchObject({ status: "waiting", needsPending: 1, wakeAt: null });
    expect(await store.needsOf(c)).toEqual([a]);
    const [d] = await ids(store, [newTask()]);
    expect(d).toBeGreaterThan(c);
  });

  it("§2.5 a need on a completed task is satisfied; a need on a live task waits", async ({
    store,
    expect,
  }) => {
    const [done, live] = await ids(store, [newTask({ name: "done" }), newTask({ delayMs: 60_000 })]);
    await completeId(store, done!);
    const [x, y] = await store.enqueue(
      [newTask({ needs: [{ id: done! }] }), newTask({ needs: [{ id: done! }, { id: live! }] })],
      unlimited,
    );
    expect(x!.status).toBe("pending");
    expect(await must(store, x!.id)).toMatchObject({ status: "pending", needsPending: 0 });
    expect(y!.status).toBe("waiting");
    expect(await must(store, y!.id)).toMatchObject({ status: "waiting", needsPending: 1 });
    expect(await store.needsOf(y!.id)).toEqual([done!, live!].sort((p, q) => p - q));
  });

  it("§2.5 a need on a failed task, or on an upstream_failed one, writes the new task upstream_failed naming the root", async ({
    clock,
    store,
    expect,
  }) => {
    const [root] = await ids(store, [newTask()]);
    await failId(store, root!);
    clock.advance(10);
    const [mid] = await store.enqueue([newTask({ needs: [{ id: root! }] })], unlimited);
    expect(mid!.status).toBe("terminal");
    const m = await must(store, mid!.id);
    expect(m).toMatchObject({ status: "terminal", outcome: "upstream_failed", endedAt: clock.now() });
    expect(m.error!.message).toBe(`upstream task ${root} failed`);
    const [late] = await ids(store, [newTask({ needs: [{ id: mid!.id }] })]);
    const l = await must(store, late!);
    expect(l.outcome).toBe("upstream_failed");
    expect(l.error!.message).toBe(`upstream task ${root} failed`);
  });

  it("§2.5 needs resolve by id, by earlier batch entry and by dedupe key in the same queue; unresolvable ones write nothing", async (env) => {
    const { store, expect } = env;
    const [seed] = await ids(store, [newTask({ dedupe: "seed", delayMs: 60_000 })]);
    const [byKey, byIndex] = await ids(store, [
      newTask({ needs: [{ dedupe: "seed", queue: "default" }] }),
      newTask({ needs: [{ index: 0 }, { id: seed! }] }),
    ]);
    expect(await store.needsOf(byKey!)).toEqual([seed]);
    expect(await store.needsOf(byIndex!)).toEqual([seed!, byKey!].sort((p, q) => p - q));
    await refusedUnchanged(
      env,
      () => store.enqueue([newTask({ needs: [{ dedupe: "seed", queue: "other" }] })], unlimited),
      "RATCHET_INVALID_INPUT",
    );
    await refusedUnchanged(
      env,
      () =>
        store.enqueue(
          [newTask(), newTask({ needs: [{ index: 0 }] }), newTask({ needs: [{ id: 987_654 }] })],
          unlimited,
        ),
      "RATCHET_NOT_FOUND",
    );
  });

  it("§2.2 / §2.6 a batch entry may only need earlier entries: a forward or self reference rejects the whole batch", async (env) => {
    const { store } = env;
    await ids(store, [newTask()]);
    await refusedUnchanged(env, () =>
      store.enqueue([newTask(), newTask({ needs: [{ index: 2 }] }), newTask()], unlimited),
    );
    await refusedUnchanged(env, () =>
      store.enqueue([newTask(), newTask({ needs: [{ index: 1 }] })], unlimited),
    );
  });

  it("§2.3 a live or completed task holds its dedupe key: the same id comes back and nothing is written; keys are per queue", async (env) => {
    const { store, expect } = env;
    const [a] = await store.enqueue([newTask({ dedupe: "k", input: "1" })], unlimited);
    expect(a!.deduped).toBe(false);
    const before = await all(store);
    expect(await store.enqueue([newTask({ dedupe: "k", input: "2" })], unlimited)).toEqual([
      { id: a!.id, deduped: true, status: "pending" },
    ]);
    expect(await all(store)).toEqual(before);
    const [other] = await store.enqueue([newTask({ dedupe: "k", queue: "other" })], unlimited);
    expect(other!.deduped).toBe(false);
    expect(other!.id).not.toBe(a!.id);
    const [x, y] = await store.enqueue(
      [newTask({ dedupe: "batch" }), newTask({ dedupe: "batch" })],
      unlimited,
    );
    expect(y).toEqual({ id: x!.id, deduped: true, status: x!.status });
    await completeId(store, a!.id);
    expect(await store.enqueue([newTask({ dedupe: "k" })], unlimited)).toEqual([
      { id: a!.id, deduped: true, status: "terminal" },
    ]);
    expect((await must(store, a!.id)).input).toBe(1);
  });

  it("§2.3 failed, faulted, aborted and upstream_failed tasks release their key", async ({
    store,
    expect,
  }) => {
    const [failed, faulted, aborted, up] = await ids(store, [
      newTask({ name: "f", dedupe: "failed" }),
      newTask({ name: "g", dedupe: "faulted" }),
      newTask({ dedupe: "aborted", delayMs: 60_000 }),
      newTask({ dedupe: "up", needs: [{ index: 0 }] }),
    ]);
    await failId(store, failed!);
    await failId(store, faulted!, "faulted");
    await store.abort(aborted!);
    expect((await must(store, up!)).outcome).toBe("upstream_failed");
    for (const [key, old] of [
      ["failed", failed],
      ["faulted", faulted],
      ["aborted", aborted],
      ["up", up],
    ] as const) {
      const [again] = await store.enqueue([newTask({ dedupe: key })], unlimited);
      expect(again!.deduped, key).toBe(false);
      expect(again!.id, key).not.toBe(old);
      expect(again!.status, key).toBe("pending");
    }
  });

  it("§2.4 a deduplicated entry still acts as the predecessor of later entries in the batch", async ({
    store,
    expect,
  }) => {
    const [existing] = await ids(store, [newTask({ dedupe: "shared", delayMs: 60_000 })]);
    const [first, second] = await store.enqueue(
      [newTask({ dedupe: "shared" }), newTask({ needs: [{ index: 0 }] })],
      unlimited,
    );
    expect(first).toEqual({ id: existing, deduped: true, status: "waiting" });
    expect(await store.needsOf(second!.id)).toEqual([existing]);
    expect(await must(store, second!.id)).toMatchObject({ status: "waiting", needsPending: 1 });
  });

  it("§2.7 a batch that would pass maxDepth throws QueueFullError and writes nothing; queues count apart; ended tasks leave the count", async (env) => {
    const { store, expect } = env;
    const depth = { maxDepth: (q: string) => (q === "default" ? 3 : 1) };
    const [a, b] = (await store.enqueue([newTask(), newTask()], depth)).map((e) => e.id);
    const err = await refusedUnchanged(
      env,
      () => store.enqueue([newTask(), newTask()], depth),
      "RATCHET_QUEUE_FULL",
    );
    expect(err).toBeInstanceOf(QueueFullError);
    await store.enqueue([newTask()], depth);
    await refusedUnchanged(env, () => store.enqueue([newTask()], depth), "RATCHET_QUEUE_FULL");
    await store.enqueue([newTask({ queue: "side" })], depth);
    await refusedUnchanged(
      env,
      () => store.enqueue([newTask({ queue: "side" })], depth),
      "RATCHET_QUEUE_FULL",
    );
    // One batch across queues is refused as a whole.
    await refusedUnchanged(
      env,
      () => store.enqueue([newTask({ queue: "fresh" }), newTask({ queue: "side" })], depth),
      "RATCHET_QUEUE_FULL",
    );
    await completeId(store, a!);
    await failId(store, b!);
    await store.enqueue([newTask(), newTask()], depth);
    await refusedUnchanged(env, () => store.enqueue([newTask()], depth), "RATCHET_QUEUE_FULL");
  });

  it("§2.3 §2.7 single enqueues made at once are each their own: ids in call order, refused alone past maxDepth, one task per dedupe key", async (env) => {
    const { store, expect } = env;
    // A store may send single enqueues that overlap together (PostgreSQL does): each must still be
    // admitted, deduped and refused on its own, in the order they were called.
    const depth = { maxDepth: (q: string) => (q === "a" ? 25 : 1_000) };
    const calls = Array.from({ length: 60 }, (_, i) =>
      store.enqueue([newTask(i % 3 === 2 ? { queue: "b", dedupe: "k" } : { queue: "a" })], depth).then(
        ([e]) => ({ ok: true as const, e: e! }),
        (err: unknown) => ({ ok: false as const, err }),
      ),
    );
    const results = await Promise.all(calls);
    const inA = results.filter((_, i) => i % 3 !== 2);
    inA.forEach((r, j) => {
      expect(r.ok, `single enqueue ${j + 1} of those to "a" (maxDepth 25)`).toBe(j < 25);
      if (!r.ok) {
        expect(r.err).toBeInstanceOf(QueueFullError);
        expect(r.err).toMatchObject({ code: "RATCHET_QUEUE_FULL", queue: "a", depth: 25, maxDepth: 25 });
      }
    });
    const admitted = inA.flatMap((r) => (r.ok ? [r.e.id] : []));
    expect(admitted).toEqual([...admitted].sort((x, y) => x - y));
    const inB = results.filter((_, i) => i % 3 === 2).map((r) => (r.ok ? r.e : null));
    expect(inB.every((e) => e !== null && e.id === inB[0]!.id)).toBe(true);
    expect(inB.map((e) => e!.deduped)).toEqual(inB.map((_, j) => j > 0));
    const stored = await all(store);
    expect(
      stored
        .filter((t) => t.queue === "a")
        .map((t) => t.id)
        .sort((x, y) => x - y),
    ).toEqual(admitted);
    expect(stored.filter((t) => t.queue === "b")).toHaveLength(1);
    await expectLive(env, ["a", "b"]);
  });

  it("§2.7 the live count follows retry backoff, failure, cascade, abort, release, retry() and completion", async (env) => {
    const { clock, store } = env;
    const [f] = await ids(store, [
      newTask({ name: "f", maxAttempts: 9 }),
      newTask({ needs: [{ index: 0 }] }),
      newTask({ needs: [{ index: 1 }], queue: "q2" }),
    ]);
    await ids(store, [newTask({ dedupe: "d" }), newTask({ dedupe: "d" })]);
    const [w] = await ids(store, [newTask({ queue: "q2", delayMs: 10_000 })]);
    await expectLive(env, ["default", "q2"]);
    const c1 = await claimId(store, f!);
    await store.settle([{ kind: "retry", fence: fenceOf(c1), delayMs: 5, error: ERR }]);
    await expectLive(env, ["default", "q2"]);
    clock.advance(5);
    await failId(store, f!);
    await expectLive(env, ["default", "q2"]);
    await ids(store, [newTask({ needs: [{ id: f! }] })]);
    await expectLive(env, ["default", "q2"]);
    await store.abort(w!);
    await expectLive(env, ["default", "q2"]);
    await store.retry(f!);
    await expectLive(env, ["default", "q2"]);
    const c2 = await claimId(store, f!);
    await store.settle([{ kind: "release", fence: fenceOf(c2) }]);
    await expectLive(env, ["default", "q2"]);
    await completeId(store, f!);
    await expectLive(env, ["default", "q2"]);
    for (let i = 0; i < 5; i++) {
      for (const c of await store.claim(claimReq({ queues: ["default", "q2"], limit: 100 })))
        await store.settle([{ kind: "complete", fence: fenceOf(c), result: "null" }]);
    }
    await expectLive(env, ["default", "q2"]);
  });
}

/**
 * Checks, through admission alone, that each queue's live counter equals its
 * live tasks: with maxDepth = live one more task is refused (counter ≥ live),
 * with maxDepth = live + 1 it is admitted (counter ≤ live). The probe is then
 * aborted, which takes it out of the count again.
 */
async function expectLive(env: Env, queues: string[]): Promise<void> {
  const { store, expect } = env;
  // The counters read directly (spec §9.5): every queue's, against its tasks.
  const tasks = await all(store);
  const counted = new Map<string, number>();
  for (const t of tasks)
    counted.set(t.queue, (counted.get(t.queue) ?? 0) + (t.status === "terminal" ? 0 : 1));
  const expected = [...counted].map(([queue, live]) => ({ queue, live }));
  expected.sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0));
  expect(await store.depths(), "depths() against the live tasks of each queue").toEqual(expected);
  for (const queue of queues) {
    const live = await liveIn(store, queue);
    const probe = newTask({ name: "probe", queue, delayMs: 3_600_000 });
    const over = await store.enqueue([probe], { maxDepth: () => live }).then(
      () => "admitted",
      (e: { code?: string }) => e.code ?? String(e),
    );
    expect(over, `queue "${queue}" has ${live} live tasks, so maxDepth ${live} admits no more`).toBe(
      "RATCHET_QUEUE_FULL",
    );
    const [p] = await store.enqueue([probe], { maxDepth: () => live + 1 }).catch((e: Error) => {
      throw new Error(
        `queue ${queue} has ${live} live tasks but refused one more at maxDepth ${live + 1}: ${e.message}`,
      );
    });
    await store.abort(p!.id);
  }
}

async function liveIn(store: Store, queue: string): Promise<number> {
  return (await all(store)).filter((t) => t.queue === queue && t.status !== "terminal").length;
}
