/** The pure pull-request rules (spec §22.3, §22.5–§22.7): checks summary, changes and facts, next check, waits. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  decidePrWait,
  diffPull,
  type KnownPull,
  nextCheckDelayMs,
  type PullObservation,
  summarizeChecks,
} from "../../src/core/dispatch/pulls.js";

const NEVER: KnownPull = { state: null, draft: null, headSha: null, mergeable: null, checks: null };
const OPEN: PullObservation = {
  state: "open",
  draft: false,
  headSha: "a",
  mergeable: null,
  checks: "pending",
};

describe("pull-request rules", () => {
  it("§22.3 one failing check is failure; unfinished is pending; nothing is none", () => {
    expect(summarizeChecks([], [])).toBe("none");
    expect(summarizeChecks(["success"], [{ status: "completed", conclusion: "neutral" }])).toBe("success");
    expect(summarizeChecks(["pending"], [{ status: "completed", conclusion: "success" }])).toBe("pending");
    expect(summarizeChecks(["pending"], [{ status: "completed", conclusion: "cancelled" }])).toBe("failure");
    expect(summarizeChecks([], [{ status: "queued", conclusion: null }])).toBe("pending");
  });

  it("§22.6 the first observation emits pr.state and pr.checks; the same again emits nothing", () => {
    const first = diffPull(NEVER, OPEN);
    expect(first.kind === "changed" && first.facts.map((f) => f.type)).toEqual(["pr.state", "pr.checks"]);
    const known: KnownPull = { ...OPEN };
    expect(diffPull(known, OPEN)).toEqual({ kind: "unchanged" });
  });

  it("§22.6 merging emits pr.state and pr.merged; closing emits pr.closed; checks alone emit pr.checks", () => {
    const known: KnownPull = { ...OPEN };
    const merged = diffPull(known, { ...OPEN, state: "merged" });
    expect(merged.kind === "changed" && merged.facts.map((f) => f.type)).toEqual(["pr.state", "pr.merged"]);
    const closed = diffPull(known, { ...OPEN, state: "closed" });
    expect(closed.kind === "changed" && closed.facts.map((f) => f.type)).toEqual(["pr.state", "pr.closed"]);
    const checks = diffPull(known, { ...OPEN, checks: "success" });
    expect(checks.kind === "changed" && checks.facts).toEqual([
      { type: "pr.checks", data: { from: "pending", to: "success", headSha: "a" } },
    ]);
  });

  it("§22.5 the next check: the interval when healthy; backoff within bounds; never before the forge's wish", () => {
    const p = { intervalMs: 10_000, maxBackoffMs: 600_000 };
    expect(nextCheckDelayMs(0, p, () => 0.99)).toBe(10_000);
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200 }),
        fc.double({ min: 0, max: 0.999999, noNaN: true }),
        fc.option(fc.integer({ min: 0, max: 3_600_000 })),
        (n, r, wish) => {
          const d = nextCheckDelayMs(n, p, () => r, wish);
          expect(d).toBeGreaterThanOrEqual(Math.max(p.intervalMs, wish ?? 0));
          expect(d).toBeLessThanOrEqual(Math.max(p.maxBackoffMs, wish ?? 0));
        },
      ),
    );
  });

  it("§22.7 waits: no pull waits; merged releases; closed unmerged closes; pr-closed accepts both ends", () => {
    const known = (o: Partial<KnownPull>): KnownPull => ({ ...OPEN, ...o });
    expect(decidePrWait({ for: "pr-merged" }, null)).toEqual({ kind: "wait", why: "no-pull" });
    expect(decidePrWait({ for: "pr-merged" }, known({}))).toEqual({ kind: "wait", why: "not-yet" });
    expect(decidePrWait({ for: "pr-merged" }, known({ state: "merged" }))).toEqual({ kind: "release" });
    expect(decidePrWait({ for: "pr-merged" }, known({ state: "closed" })).kind).toBe("close");
    expect(decidePrWait({ for: "pr-checks-success" }, known({ checks: "success" })).kind).toBe("release");
    expect(decidePrWait({ for: "pr-checks-success" }, known({ checks: "failure" })).kind).toBe("wait");
    expect(
      decidePrWait({ for: "pr-checks-success" }, known({ state: "closed", checks: "success" })).kind,
    ).toBe("close");
    expect(decidePrWait({ for: "pr-closed" }, known({ state: "closed" })).kind).toBe("release");
    expect(decidePrWait({ for: "pr-closed" }, known({ state: "merged" })).kind).toBe("release");
    expect(decidePrWait({ for: "pr-closed" }, known({ state: null })).kind).toBe("wait");
  });
});
