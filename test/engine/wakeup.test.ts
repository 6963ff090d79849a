import { afterEach, describe, expect, it, vi } from "vitest";
import { Wakeup } from "../../src/engine/wakeup.js";

// The worker loop's wake-up (spec §8.7, §13.6): freed slots, settlements and enqueues notify it.
describe("Wakeup", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("wakes every waiter at a notify, once", async () => {
    const w = new Wakeup();
    const a = w.wait(60_000);
    const b = w.wait(60_000);
    w.notify();
    expect(await Promise.all([a, b])).toEqual([true, true]);
    // The notify was consumed by the waiters: the next wait is not woken by it.
    vi.useFakeTimers();
    const c = w.wait(10);
    vi.advanceTimersByTime(10);
    expect(await c).toBe(false);
  });

  it("is level-triggered: a notify with nobody waiting wakes the next wait at once, and only that one", async () => {
    const w = new Wakeup();
    w.notify();
    w.notify();
    expect(await w.wait(60_000)).toBe(true);
    vi.useFakeTimers();
    const next = w.wait(5);
    vi.advanceTimersByTime(5);
    expect(await next).toBe(false);
  });

  it("take() reports and consumes a notify without waiting", () => {
    const w = new Wakeup();
    expect(w.take()).toBe(false);
    w.notify();
    expect(w.take()).toBe(true);
    expect(w.take()).toBe(false);
  });

  it("a wait that timed out is not woken later, and leaves the other waiters in place", async () => {
    vi.useFakeTimers();
    const w = new Wakeup();
    const short = w.wait(10);
    const long = w.wait(1_000);
    vi.advanceTimersByTime(10);
    expect(await short).toBe(false);
    w.notify();
    expect(await long).toBe(true);
    // The notify went to the one waiter left; nothing is pending for the next wait.
    const after = w.wait(10);
    vi.advanceTimersByTime(10);
    expect(await after).toBe(false);
  });

  it("a wait begun by a woken waiter waits for the next notify", async () => {
    const w = new Wakeup();
    let late: Promise<boolean> | undefined;
    const first = w.wait(60_000).then((v) => {
      late = w.wait(60_000);
      return v;
    });
    w.notify();
    expect(await first).toBe(true);
    let settled = false;
    void late!.then(() => {
      settled = true;
    });
    await Promise.resolve();
    expect(settled).toBe(false);
    w.notify();
    expect(await late!).toBe(true);
  });
});
