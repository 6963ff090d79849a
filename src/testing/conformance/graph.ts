/** Conformance: dependencies, cascade, abort and retry (spec §6, §7). */
import type { Store, TaskId } from "../../store/store.js";
import {
  abortState,
  claimReq,
  completeId,
  type Define,
  failId,
  fenceOf,
  ids,
  must,
  newTask,
  refusedUnchanged,
  unlimited,
} from "./kit.js";

/** Enqueues root R and a chain B needs R, C needs B (names "r", "t", "t"). */
async function chain(store: Store): Promise<[TaskId, TaskId, TaskId]> {
  return (await ids(store, [
    newTask({ name: "r" }),
    newTask({ needs: [{ index: 0 }] }),
    newTask({ needs: [{ index: 1 }] }),
  ])) as [TaskId, TaskId, TaskId];
}

export function registerGraphTests(it: Define): void {
  it("§6.2 a dependent becomes pending when its last need completes (diamond)", async ({ store, expect }) => {
    const [a, b, c, d] = await ids(store, [
      newTask({ name: "a" }),
      newTask({ name: "b", needs: [{ index: 0 }] }),
      newTask({ name: "c", needs: [{ index: 0 }] }),
      newTask({ name: "d", needs: [{ index: 1 }, { index: 2 }] }),
    ]);
    expect(await must(store, d!)).toMatchObject({ status: "waiting", needsPending: 2 });
    await completeId(store, a!);
    expect((await must(store, b!)).status).toBe("pending");
    expect((await must(store, c!)).status).toBe("pending");
    await completeId(store, b!);
    expect(await must(store, d!)).toMatchObject({ status: "waiting", needsPending: 1 });
    await completeId(store, c!);
    expect(await must(store, d!)).toMatchObject({ status: "pending", needsPending: 0, wakeAt: null });
    await completeId(store, d!);
  });

  it("§6.1 / §6.2 a batch mixing needs by id and by index, repeated, gives each entry its status, unfinished needs and upstream root", async (env) => {
    const { store, clock, expect } = env;
    const [p1, p2, p3] = await ids(store, [
      newTask({ name: "p1" }),
      newTask({ name: "p2" }),
      newTask({ name: "p3" }),
    ]);
    await completeId(store, p2!);
    await failId(store, p3!);
    const [p4] = await ids(store, [newTask({ name: "p4", needs: [{ id: p3! }] })]);
    const now = clock.now();
    const e = await ids(store, [
      newTask({ name: "e0", needs: [{ id: p1! }, { id: p1! }] }),
      newTask({ name: "e1", needs: [{ id: p2! }] }),
      newTask({ name: "e2", needs: [{ id: p3! }, { id: p1! }] }),
      newTask({ name: "e3", needs: [{ id: p1! }, { id: p4! }] }),
      newTask({ name: "e4", needs: [{ index: 2 }] }),
      newTask({ name: "e5", needs: [{ index: 0 }, { index: 1 }, { id: p2! }] }),
      newTask({ name: "e6", needs: [{ id: p2! }], delayMs: 1_000 }),
      newTask({ name: "e7", needs: [{ index: 5 }, { index: 5 }] }),
    ]);
    const view = async (id: TaskId) => {
      const t = await must(store, id);
      return [t.status, t.outcome, t.needsPending, t.error?.message ?? null, t.wakeAt];
    };
    const up = `upstream task ${p3} failed`;
    expect(await Promise.all(e.map(view))).toEqual([
      ["waiting", null, 1, null, null],
      ["pending", null, 0, null, null],
      ["terminal", "upstream_failed", 1, up, null],
      ["terminal", "upstream_failed", 1, up, null],
      ["terminal", "upstream_failed", 0, up, null],
      ["waiting", null, 2, null, null],
      ["waiting", null, 0, null, now + 1_000],
      ["waiting", null, 1, null, null],
    ]);
    expect((await store.needsOf(e[5]!)).sort((a, b) => a - b)).toEqual(
      [e[0]!, e[1]!, p2!].sort((a, b) => a - b),
    );
    expect(await store.needsOf(e[7]!)).toEqual([e[5]!]);
    // Each edge counts once on its predecessor: completing it releases the dependents exactly.
    await completeId(store, p1!);
    expect(await view(e[0]!)).toEqual(["pending", null, 0, null, null]);
    await completeId(store, e[0]!);
    expect((await must(store, e[5]!)).needsPending).toBe(1);
    await completeId(store, e[1]!);
    expect(await view(e[5]!)).toEqual(["pending", null, 0, null, null]);
    await completeId(store, e[5]!);
    expect(await view(e[7]!)).toEqual(["pending", null, 0, null, null]);
  });

  it("§6.1 a batch naming a missing task or a later entry in needs is refused and writes nothing", async (env) => {
    const { store } = env;
    const [p] = await ids(store, [newTask({ name: "p" })]);
    await refusedUnchanged(
      env,
      () =>
        store.enqueue([newTask({ needs: [{ id: p! }] }), newTask({ needs: [{ id: 987_654 }] })], unlimited),
      "RATCHET_NOT_FOUND",
    );
    await refusedUnchanged(
      env,
      () => store.enqueue([newTask({ needs: [{ id: p! }] }), newTask({ needs: [{ index: 1 }] })], unlimited),
      "RATCHET_INVALID_STATE",
    );
  });

  it("§6.1 a failure makes every live transitive dependent upstream_failed naming the root, across jobs, in the same call", async ({
    clock,
    store,
    expect,
  }) => {
    const [root] = await ids(store, [newTask({ name: "r", job: "j1" })]);
    const [b] = await ids(store, [newTask({ job: "j2", needs: [{ id: root! }] })]);
    const [c] = await ids(store, [newTask({ job: "j3", needs: [{ id: b! }] })]);
    const [d, gone] = await ids(store, [
      newTask({ needs: [{ id: root! }, { id: b! }] }),
      newTask({ needs: [{ id: root! }] }),
    ]);
    await store.abort(gone!);
    clock.advance(5);
    await failId(store, root!);
    const ended = (await must(store, root!)).endedAt;
    expect(ended).toBe(clock.now());
    for (const id of [b!, c!, d!]) {
      const t = await must(store, id);
      expect(t, `task ${id}`).toMatchObject({
        status: "terminal",
        outcome: "upstream_failed",
        endedAt: ended,
      });
      expect(t.error!.message).toBe(`upstream task ${root} failed`);
    }
    // A dependent that was already terminal is left alone.
    expect((await must(store, gone!)).outcome).toBe("aborted");
    expect(await store.jobStatus("j3")).toMatchObject({ settled: true, byOutcome: { upstream_failed: 1 } });
  });

  it("§6.1 the cascade has no depth limit (chain of 300)", async ({ store, expect }) => {
    const chainIds = await ids(store, [
      newTask({ name: "r" }),
      ...Array.from({ length: 300 }, (_, i) => newTask({ needs: [{ index: i }] })),
    ]);
    await failId(store, chainIds[0]!);
    const last = await must(store, chainIds[300]!);
    expect(last.outcome).toBe("upstream_failed");
    expect(last.error!.message).toBe(`upstream task ${chainIds[0]} failed`);
    expect(await store.stats()).toEqual([
      { queue: "default", byStatus: { terminal: 301 }, byOutcome: { failed: 1, upstream_failed: 300 } },
    ]);
  });

  it("§7.1 abort of a pending or waiting task ends it aborted at once and cascades in the same call", async ({
    clock,
    store,
    expect,
  }) => {
    const [a, b, c] = await chain(store);
    const [timer] = await ids(store, [newTask({ delayMs: 60_000 })]);
    clock.advance(3);
    expect(abortState(await store.abort(a!))).toEqual({ state: "aborted" });
    const ra = await must(store, a!);
    expect(ra).toMatchObject({ status: "terminal", outcome: "aborted", endedAt: clock.now() });
    for (const id of [b!, c!]) {
      const t = await must(store, id);
      expect(t).toMatchObject({ outcome: "upstream_failed", endedAt: ra.endedAt });
      expect(t.error!.message).toBe(`upstream task ${a} failed`);
    }
    expect(abortState(await store.abort(timer!))).toEqual({ state: "aborted" });
    expect(await must(store, timer!)).toMatchObject({ outcome: "aborted", wakeAt: null });
    expect((await store.events(timer!)).map((e) => e.kind)).toEqual(["abort_requested", "aborted"]);
    expect(await store.claim(claimReq({ names: ["r", "t"] }))).toEqual([]);
  });

  it("§7.2 / §7.3 abort of a running task marks it once; of a terminal task changes nothing; of an unknown id is RATCHET_NOT_FOUND", async (env) => {
    const { store, expect } = env;
    const [run, done] = await ids(store, [newTask({ name: "x" }), newTask({ name: "y" })]);
    await store.claim(claimReq({ names: ["x"] }));
    expect(abortState(await store.abort(run!))).toEqual({ state: "marked" });
    expect(abortState(await store.abort(run!))).toEqual({ state: "marked" });
    expect((await store.events(run!)).map((e) => e.kind)).toEqual(["abort_requested"]);
    expect(await must(store, run!)).toMatchObject({ status: "running", abortRequested: true });
    await completeId(store, done!);
    const before = await must(store, done!);
    expect(abortState(await store.abort(done!))).toEqual({ state: "terminal", outcome: "completed" });
    expect(await store.get(done!)).toEqual(before);
    await refusedUnchanged(env, () => store.abort(987_654), "RATCHET_NOT_FOUND");
  });

  it("§6.3 retry of a failed root puts it back to pending (attempts 0, token kept) and revives its upstream_failed subtree", async ({
    store,
    expect,
  }) => {
    const [r, b, c] = await chain(store);
    await failId(store, r!);
    const epoch = (await must(store, r!)).epoch;
    const back = await store.retry(r!);
    expect(back).toMatchObject({ id: r, status: "pending", outcome: null, error: null, attempts: 0, epoch });
    expect(back.endedAt).toBeNull();
    expect(await store.get(r!)).toEqual(back);
    for (const id of [b!, c!]) {
      expect(await must(store, id), `task ${id}`).toMatchObject({
        status: "waiting",
        outcome: null,
        error: null,
        needsPending: 1,
        endedAt: null,
      });
    }
    expect((await store.events(r!)).map((e) => e.kind)).toEqual(["failed", "retried"]);
    await completeId(store, r!);
    await completeId(store, b!);
    await completeId(store, c!);
  });

  it("§6.3 a dependent that also needs another task that did not complete stays upstream_failed on retry", async ({
    store,
    expect,
  }) => {
    const [a, x, d, e] = await ids(store, [
      newTask({ name: "a" }),
      newTask({ name: "x", delayMs: 60_000 }),
      newTask({ needs: [{ index: 0 }, { index: 1 }] }),
      newTask({ needs: [{ index: 2 }] }),
    ]);
    await failId(store, a!);
    expect((await must(store, d!)).error!.message).toBe(`upstream task ${a} failed`);
    await store.abort(x!);
    await store.retry(a!);
    for (const id of [d!, e!])
      expect(await must(store, id), `task ${id}`).toMatchObject({ outcome: "upstream_failed" });
  });

  it("§6.3 retry accepts aborted and faulted tasks; with unfinished needs it puts the task back to waiting", async ({
    store,
    expect,
  }) => {
    const [f, y, x] = await ids(store, [
      newTask({ name: "f" }),
      newTask({ name: "y", delayMs: 60_000 }),
      newTask({ needs: [{ index: 1 }] }),
    ]);
    await failId(store, f!, "faulted");
    expect((await store.retry(f!)).status).toBe("pending");
    await store.abort(x!);
    expect(await store.retry(x!)).toMatchObject({ status: "waiting", needsPending: 1, outcome: null });
    await store.abort(y!);
    expect((await must(store, x!)).outcome).toBe("upstream_failed");
    expect(await store.retry(y!)).toMatchObject({ status: "pending", attempts: 0 });
  });

  it("§6.3 retry refuses upstream_failed (naming the root), completed, live and unknown tasks, changing nothing", async (env) => {
    const { store, expect } = env;
    const [r, b] = await chain(store);
    await failId(store, r!);
    const err = await refusedUnchanged(env, () => store.retry(b!), "RATCHET_INVALID_STATE");
    expect(err.message).toContain(`retry task ${r}`);
    const [done, live] = await ids(store, [newTask({ name: "done" }), newTask({ name: "live" })]);
    await completeId(store, done!);
    await refusedUnchanged(env, () => store.retry(done!), "RATCHET_INVALID_STATE");
    await refusedUnchanged(env, () => store.retry(live!), "RATCHET_INVALID_STATE");
    await store.claim(claimReq({ names: ["live"] }));
    await refusedUnchanged(env, () => store.retry(live!), "RATCHET_INVALID_STATE");
    await refusedUnchanged(env, () => store.retry(987_654), "RATCHET_NOT_FOUND");
  });

  it("§6.3 retry refuses a task one of whose needs ended badly, and one whose dedupe key another task holds", async (env) => {
    const { store, expect } = env;
    const [y, x] = await ids(store, [
      newTask({ name: "y", delayMs: 60_000 }),
      newTask({ needs: [{ index: 0 }] }),
    ]);
    await store.abort(x!);
    await store.abort(y!);
    const err = await refusedUnchanged(env, () => store.retry(x!), "RATCHET_INVALID_STATE");
    expect(err.message).toContain(`task ${y}`);

    const [first] = await ids(store, [newTask({ name: "k", dedupe: "key" })]);
    await failId(store, first!);
    const [second] = await ids(store, [newTask({ name: "k", dedupe: "key", delayMs: 60_000 })]);
    expect(second).not.toBe(first);
    const e2 = await refusedUnchanged(env, () => store.retry(first!), "RATCHET_INVALID_STATE");
    expect(e2.message).toContain(`task ${second}`);
  });

  it("§6.3 retry refuses, changing nothing, when a dependent it would revive has a dedupe key another task holds now (the root itself)", async (env) => {
    const { store, expect } = env;
    const [root] = await ids(store, [newTask({ name: "k", dedupe: "same", delayMs: 60_000 })]);
    await store.abort(root!);
    // Enqueued after the root ended: upstream_failed at once, so the key was free to take.
    const [dep] = await ids(store, [newTask({ name: "k", dedupe: "same", needs: [{ id: root! }] })]);
    expect((await must(store, dep!)).outcome).toBe("upstream_failed");
    const err = await refusedUnchanged(env, () => store.retry(root!), "RATCHET_INVALID_STATE");
    expect(err.message).toContain(`task ${dep}`);
    expect(err.message).toContain(`task ${root}`);
  });

  it("§6.2 completing a need releases dependents even when the completion is one of several settlements in one call", async ({
    store,
    expect,
  }) => {
    const [a, b, c] = await ids(store, [
      newTask({ name: "a" }),
      newTask({ name: "a" }),
      newTask({ needs: [{ index: 0 }, { index: 1 }] }),
    ]);
    const claimed = await store.claim(claimReq({ names: ["a"] }));
    expect(claimed.map((t) => t.id).sort((p, q) => p - q)).toEqual([a, b]);
    expect(
      await store.settle(
        claimed.map((t) => ({ kind: "complete" as const, fence: fenceOf(t), result: "null" })),
      ),
    ).toEqual(["ok", "ok"]);
    expect(await must(store, c!)).toMatchObject({ status: "pending", needsPending: 0 });
  });
}
