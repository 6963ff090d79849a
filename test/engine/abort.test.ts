import { describe, expect, it } from "vitest";
import type { TaskContext } from "../../src/engine/context.js";
import { defineTask, type RatchetError } from "../../src/index.js";
import {
  aborted,
  claimReq,
  deferred,
  drain,
  expectCode,
  FakeClock,
  forEachBackend,
  openRatchet,
  until,
  untilStatus,
} from "./helpers.js";

const noop = defineTask({ name: "noop", run: () => "done" });

forEachBackend(() => {
  describe("abort (spec §7)", () => {
    it("§7.1 abort of a pending task makes it aborted at once and cascades to its dependents", async () => {
      const r = await openRatchet([noop]);
      const [a, b, c] = await r.enqueueMany([
        { task: noop },
        { task: noop, needs: [-1] },
        { task: noop, needs: [-1] },
      ]);
      expect(await r.abort(a!)).toEqual({ state: "aborted" });
      const ra = (await r.get(a!))!;
      expect(ra).toMatchObject({ status: "terminal", outcome: "aborted" });
      for (const id of [b!, c!]) {
        const rec = (await r.get(id))!;
        expect(rec.outcome).toBe("upstream_failed");
        expect(rec.error!.message).toBe(`upstream task ${a} failed`);
        expect(rec.endedAt).toBe(ra.endedAt);
      }
      expect((await drain(r)).ran).toBe(0);
    });

    it("§7.1 abort of a waiting task (timer or needs) makes it aborted at once", async () => {
      const r = await openRatchet([noop]);
      const timer = await r.enqueue(noop, null, { delayMs: 60_000 });
      const blocked = await r.enqueue(noop, null, { needs: [timer] });
      expect(await r.abort(blocked)).toEqual({ state: "aborted" });
      expect((await r.get(blocked))!.outcome).toBe("aborted");
      expect((await r.get(timer))!.status).toBe("waiting");
      expect(await r.abort(timer)).toEqual({ state: "aborted" });
      expect((await r.get(timer))!.outcome).toBe("aborted");
      // The durable mark is logged first, then the outcome it led to (spec §12.5).
      expect((await r.store.events(timer)).map((e) => e.kind)).toEqual(["abort_requested", "aborted"]);
    });

    it("§7.2 abort of a running task in this process marks it; the code's ctx.signal aborts and the outcome is aborted, never retried", async () => {
      const started = deferred();
      let reason: unknown;
      let writeAfter: unknown;
      const t = defineTask({
        name: "long",
        retry: { maxAttempts: 5 },
        async run(ctx: TaskContext) {
          started.resolve();
          reason = await aborted(ctx.signal);
          try {
            await ctx.step("after", () => 1);
          } catch (e) {
            writeAfter = e;
          }
          throw new Error("stopped");
        },
      });
      const r = await openRatchet([t]);
      const id = await r.enqueue(t);
      const ticking = r.tick({ budgetMs: 3_600_000 });
      await started.promise;
      expect(await r.abort(id)).toEqual({ state: "marked" });
      const rec = await r.waitFor(id, { timeoutMs: 10_000 });
      await ticking;
      expect(rec.outcome).toBe("aborted");
      expect(rec.attempts).toBe(1);
      expect((reason as RatchetError).code).toBe("RATCHET_ABORTED");
      expect((writeAfter as RatchetError).code).toMatch(/RATCHET_(LEASE_LOST|ABORTED)/);
      expect(await r.store.steps(id)).toEqual([]);
      const kinds = (await r.store.events(id)).map((e) => e.kind);
      expect(kinds).toEqual(["abort_requested", "aborted"]);
    });

    it("§7.2 / §4.5 a mark written elsewhere is seen at the holder's next fenced write: the write is refused, the signal aborts, the task ends aborted", async () => {
      let r!: Awaited<ReturnType<typeof openRatchet>>;
      const seen: { code?: string; signal?: boolean } = {};
      const t = defineTask({
        name: "remote",
        retry: { maxAttempts: 5 },
        async run(ctx: TaskContext) {
          // Another process marks the task (straight through the store, so no in-process signal).
          expect((await r.store.abort(ctx.taskId)).state).toBe("marked");
          expect(ctx.signal.aborted).toBe(false);
          try {
            await ctx.step("s", () => 1);
          } catch (e) {
            seen.code = (e as RatchetError).code;
          }
          seen.signal = ctx.signal.aborted;
          return "finished anyway";
        },
      });
      r = await openRatchet([t]);
      const id = await r.enqueue(t);
      await drain(r);
      expect(seen).toEqual({ code: "RATCHET_ABORTED", signal: true });
      const rec = (await r.get(id))!;
      expect(rec.outcome).toBe("aborted");
      expect(rec.result).toBeNull();
      expect(await r.store.steps(id)).toEqual([]);
    });

    it("§7.2 a marked attempt that throws, returns or reaches its deadline settles aborted, never retried", async () => {
      let r!: Awaited<ReturnType<typeof openRatchet>>;
      const mk = (name: string, maxMs: number, end: (ctx: TaskContext) => Promise<unknown>) =>
        defineTask({
          name,
          maxMs,
          retry: { maxAttempts: 5 },
          async run(ctx: TaskContext) {
            await r.store.abort(ctx.taskId);
            return end(ctx);
          },
        });
      const throws = mk("throws", 60_000, async () => {
        throw new Error("after mark");
      });
      const returns = mk("returns", 60_000, async () => "value");
      const hangs = mk("hangs", 30, (ctx) => aborted(ctx.signal));
      r = await openRatchet([throws, returns, hangs]);
      const ids = [await r.enqueue(throws), await r.enqueue(returns), await r.enqueue(hangs)];
      await drain(r);
      for (const id of ids) {
        const rec = await r.waitFor(id, { timeoutMs: 10_000 });
        expect(rec.outcome, rec.name).toBe("aborted");
        expect(rec.attempts).toBe(1);
      }
    });

    it("§7.2 if the holder died, the next claim finds the mark and settles aborted without running code", async () => {
      const clock = new FakeClock();
      let runs = 0;
      const t = defineTask({
        name: "orphan",
        maxMs: 1_000,
        run() {
          runs++;
          return "ran";
        },
      });
      const r = await openRatchet([t], { clock });
      const id = await r.enqueue(t);
      await r.store.claim(claimReq({ workerId: "dead", names: ["orphan"] }));
      expect(await r.abort(id)).toEqual({ state: "marked" });
      expect(await r.abort(id)).toEqual({ state: "marked" });
      clock.advance(1_000 + 10_000);
      await drain(r);
      expect(runs).toBe(0);
      expect((await r.get(id))!.outcome).toBe("aborted");
    });

    it("§7.3 abort of a terminal task changes nothing and returns its state; unknown ids throw RATCHET_NOT_FOUND", async () => {
      const r = await openRatchet([noop]);
      const id = await r.enqueue(noop);
      await drain(r);
      const before = (await r.get(id))!;
      expect(await r.abort(id)).toEqual({ state: "terminal", outcome: "completed" });
      expect(await r.abort(id)).toEqual({ state: "terminal", outcome: "completed" });
      expect(await r.get(id)).toEqual(before);
      const ab = await r.enqueue(noop, null, { delayMs: 10_000 });
      await r.abort(ab);
      expect(await r.abort(ab)).toEqual({ state: "terminal", outcome: "aborted" });
      await expectCode(() => r.abort(424_242), "RATCHET_NOT_FOUND");
      await expectCode(() => r.abort(0), "RATCHET_INVALID_INPUT");
    });

    it("§7.2 a worker sees an in-process abort at once (long-lived worker)", async () => {
      const started = deferred();
      const t = defineTask({
        name: "spin",
        async run(ctx: TaskContext) {
          started.resolve();
          await aborted(ctx.signal);
          return "saw abort";
        },
      });
      const r = await openRatchet([t], { pollIntervalMs: 10 });
      const id = await r.enqueue(t);
      await r.start({ concurrency: 2 });
      await started.promise;
      await untilStatus(r, id, "running");
      expect(await r.abort(id)).toEqual({ state: "marked" });
      const rec = await r.waitFor(id, { timeoutMs: 10_000 });
      expect(rec.outcome).toBe("aborted");
      await until(async () => (await r.stats())[0]?.byStatus.running === undefined, "no task running");
    });
  });
});
