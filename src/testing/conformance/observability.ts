/**
 * Conformance: the read behind latency metrics (`recentlyEnded`). No spec
 * rule covers it yet; it is a plain read of terminal tasks by end time.
 */
import { claimId, completeId, type Define, failId, fenceOf, ids, newTask } from "./kit.js";

export function registerObservabilityTests(it: Define): void {
  it("recentlyEnded (metrics read): terminal tasks only, newest end first, with their times", async ({
    store,
    clock,
    expect,
  }) => {
    const t0 = clock.now();
    const [a, b, live, never] = await ids(store, [newTask(), newTask(), newTask(), newTask()]);
    clock.advance(1_000);
    await completeId(store, a!); // claimed and ended at t0 + 1000
    clock.advance(500);
    const cb = await claimId(store, b!); // claimed at t0 + 1500
    clock.advance(250);
    const [r] = await store.settle([
      { kind: "fail", fence: fenceOf(cb), outcome: "failed", error: { name: "Error", message: "x" } },
    ]); // ended at t0 + 1750
    expect(r).toBe("ok");
    clock.advance(100);
    await store.abort(never!); // ended at t0 + 1850 without a claim
    await claimId(store, live!);

    const ended = await store.recentlyEnded(10);
    expect(ended.map((e) => e.id)).toEqual([never, b, a]);
    expect(ended[0]).toEqual({
      id: never,
      queue: "default",
      name: "t",
      outcome: "aborted",
      attempts: 0,
      createdAt: t0,
      runAfter: t0,
      startedAt: null,
      claimedAt: null,
      endedAt: t0 + 1_850,
    });
    expect(ended[1]).toMatchObject({
      outcome: "failed",
      attempts: 1,
      startedAt: t0 + 1_500,
      claimedAt: t0 + 1_500,
      endedAt: t0 + 1_750,
    });
    expect(ended[2]).toMatchObject({ outcome: "completed", claimedAt: t0 + 1_000, endedAt: t0 + 1_000 });
  });

  it("recentlyEnded (metrics read): bounded by its limit; ties on the end time newest id first", async ({
    store,
    expect,
  }) => {
    const all = await ids(
      store,
      Array.from({ length: 5 }, () => newTask()),
    );
    for (const id of all) await failId(store, id); // same clock instant: ends tie
    const two = await store.recentlyEnded(2);
    expect(two.map((e) => e.id)).toEqual([all[4], all[3]]);
    expect((await store.recentlyEnded(100)).map((e) => e.id)).toEqual([...all].reverse());
  });
}
