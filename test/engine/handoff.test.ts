/** Hand-off: an enqueue beside this process's idle worker claims the task for it at once (spec §8.8). */
import { describe, expect, it } from "vitest";
import { defineTask } from "../../src/index.js";
import type { ClaimRequest, HandoffRequest, NewTask, Store } from "../../src/store/store.js";
import {
  claimReq,
  deferred,
  FakeClock,
  forEachBackend,
  newTask,
  openRatchet,
  openSqliteStore,
  until,
  untilStatus,
} from "./helpers.js";

const H: HandoffRequest = { workerId: "local", queues: ["default"], names: ["t"], leaseGraceMs: 10_000 };
const opts = { maxDepth: () => 1_000_000, handoff: H };

async function enqueueOne(store: Store, t: NewTask = newTask()) {
  const [e] = await store.enqueue([t], opts);
  return e!;
}

describe("hand-off in the SQLite store (spec §8.8)", () => {
  it("§8.8 / §3.2 a plain task first in line is claimed for the worker in the enqueue's transaction: running, attempt 1, leased from now", async () => {
    const clock = new FakeClock(1_000_000);
    const store = await openSqliteStore(clock);
    const e = await enqueueOne(store, newTask({ maxMs: 5_000 }));
    expect(e.status).toBe("running");
    expect(e.claimed).toMatchObject({ id: e.id, attempts: 1, lockedBy: "local", reclaimed: false });
    const t = (await store.get(e.id))!;
    expect(t).toMatchObject({
      status: "running",
      attempts: 1,
      lockedBy: "local",
      leaseUntil: clock.now() + 5_000 + 10_000,
      claimedAt: clock.now(),
      startedAt: clock.now(),
    });
    expect(t.epoch).toBe(e.claimed!.epoch);
    // Claimed once: a worker's claim finds nothing more.
    expect(await store.claim(claimReq())).toEqual([]);
  });

  it("§8.8 / §3.5 no hand-off while something is ahead in claim order: a pending task of the queue, a due timer, an expired lease", async () => {
    const clock = new FakeClock(1_000_000);
    const store = await openSqliteStore(clock);
    // A pending task ahead in the same queue.
    const [first] = await store.enqueue([newTask()], { maxDepth: () => 1_000_000 });
    const behind = await enqueueOne(store);
    expect(behind.claimed).toBeUndefined();
    expect((await store.get(behind.id))!.status).toBe("pending");
    // The claim order stays: the older task first.
    expect((await store.claim(claimReq({ limit: 1 })))[0]!.id).toBe(first!.id);
    await store.claim(claimReq({ limit: 1 }));

    // A timer that is due (promoted first by any claim).
    await store.enqueue([newTask({ delayMs: 100 })], { maxDepth: () => 1_000_000 });
    clock.advance(100);
    expect((await enqueueOne(store)).claimed).toBeUndefined();
    await store.claim(claimReq({ limit: 10 }));

    // An expired lease (reclaimed first, spec §3.5): the tasks claimed above ran out.
    clock.advance(60_000);
    expect((await enqueueOne(store)).claimed).toBeUndefined();
  });

  it("§8.8 a higher priority new task is first in line even behind older pending tasks, so it is handed off", async () => {
    const clock = new FakeClock(1_000_000);
    const store = await openSqliteStore(clock);
    await store.enqueue([newTask(), newTask()], { maxDepth: () => 1_000_000 });
    const urgent = await enqueueOne(store, newTask({ priority: 5 }));
    expect(urgent.claimed?.id).toBe(urgent.id);
  });

  it("§8.8 only a single plain task of a served queue and name is handed off: not a batch, a delay, needs, another name or queue, a dedupe hit", async () => {
    const clock = new FakeClock(1_000_000);
    const store = await openSqliteStore(clock);
    const batch = await store.enqueue([newTask(), newTask({ queue: "other" })], opts);
    expect(batch.map((e) => e.claimed)).toEqual([undefined, undefined]);
    await store.claim(claimReq({ queues: ["default", "other"] }));
    const cases: [string, NewTask, string][] = [
      ["delayed", newTask({ delayMs: 1 }), "waiting"],
      ["needs", newTask({ needs: [{ id: batch[0]!.id }] }), "waiting"],
      ["another name", newTask({ name: "u" }), "pending"],
      ["another queue", newTask({ queue: "other" }), "pending"],
    ];
    for (const [what, t, status] of cases) {
      const e = await enqueueOne(store, t);
      expect(e.claimed, what).toBeUndefined();
      expect((await store.get(e.id))!.status, what).toBe(status);
    }
    await store.claim(claimReq({ names: ["t", "u"], queues: ["default", "other"], limit: 10 }));
    const held = await enqueueOne(store, newTask({ dedupe: "k" }));
    expect(held.claimed?.id).toBe(held.id);
    const again = await enqueueOne(store, newTask({ dedupe: "k" }));
    expect(again).toMatchObject({ id: held.id, deduped: true });
    expect(again.claimed).toBeUndefined();
  });
});

forEachBackend((backend) => {
  describe("hand-off through the engine (spec §8.8)", () => {
    it("§8.8 / §8.1 a task enqueued beside an idle worker runs exactly once and is counted as a claim; on SQLite no claim statement took it", async () => {
      const seen: number[] = [];
      const t = defineTask({ name: "h", run: (_ctx, input: { i: number }) => void seen.push(input.i) });
      const r = await openRatchet([t]);
      const claimedBy: number[] = [];
      const claim = r.store.claim.bind(r.store);
      r.store.claim = async (req: ClaimRequest) => {
        const got = await claim(req);
        claimedBy.push(...got.map((c) => c.id));
        return got;
      };
      await r.start({ concurrency: 4 });
      const ids: number[] = [];
      for (let i = 0; i < 20; i++) {
        ids.push(await r.enqueue(t, { i }));
        await until(() => seen.length === i + 1, `task ${i} ran`, 10_000);
      }
      await until(async () => (await r.stats())[0]?.byOutcome.completed === 20, "all completed", 10_000);
      await r.stop();
      expect(seen).toEqual(Array.from({ length: 20 }, (_, i) => i));
      expect(r.workerCounters().claims).toBe(20);
      if (backend === "sqlite") expect(claimedBy.filter((id) => ids.includes(id))).toEqual([]);
    });

    it("§8.8 / §8.1 with every slot taken an enqueue is not handed off: the task waits pending and runs when the slot frees", async () => {
      const gate = deferred();
      const started = deferred();
      const order: string[] = [];
      const t = defineTask({
        name: "busy",
        async run(_ctx, input: { k: string }) {
          order.push(input.k);
          if (input.k === "a") {
            started.resolve();
            await gate.promise;
          }
        },
      });
      const r = await openRatchet([t]);
      await r.start({ concurrency: 1 });
      await r.enqueue(t, { k: "a" });
      await started.promise;
      const b = await r.enqueue(t, { k: "b" });
      expect((await r.get(b))!.status).toBe("pending");
      gate.resolve();
      await untilStatus(r, b, "terminal");
      await r.stop();
      expect(order).toEqual(["a", "b"]);
    });
  });
});
