/** Conformance: migration, the clock, and close (spec §10.1, §11.1). */
import { RatchetError } from "../../errors.js";
import type { Settlement } from "../../store/store.js";
import { claimReq, type Define, fenceOf, GRACE, ids, must, newTask, unlimited } from "./kit.js";

export function registerLifecycleTests(it: Define): void {
  it("§10.1 migrate is idempotent: migrating again keeps the data and the store keeps working", async ({
    store,
    expect,
  }) => {
    const [a] = await ids(store, [newTask({ input: '{"keep":true}' })]);
    await store.migrate();
    await store.migrate();
    expect((await must(store, a!)).input).toEqual({ keep: true });
    const [c] = await store.claim(claimReq());
    expect(c!.id).toBe(a);
    const [b] = await ids(store, [newTask()]);
    expect(b).toBeGreaterThan(a!);
  });

  it("§11.1 the store reads the injected clock: now() and every written time follow it", async ({
    clock,
    store,
    expect,
  }) => {
    expect(await store.now()).toBe(clock.now());
    clock.advance(12_345);
    expect(await store.now()).toBe(clock.now());
    const t0 = clock.now();
    const [id] = await ids(store, [newTask()]);
    clock.advance(1_000);
    const [c] = await store.claim(claimReq());
    clock.advance(500);
    await store.settle([{ kind: "complete", fence: fenceOf(c!), result: "1" }]);
    const t = await must(store, id!);
    expect([t.createdAt, t.claimedAt, t.startedAt, t.endedAt, t.updatedAt]).toEqual([
      t0,
      t0 + 1_000,
      t0 + 1_000,
      t0 + 1_500,
      t0 + 1_500,
    ]);
  });

  it("every operation after close rejects with a RatchetError, and close is idempotent", async ({
    store,
    expect,
  }) => {
    const [id] = await ids(store, [newTask(), newTask()]);
    const [c] = await store.claim(claimReq({ limit: 1 }));
    const fence = fenceOf(c!);
    await store.close();
    await store.close();
    const settlement: Settlement = { kind: "complete", fence, result: "1" };
    const calls: [string, () => Promise<unknown>][] = [
      ["migrate", () => store.migrate()],
      ["enqueue", () => store.enqueue([newTask()], unlimited)],
      ["claim", () => store.claim(claimReq())],
      ["listReady", () => store.listReady("default", 10)],
      ["loadSteps", () => store.loadSteps(id!)],
      ["commitStep", () => store.commitStep(fence, "s", "1")],
      ["heartbeat", () => store.heartbeat(fence, 1_000, GRACE)],
      ["progress", () => store.progress(fence, 0.5, null)],
      ["settle", () => store.settle([settlement])],
      ["get", () => store.get(id!)],
      ["needsOf", () => store.needsOf(id!)],
      ["steps", () => store.steps(id!)],
      ["events", () => store.events(id!)],
      ["list", () => store.list({ limit: 10 })],
      ["jobStatus", () => store.jobStatus("j")],
      ["stats", () => store.stats()],
      ["nextRunAt", () => store.nextRunAt()],
      ["countReady", () => store.countReady(["default"], ["t"], 10)],
      ["retry", () => store.retry(id!)],
      ["abort", () => store.abort(id!)],
      ["prune", () => store.prune(0, 10)],
      // now() is not listed: a store may answer it from its clock without touching storage.
    ];
    const wrong: string[] = [];
    for (const [name, call] of calls) {
      try {
        await call();
        wrong.push(`${name}: resolved`);
      } catch (e) {
        if (!(e instanceof RatchetError)) wrong.push(`${name}: threw ${String(e)}`);
      }
    }
    expect(wrong, "operations that did not reject with a RatchetError after close").toEqual([]);
  });
}
