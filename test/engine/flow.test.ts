/** Throttle and debounce on enqueue (spec §14.6–§14.7), on both backends with a fake clock. */
import { describe, expect, it } from "vitest";
import { defineTask, MAX_RETRY_AFTER_MS, RateLimitedError } from "../../src/index.js";
import { drain, expectCode, FakeClock, forEachBackend, openRatchet } from "./helpers.js";

const T0 = 1_000_000;

forEachBackend(() => {
  describe("throttle and debounce (spec §14.6–§14.7)", () => {
    it("§14.6 throttle: one task per key and period per queue; later calls in the period return it and write nothing", async () => {
      const clock = new FakeClock(T0);
      const t = defineTask({ name: "t", run: (_c, n: number) => n });
      const r = await openRatchet([t], { clock });
      const throttle = { key: "user-7", periodMs: 1_000 };
      const a = await r.enqueue(t, 1, { throttle });
      expect(await r.enqueue(t, 2, { throttle })).toBe(a);
      clock.advance(999);
      expect(await r.enqueue(t, 3, { throttle })).toBe(a);
      const other = await r.enqueue(t, 4, { throttle, queue: "other" });
      expect(other).not.toBe(a);
      clock.advance(1);
      const b = await r.enqueue(t, 5, { throttle });
      expect(b).not.toBe(a);
      const [c, d] = await r.enqueueMany([
        { task: t, input: 6, throttle: { key: "batch", periodMs: 1_000 } },
        { task: t, input: 7, throttle: { key: "batch", periodMs: 1_000 } },
      ]);
      expect(d).toBe(c);
      expect((await r.get(a))!.input).toBe(1);
      expect((await r.store.list({ name: "t", limit: 100 })).length).toBe(4);
    });

    it("§14.7 debounce: calls before the start replace the input and push the start back, never past maxDelayMs", async () => {
      const clock = new FakeClock(T0);
      const seen: number[] = [];
      const t = defineTask({
        name: "t",
        run: (_c, n: number) => {
          seen.push(n);
          return n;
        },
      });
      const r = await openRatchet([t], { clock });
      const debounce = { key: "doc-1", delayMs: 1_000, maxDelayMs: 2_500 };
      const id = await r.enqueue(t, 1, { debounce });
      expect((await r.get(id))!).toMatchObject({ status: "waiting", wakeAt: T0 + 1_000 });
      clock.set(T0 + 500);
      expect(await r.enqueue(t, 2, { debounce })).toBe(id);
      expect((await r.get(id))!).toMatchObject({ wakeAt: T0 + 1_500, input: 2 });
      clock.set(T0 + 1_400);
      await drain(r);
      expect(seen).toEqual([]);
      expect(await r.enqueue(t, 3, { debounce })).toBe(id);
      expect((await r.get(id))!.wakeAt).toBe(T0 + 2_400);
      clock.set(T0 + 2_300);
      expect(await r.enqueue(t, 4, { debounce })).toBe(id);
      expect((await r.get(id))!.wakeAt).toBe(T0 + 2_500); // capped: first call + maxDelayMs
      clock.set(T0 + 2_500);
      await drain(r);
      expect(seen).toEqual([4]);
      // Once the task has started, the next call starts a new window and a new task.
      const next = await r.enqueue(t, 5, { debounce });
      expect(next).not.toBe(id);
      expect((await r.get(next))!.wakeAt).toBe(T0 + 3_500);
    });

    it("§14.8 RateLimitedError runs the task again after retryAfterMs without using up an attempt", async () => {
      const clock = new FakeClock(T0);
      let calls = 0;
      const t = defineTask({
        name: "t",
        retry: { maxAttempts: 1 },
        run: () => {
          if (++calls <= 2) throw new RateLimitedError({ retryAfterMs: 5_000, message: "429 from provider" });
          return "done";
        },
      });
      const r = await openRatchet([t], { clock });
      const id = await r.enqueue(t);
      await drain(r);
      expect((await r.get(id))!).toMatchObject({ status: "waiting", wakeAt: T0 + 5_000, attempts: 0 });
      clock.advance(4_999);
      await drain(r);
      expect(calls).toBe(1);
      clock.advance(1);
      await drain(r);
      expect(calls).toBe(2);
      clock.advance(5_000);
      await drain(r);
      // Two 429s and a success with maxAttempts 1: the pauses cost no attempt.
      expect((await r.get(id))!).toMatchObject({ outcome: "completed", result: "done", attempts: 1 });
      expect((await r.store.events(id)).map((e) => e.kind)).toEqual(["rate_limited", "rate_limited"]);
      expect(new RateLimitedError({ retryAfterMs: 10 ** 12 }).retryAfterMs).toBe(MAX_RETRY_AFTER_MS);
      expect(new RateLimitedError({ retryAfterMs: -5 }).retryAfterMs).toBe(0);
    });

    it("§14.6 / §14.7 bad flow options are refused and write nothing", async () => {
      const t = defineTask({ name: "t", run: () => 1 });
      const r = await openRatchet([t]);
      const bad = [
        { throttle: { key: "k", periodMs: 0 } },
        { throttle: { key: "", periodMs: 10 } },
        { debounce: { key: "k", delayMs: 0 } },
        { debounce: { key: "k", delayMs: 100, maxDelayMs: 50 } },
        { debounce: { key: "k", delayMs: 100 }, delayMs: 5 },
        { throttle: { key: "k", periodMs: 10 }, debounce: { key: "k", delayMs: 10 } },
      ];
      for (const opts of bad)
        await expectCode(() => r.enqueue(t, null, opts as never), "RATCHET_INVALID_INPUT");
      expect(await r.store.list({ limit: 10 })).toEqual([]);
    });
  });
});
