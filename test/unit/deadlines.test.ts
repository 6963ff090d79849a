/** The invocation deadlines behind maxMs (spec §4.1): one timer per duration, entries bounded. */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Deadlines } from "../../src/engine/deadlines.js";

describe("deadlines (spec §4.1)", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });
  const make = () => new Deadlines(() => Date.now());

  it("§4.1 a deadline fires once, at its time and not before", () => {
    const d = make();
    let fired = 0;
    d.arm(100, () => fired++);
    vi.advanceTimersByTime(99);
    expect(fired).toBe(0);
    vi.advanceTimersByTime(1);
    expect(fired).toBe(1);
    vi.advanceTimersByTime(10_000);
    expect(fired).toBe(1);
    expect(d.held).toBe(0);
  });

  it("§4.1 a cancelled deadline never fires; cancelling a fired one changes nothing", () => {
    const d = make();
    const fired: string[] = [];
    const a = d.arm(100, () => fired.push("a"));
    const b = d.arm(100, () => fired.push("b"));
    a.cancel();
    vi.advanceTimersByTime(100);
    expect(fired).toEqual(["b"]);
    b.cancel();
    a.cancel();
    const c = d.arm(100, () => fired.push("c"));
    vi.advanceTimersByTime(100);
    expect(fired).toEqual(["b", "c"]);
    c.cancel();
    expect(d.held).toBe(0);
  });

  it("§4.1 deadlines of one duration fire in arming order, each at its own time; other durations keep theirs", () => {
    const d = make();
    const fired: [string, number][] = [];
    const t0 = Date.now();
    const at = (name: string) => () => fired.push([name, Date.now() - t0]);
    d.arm(100, at("first"));
    vi.advanceTimersByTime(30);
    d.arm(100, at("second"));
    d.arm(50, at("short"));
    d.arm(1_000, at("long"));
    vi.advanceTimersByTime(2_000);
    expect(fired).toEqual([
      ["short", 80],
      ["first", 100],
      ["second", 130],
      ["long", 1_030],
    ]);
  });

  it("§4.1 a callback may arm a deadline of the same duration, or cancel one due at the same time", () => {
    const d = make();
    const fired: string[] = [];
    let later: { cancel(): void } | undefined;
    d.arm(100, () => {
      fired.push("a");
      later?.cancel();
      d.arm(100, () => fired.push("again"));
    });
    later = d.arm(100, () => fired.push("cancelled by a"));
    vi.advanceTimersByTime(100);
    expect(fired).toEqual(["a"]);
    vi.advanceTimersByTime(100);
    expect(fired).toEqual(["a", "again"]);
  });

  it("§4.1 a callback that throws does not stop the deadlines after it", () => {
    const d = make();
    const fired: string[] = [];
    d.arm(100, () => {
      throw new Error("boom");
    });
    d.arm(100, () => fired.push("same time"));
    d.arm(150, () => fired.push("later"));
    // Fake timers surface the callback's error here, as a real timer would to the process.
    expect(() => vi.advanceTimersByTime(100)).toThrow("boom");
    vi.advanceTimersByTime(100);
    expect(fired).toEqual(["same time", "later"]);
  });

  it("§4.1 entries stay bounded by the live deadlines, even behind a long one that never ends", () => {
    const d = make();
    const long = d.arm(3_600_000, () => {});
    const live = Array.from({ length: 16 }, () => d.arm(3_600_000, () => {}));
    let most = 0;
    for (let i = 0; i < 100_000; i++) {
      d.arm(3_600_000, () => {}).cancel();
      // A replaced invocation: the oldest of the 16 ends, a new one starts.
      live.shift()!.cancel();
      live.push(d.arm(3_600_000, () => {}));
      most = Math.max(most, d.held);
    }
    // Live: 17, and 18 for a moment inside each step; without the trimming this would be ~300,000.
    expect(most).toBeLessThanOrEqual(2 * 18 + 64 + 2);
    for (const x of live) x.cancel();
    expect(d.held).toBeLessThanOrEqual(2 * 1 + 64);
    // The last live one gone, the lane is emptied at once.
    long.cancel();
    expect(d.held).toBe(0);
  });
});
