import { describe, expect, it } from "vitest";
import type { TaskContext } from "../../src/engine/context.js";
import { defineTask, NonRetryableError } from "../../src/index.js";
import { drain, expectCode, FakeClock, forEachBackend, openRatchet, tickUntil } from "./helpers.js";

/** Fails while `failing.has(input.name)`; otherwise returns its name. */
function makeTasks() {
  const failing = new Set<string>();
  const order: string[] = [];
  const step = defineTask({
    name: "step",
    retry: { maxAttempts: 1 },
    run(_ctx: TaskContext, input: { name: string }) {
      order.push(input.name);
      if (failing.has(input.name)) throw new NonRetryableError(`${input.name} broke`);
      return input.name;
    },
  });
  return { failing, order, step };
}

forEachBackend(() => {
  describe("dependencies and cascade (spec §6)", () => {
    it("§6.2 a chain A → B → C runs in order; each dependent is released when its need completes", async () => {
      const { order, step } = makeTasks();
      const r = await openRatchet([step]);
      const [a, b, c] = await r.enqueueJob("chain", [
        { task: step, input: { name: "A" } },
        { task: step, input: { name: "B" }, needs: [-1] },
        { task: step, input: { name: "C" }, needs: [-1] },
      ]);
      expect((await r.get(b!))!.status).toBe("waiting");
      await tickUntil(r, async () => (await r.get(c!))!.status === "terminal");
      expect(order).toEqual(["A", "B", "C"]);
      for (const id of [a, b, c]) expect((await r.get(id!))!.outcome).toBe("completed");
      const js = await r.jobStatus("chain");
      expect(js).toMatchObject({ total: 3, settled: true, byOutcome: { completed: 3 } });
    });

    it("§6.2 a diamond's join runs only after both branches complete", async () => {
      const { order, step } = makeTasks();
      const r = await openRatchet([step]);
      const [, , , d] = await r.enqueueMany([
        { task: step, input: { name: "A" }, key: "a" },
        { task: step, input: { name: "B" }, key: "b", needs: ["a"] },
        { task: step, input: { name: "C" }, key: "c", needs: ["a"] },
        { task: step, input: { name: "D" }, needs: ["b", "c"] },
      ]);
      expect((await r.get(d!))!.needsPending).toBe(2);
      await tickUntil(r, async () => (await r.get(d!))!.status === "terminal");
      expect(order[0]).toBe("A");
      expect(order[3]).toBe("D");
      expect((await r.get(d!))!.outcome).toBe("completed");
    });

    it("§6.1 when A fails, B and C become upstream_failed naming A, in the same transaction", async () => {
      const clock = new FakeClock();
      const { failing, order, step } = makeTasks();
      failing.add("A");
      const r = await openRatchet([step], { clock });
      const [a, b, c] = await r.enqueueJob("chain", [
        { task: step, input: { name: "A" } },
        { task: step, input: { name: "B" }, needs: [-1] },
        { task: step, input: { name: "C" }, needs: [-1] },
      ]);
      clock.advance(5);
      await drain(r);
      const ra = (await r.get(a!))!;
      expect(ra.outcome).toBe("failed");
      for (const id of [b!, c!]) {
        const rec = (await r.get(id))!;
        expect(rec.status).toBe("terminal");
        expect(rec.outcome).toBe("upstream_failed");
        expect(rec.error!.message).toBe(`upstream task ${a} failed`);
        expect(rec.endedAt).toBe(ra.endedAt);
      }
      expect(order).toEqual(["A"]);
    });

    it("§6.1 the cascade crosses jobs", async () => {
      const { failing, step } = makeTasks();
      failing.add("A");
      const r = await openRatchet([step]);
      const [a] = await r.enqueueJob("j1", [{ task: step, input: { name: "A" } }]);
      const [b] = await r.enqueueJob("j2", [{ task: step, input: { name: "B" }, needs: [a!] }]);
      const [c] = await r.enqueueJob("j3", [{ task: step, input: { name: "C" }, needs: [b!] }]);
      await drain(r);
      for (const id of [b!, c!]) {
        const rec = (await r.get(id))!;
        expect(rec.outcome).toBe("upstream_failed");
        expect(rec.error!.message).toBe(`upstream task ${a} failed`);
      }
      expect(await r.jobStatus("j3")).toMatchObject({ settled: true, byOutcome: { upstream_failed: 1 } });
    });

    it("§6.1 the cascade has no depth limit (chain of 500)", async () => {
      const { failing, step } = makeTasks();
      failing.add("root");
      const r = await openRatchet([step]);
      const ids = await r.enqueueMany([
        { task: step, input: { name: "root" } },
        ...Array.from({ length: 500 }, (_, i) => ({ task: step, input: { name: `n${i}` }, needs: [-1] })),
      ]);
      await drain(r);
      const last = (await r.get(ids[500]!))!;
      expect(last.outcome).toBe("upstream_failed");
      expect(last.error!.message).toBe(`upstream task ${ids[0]} failed`);
      const stats = await r.stats();
      expect(stats[0]!.byOutcome).toEqual({ failed: 1, upstream_failed: 500 });
    });

    it("§6.1 terminal dependents are left alone; dependents across a diamond are failed once", async () => {
      const { failing, step } = makeTasks();
      failing.add("X");
      const r = await openRatchet([step]);
      const [a, x] = await r.enqueueMany([
        { task: step, input: { name: "A" } },
        { task: step, input: { name: "X" }, delayMs: 60_000 },
      ]);
      const [done] = await r.enqueueMany([{ task: step, input: { name: "done" }, needs: [a!] }]);
      await tickUntil(r, async () => (await r.get(done!))!.status === "terminal");
      // X will fail later; `done` needs only A and is complete, `late` needs X.
      const [late, later] = await r.enqueueMany([
        { task: step, input: { name: "late" }, needs: [x!, a!] },
        { task: step, input: { name: "later" }, needs: [-1, x!] },
      ]);
      await r.store.abort(x!); // ends X (not completed): cascade from X
      expect((await r.get(done!))!.outcome).toBe("completed");
      expect((await r.get(late!))!.outcome).toBe("upstream_failed");
      expect((await r.get(later!))!.outcome).toBe("upstream_failed");
      expect((await r.get(later!))!.error!.message).toBe(`upstream task ${x} failed`);
    });

    it("§6.3 retry(A) puts A back to pending and its upstream_failed subtree back to waiting; then all complete", async () => {
      const { failing, order, step } = makeTasks();
      failing.add("A");
      const r = await openRatchet([step]);
      const [a, b, c] = await r.enqueueJob("chain", [
        { task: step, input: { name: "A" } },
        { task: step, input: { name: "B" }, needs: [-1] },
        { task: step, input: { name: "C" }, needs: [-1] },
      ]);
      await drain(r);
      const epochBefore = (await r.get(a!))!.epoch;
      failing.delete("A");
      const back = await r.retry(a!);
      expect(back).toMatchObject({ id: a, status: "pending", outcome: null, attempts: 0 });
      expect(back.epoch).toBe(epochBefore);
      for (const id of [b!, c!]) {
        const rec = (await r.get(id))!;
        expect(rec.status).toBe("waiting");
        expect(rec.outcome).toBeNull();
        expect(rec.needsPending).toBe(1);
      }
      expect((await r.jobStatus("chain")).settled).toBe(false);
      await tickUntil(r, async () => (await r.get(c!))!.status === "terminal");
      for (const id of [a!, b!, c!]) expect((await r.get(id))!.outcome).toBe("completed");
      expect(order).toEqual(["A", "A", "B", "C"]);
      expect((await r.store.events(a!)).map((e) => e.kind)).toContain("retried");
    });

    it("§6.3 retry of an upstream_failed task throws RATCHET_INVALID_STATE naming the root to retry", async () => {
      const { failing, step } = makeTasks();
      failing.add("A");
      const r = await openRatchet([step]);
      const [a, b, c] = await r.enqueueMany([
        { task: step, input: { name: "A" } },
        { task: step, input: { name: "B" }, needs: [-1] },
        { task: step, input: { name: "C" }, needs: [-1] },
      ]);
      await drain(r);
      for (const id of [b!, c!]) {
        const err = await expectCode(() => r.retry(id), "RATCHET_INVALID_STATE");
        expect(err.message).toContain(`retry task ${a}`);
      }
    });

    it("§6.3 retry refuses completed, live and unknown tasks", async () => {
      const { step } = makeTasks();
      const r = await openRatchet([step]);
      const done = await r.enqueue(step, { name: "done" });
      await drain(r);
      const live = await r.enqueue(step, { name: "live" });
      await expectCode(() => r.retry(done), "RATCHET_INVALID_STATE");
      await expectCode(() => r.retry(live), "RATCHET_INVALID_STATE");
      await expectCode(() => r.retry(987_654), "RATCHET_NOT_FOUND");
      expect((await r.get(live))!.status).toBe("pending");
    });

    it("§6.3 retry accepts aborted and faulted tasks", async () => {
      const bad = defineTask({ name: "bad", run: () => ({ d: new Date() }) });
      const { step } = makeTasks();
      const r = await openRatchet([bad, step]);
      const f = await r.enqueue(bad);
      const ab = await r.enqueue(step, { name: "ab" }, { delayMs: 60_000 });
      await r.abort(ab);
      await drain(r);
      expect((await r.get(f))!.outcome).toBe("faulted");
      expect((await r.retry(f)).status).toBe("pending");
      expect((await r.retry(ab)).status).toBe("pending");
    });

    it("§6.3 retry refuses a task one of whose needs ended badly, naming that root", async () => {
      const { failing, step } = makeTasks();
      failing.add("Y");
      const r = await openRatchet([step]);
      const [y, x] = await r.enqueueMany([
        { task: step, input: { name: "Y" }, delayMs: 60_000 },
        { task: step, input: { name: "X" }, needs: [-1] },
      ]);
      await r.abort(x!); // X aborted while waiting on Y
      await r.store.abort(y!); // then Y ends badly
      const err = await expectCode(() => r.retry(x!), "RATCHET_INVALID_STATE");
      expect(err.message).toContain(`task ${y}`);
    });

    it("§6.3 retry of a task whose needs are still unfinished puts it back to waiting", async () => {
      const { step } = makeTasks();
      const r = await openRatchet([step]);
      const [, x] = await r.enqueueMany([
        { task: step, input: { name: "Y" }, delayMs: 60_000 },
        { task: step, input: { name: "X" }, needs: [-1] },
      ]);
      await r.abort(x!);
      const rec = await r.retry(x!);
      expect(rec.status).toBe("waiting");
      expect(rec.needsPending).toBe(1);
    });

    it("§6.3 retry refuses a task whose dedupe key another task now holds", async () => {
      const { failing, step } = makeTasks();
      failing.add("k1");
      const r = await openRatchet([step]);
      const first = await r.enqueue(step, { name: "k1" }, { dedupe: "key" });
      await drain(r);
      const second = await r.enqueue(step, { name: "k2" }, { dedupe: "key", delayMs: 60_000 });
      expect(second).not.toBe(first);
      const err = await expectCode(() => r.retry(first), "RATCHET_INVALID_STATE");
      expect(err.message).toContain(`task ${second}`);
    });

    it("§6.3 a dependent that also needs another task that did not complete stays upstream_failed on retry of the first root", async () => {
      const { failing, order, step } = makeTasks();
      failing.add("A");
      failing.add("X");
      const r = await openRatchet([step]);
      const [a, x, d, e] = await r.enqueueMany([
        { task: step, input: { name: "A" } },
        { task: step, input: { name: "X" }, delayMs: 60_000 },
        { task: step, input: { name: "D" }, needs: [-2, -1] },
        { task: step, input: { name: "E" }, needs: [-1] },
      ]);
      await drain(r); // A fails: D and E become upstream_failed naming A
      expect((await r.get(d!))!.error!.message).toBe(`upstream task ${a} failed`);
      await r.abort(x!); // X ends badly too (D is already terminal)
      failing.delete("A");
      await r.retry(a!);
      for (const id of [d!, e!]) {
        const rec = (await r.get(id))!;
        expect(rec.status).toBe("terminal");
        expect(rec.outcome).toBe("upstream_failed");
      }
      await drain(r);
      expect((await r.get(a!))!.outcome).toBe("completed");
      expect(order).toEqual(["A", "A"]);
    });

    it("§9.1 a settled job with failures is settled, but not done successfully", async () => {
      const { failing, step } = makeTasks();
      failing.add("bad");
      const r = await openRatchet([step]);
      await r.enqueueJob("mixed", [
        { task: step, input: { name: "ok" } },
        { task: step, input: { name: "bad" } },
        { task: step, input: { name: "dep" }, needs: [-1] },
      ]);
      expect((await r.jobStatus("mixed")).settled).toBe(false);
      await drain(r);
      const js = await r.jobStatus("mixed");
      expect(js.settled).toBe(true);
      expect(js.total).toBe(3);
      expect(js.byStatus).toEqual({ terminal: 3 });
      expect(js.byOutcome).toEqual({ completed: 1, failed: 1, upstream_failed: 1 });
      // Settled, yet not every task completed: a poller can tell the two apart.
      expect(js.byOutcome.completed).not.toBe(js.total);
    });
  });
});
