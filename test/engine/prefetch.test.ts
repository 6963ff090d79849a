/** Prefetch: claiming ahead of free slots (spec §8.7), on both backends. */
import { describe, expect, it } from "vitest";
import { defineTask } from "../../src/index.js";
import { CLAIM_STEP, type ClaimRequest } from "../../src/store/store.js";
import { deferred, expectCode, forEachBackend, openRatchet, until } from "./helpers.js";

/** The limit of every claim the store of `r` is asked for from now on, in order. */
function claimLimits(r: { store: { claim: (req: ClaimRequest) => Promise<unknown> } }): number[] {
  const limits: number[] = [];
  const claim = r.store.claim.bind(r.store);
  r.store.claim = (req: ClaimRequest) => {
    limits.push(req.limit);
    return claim(req);
  };
  return limits;
}

forEachBackend(() => {
  describe("prefetch (spec §8.7)", () => {
    it("§8.7 / §8.1 with prefetch, at most `concurrency` tasks run at once, each runs exactly once, and claims take more than the free slots", async () => {
      let running = 0;
      let most = 0;
      const ran = new Map<number, number>();
      const t = defineTask({
        name: "p",
        async run(_ctx, input: { i: number }) {
          most = Math.max(most, ++running);
          ran.set(input.i, (ran.get(input.i) ?? 0) + 1);
          await new Promise((r) => setImmediate(r));
          running--;
          return input.i;
        },
      });
      const r = await openRatchet([t]);
      const limits = claimLimits(r);
      const n = 300;
      await r.enqueueMany(Array.from({ length: n }, (_, i) => ({ task: t, input: { i } })));
      await r.start({ concurrency: 2, prefetch: 50 });
      await until(
        async () => (await r.stats())[0]?.byOutcome.completed === n,
        "every task completed",
        30_000,
      );
      await r.stop();
      expect(most).toBe(2);
      expect(ran.size).toBe(n);
      expect([...ran.values()].every((c) => c === 1)).toBe(true);
      // The first claim asks for concurrency + prefetch; refills ask for what the buffer lacks.
      expect(limits[0]).toBe(52);
      expect(limits.filter((l) => l > 2).length).toBeGreaterThan(0);
      // Half-empty refills of ≥ 25 each: far fewer claims than one per task.
      expect(limits.filter((l) => l > 0).length).toBeLessThan(n / 10);
    });

    it("§8.7 a refill that wants more than CLAIM_STEP asks for a multiple of it; every task still runs exactly once", async () => {
      const ran = new Map<number, number>();
      const t = defineTask({
        name: "step",
        async run(_ctx, input: { i: number }) {
          ran.set(input.i, (ran.get(input.i) ?? 0) + 1);
          await new Promise((r) => setImmediate(r));
          return null;
        },
      });
      const r = await openRatchet([t]);
      const limits = claimLimits(r);
      const n = 1_000;
      await r.enqueueMany(Array.from({ length: n }, (_, i) => ({ task: t, input: { i } })));
      await r.start({ concurrency: 4, prefetch: 300 });
      await until(
        async () => (await r.stats())[0]?.byOutcome.completed === n,
        "every task completed",
        30_000,
      );
      await r.stop();
      expect(ran.size).toBe(n);
      expect([...ran.values()].every((c) => c === 1)).toBe(true);
      // Room for 304 (concurrency + prefetch): the first claim asks for 256; no ask above the
      // step is off it.
      expect(limits[0]).toBe(256);
      expect(limits.filter((l) => l > CLAIM_STEP && l % CLAIM_STEP !== 0)).toEqual([]);
    });

    it("§8.7 / §8.2 buffered tasks are running and leased to the worker; stop() gives them back at once, pending, attempt not counted", async () => {
      const started = deferred();
      const gate = deferred();
      const t = defineTask({
        name: "held",
        async run(_ctx, input: { i: number }) {
          if (input.i === 0) {
            started.resolve();
            await gate.promise;
          }
          return input.i;
        },
      });
      const r = await openRatchet([t]);
      const first = await r.enqueue(t, { i: 0 });
      const rest: number[] = [];
      for (let i = 1; i <= 5; i++) rest.push(await r.enqueue(t, { i }));
      await r.start({ concurrency: 1, prefetch: 5, shutdownTimeoutMs: 30_000 });
      await started.promise;
      // The one slot runs task 0; the other five wait in the buffer, claimed by this worker.
      await until(async () => {
        const rows = await Promise.all(rest.map((id) => r.get(id)));
        return rows.every((x) => x?.status === "running" && x.lockedBy === r.workerId);
      }, "the buffered tasks to be running under this worker");
      const stopping = r.stop();
      // Released before the in-flight task finishes, so another worker need not wait for a lease.
      await until(async () => {
        const rows = await Promise.all(rest.map((id) => r.get(id)));
        return rows.every((x) => x?.status === "pending");
      }, "the buffered tasks to be released");
      for (const id of rest) {
        const rec = (await r.get(id))!;
        expect([rec.status, rec.attempts, rec.lockedBy, rec.leaseUntil]).toEqual(["pending", 0, null, null]);
        expect((await r.store.events(id)).map((e) => e.kind)).toEqual(["released"]);
      }
      gate.resolve();
      await stopping;
      expect((await r.get(first))!.outcome).toBe("completed");
    });

    it("§8.7 a buffered task that waited longer than half its maxMs is given back and claimed again, not started late", async () => {
      const gate = deferred();
      const runs = new Map<number, number>();
      const t = defineTask({
        name: "short",
        maxMs: 200,
        async run(_ctx, input: { i: number }) {
          runs.set(input.i, (runs.get(input.i) ?? 0) + 1);
          if (input.i === 0) await gate.promise;
          return input.i;
        },
      });
      const r = await openRatchet([t]);
      const ids: number[] = [];
      for (let i = 0; i < 3; i++) ids.push(await r.enqueue(t, { i }));
      await r.start({ concurrency: 1, prefetch: 2 });
      await until(() => runs.get(0) === 1, "task 0 to start");
      // Tasks 1 and 2 wait in the buffer longer than 100 ms (half their maxMs).
      await new Promise((res) => setTimeout(res, 150));
      gate.resolve();
      for (const id of ids) await r.waitFor(id, { timeoutMs: 10_000 });
      await r.stop();
      for (const id of ids.slice(1)) {
        const kinds = (await r.store.events(id)).map((e) => e.kind);
        expect(kinds[0], `task ${id}: ${kinds.join(", ")}`).toBe("released");
        expect((await r.get(id))!.attempts).toBe(1);
      }
      expect([runs.get(1), runs.get(2)]).toEqual([1, 1]);
    });

    it("§8.7 a prefetch that is not an integer in [0, 10000] is refused with RATCHET_CONFIG, and no worker starts", async () => {
      const t = defineTask({ name: "x", run: () => 1 });
      const r = await openRatchet([t]);
      for (const bad of [-1, 1.5, 10_001, Number.NaN, "8" as unknown as number]) {
        const e = await expectCode(() => r.start({ prefetch: bad }), "RATCHET_CONFIG");
        expect(e.message).toContain("prefetch");
      }
      await r.start({ concurrency: 1, prefetch: 0 });
      await r.stop();
    });
  });
});
