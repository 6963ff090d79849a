import { describe, expect, it } from "vitest";
import { backoffCeilingMs, DEFAULT_RETRY } from "../../src/core/backoff.js";
import type { TaskContext } from "../../src/engine/context.js";
import { defineTask, NonRetryableError } from "../../src/index.js";
import {
  claimReq,
  drain,
  expectCode,
  FakeClock,
  forEachBackend,
  openRatchet,
  seededRandom,
} from "./helpers.js";

forEachBackend(() => {
  describe("retries (spec §5)", () => {
    it("§5.1 the retry policy comes from the definition, with the documented defaults, and bad values are RATCHET_CONFIG", async () => {
      const d = defineTask({ name: "d", run: () => null });
      expect(d.retry).toEqual({ maxAttempts: 4, baseMs: 5_000, factor: 4, capMs: 900_000, floorMs: 1_000 });
      const custom = defineTask({ name: "c", retry: { maxAttempts: 7, baseMs: 10 }, run: () => null });
      expect(custom.retry).toEqual({ ...DEFAULT_RETRY, maxAttempts: 7, baseMs: 10 });
      for (const retry of [
        { maxAttempts: 0 },
        { baseMs: -1 },
        { factor: 0.5 },
        { capMs: 1.5 },
        { floorMs: Number.NaN },
      ]) {
        await expectCode(() => defineTask({ name: "bad", retry, run: () => null }), "RATCHET_CONFIG");
      }
    });

    it("§5.3 a NonRetryableError ends the task failed at once", async () => {
      let runs = 0;
      const t = defineTask({
        name: "nr",
        retry: { maxAttempts: 10 },
        run() {
          runs++;
          throw new NonRetryableError("card declined");
        },
      });
      const r = await openRatchet([t], { clock: new FakeClock() });
      const id = await r.enqueue(t);
      await drain(r);
      const rec = (await r.get(id))!;
      expect(rec.outcome).toBe("failed");
      expect(rec.attempts).toBe(1);
      expect(rec.error).toMatchObject({
        name: "NonRetryableError",
        message: "card declined",
        code: "RATCHET_NON_RETRYABLE",
      });
      expect(runs).toBe(1);
    });

    it("§5.2 / §11.1 a failing task is claimed maxAttempts times, waiting the seeded full-jitter backoff between attempts, then fails", async () => {
      const clock = new FakeClock();
      const attempts: number[] = [];
      const t = defineTask({
        name: "flaky",
        run(ctx: TaskContext) {
          attempts.push(ctx.attempt);
          throw new Error(`boom ${ctx.attempt}`);
        },
      });
      const r = await openRatchet([t], { clock, random: seededRandom(99) });
      const id = await r.enqueue(t);
      // The same seeded source, replayed, predicts every delay exactly.
      const replay = seededRandom(99);
      const p = t.retry;
      for (let n = 1; n < p.maxAttempts; n++) {
        await drain(r);
        const rec = (await r.get(id))!;
        expect(rec.status).toBe("waiting");
        expect(rec.attempts).toBe(n);
        expect(rec.error!.message).toBe(`boom ${n}`);
        const delay = rec.wakeAt! - clock.now();
        expect(delay).toBe(Math.max(p.floorMs, Math.floor(backoffCeilingMs(n, p) * replay())));
        expect(delay).toBeGreaterThanOrEqual(p.floorMs);
        expect(delay).toBeLessThan(backoffCeilingMs(n, p));
        // Not due a millisecond early.
        clock.advance(delay - 1);
        expect((await drain(r)).ran).toBe(0);
        clock.advance(1);
      }
      await drain(r);
      const rec = (await r.get(id))!;
      expect(rec.outcome).toBe("failed");
      expect(rec.attempts).toBe(p.maxAttempts);
      expect(attempts).toEqual([1, 2, 3, 4]);
      clock.advance(10 * 3_600_000);
      expect((await drain(r)).ran).toBe(0);
      const kinds = (await r.store.events(id)).map((e) => e.kind);
      expect(kinds).toEqual(["attempt_failed", "attempt_failed", "attempt_failed", "failed"]);
    });

    it("§5.2 a task that fails then succeeds completes on the next attempt", async () => {
      const clock = new FakeClock();
      const t = defineTask({
        name: "second-time",
        retry: { maxAttempts: 2 },
        run(ctx: TaskContext) {
          if (ctx.attempt === 1) throw new Error("transient");
          return ctx.attempt;
        },
      });
      const r = await openRatchet([t], { clock });
      const id = await r.enqueue(t);
      await drain(r);
      clock.advance(backoffCeilingMs(1, t.retry));
      await drain(r);
      expect((await r.get(id))!).toMatchObject({ outcome: "completed", result: 2, attempts: 2 });
    });

    it("§5.4 a claim whose holder died counts as an attempt: after maxAttempts dead claims the task fails without running again", async () => {
      const clock = new FakeClock();
      let runs = 0;
      const t = defineTask({
        name: "poison",
        maxMs: 1_000,
        retry: { maxAttempts: 3 },
        run() {
          runs++;
          return "ran";
        },
      });
      const r = await openRatchet([t], { clock, leaseGraceMs: 1_000 });
      const id = await r.enqueue(t);
      // Three workers claim the task and die (their leases expire).
      for (let i = 0; i < 3; i++) {
        const got = await r.store.claim(
          claimReq({ workerId: `dead-${i}`, names: ["poison"], leaseGraceMs: 1_000 }),
        );
        expect(got.map((x) => x.id)).toEqual([id]);
        clock.advance(2_000);
      }
      expect((await r.get(id))!.attempts).toBe(3);
      await drain(r);
      const rec = (await r.get(id))!;
      expect(runs).toBe(0);
      expect(rec.attempts).toBeLessThanOrEqual(3);
      expect(rec.status).toBe("terminal");
      expect(rec.outcome).toBe("failed");
    });
  });
});
