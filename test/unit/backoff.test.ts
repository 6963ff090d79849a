import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  backoffCeilingMs,
  backoffMs,
  DEFAULT_RETRY,
  decideFailure,
  type RetryPolicy,
} from "../../src/core/backoff.js";
import { seededRandom } from "../../src/testing/fake-clock.js";

const P: RetryPolicy = { ...DEFAULT_RETRY };

describe("backoff (spec §5)", () => {
  it("§5.1 the default policy is 4 attempts, 5 s base, factor 4, 15 min cap, 1 s floor", () => {
    expect(DEFAULT_RETRY).toEqual({
      maxAttempts: 4,
      baseMs: 5_000,
      factor: 4,
      capMs: 900_000,
      floorMs: 1_000,
    });
  });

  it("§5.2 the ceiling after attempt n is min(cap, base·factor^(n−1)): 5 s, 20 s, 80 s, 320 s, then the 900 s cap", () => {
    const seq = [1, 2, 3, 4, 5, 6, 10, 100, 10_000].map((n) => backoffCeilingMs(n, P));
    expect(seq).toEqual([5_000, 20_000, 80_000, 320_000, 900_000, 900_000, 900_000, 900_000, 900_000]);
  });

  it("§5.2 full jitter stays within [floor, ceiling) over many seeded draws, and uses the whole range", () => {
    const random = seededRandom(42);
    for (let n = 1; n <= 8; n++) {
      const ceiling = backoffCeilingMs(n, P);
      let lo = Number.POSITIVE_INFINITY;
      let hi = 0;
      for (let i = 0; i < 2_000; i++) {
        const d = backoffMs(n, P, random);
        expect(Number.isInteger(d)).toBe(true);
        expect(d).toBeGreaterThanOrEqual(P.floorMs);
        expect(d).toBeLessThan(ceiling);
        lo = Math.min(lo, d);
        hi = Math.max(hi, d);
      }
      // Full jitter: draws reach near the floor and near the ceiling.
      expect(lo).toBeLessThan(P.floorMs + ceiling * 0.02);
      expect(hi).toBeGreaterThan(ceiling * 0.98);
    }
  });

  it("§5.2 the delay is exactly max(floorMs, ⌊ceiling × U⌋) for the injected U", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (n, u) => {
          const want = Math.max(P.floorMs, Math.floor(Math.min(P.capMs, P.baseMs * P.factor ** (n - 1)) * u));
          expect(backoffMs(n, P, () => u)).toBe(want);
        },
      ),
    );
  });

  it("§5.2 jitter spreads 64 simultaneous failures: the busiest second holds far fewer than 64 retries", () => {
    const random = seededRandom(7);
    const buckets = new Map<number, number>();
    for (let i = 0; i < 64; i++) {
      const d = backoffMs(3, P, random); // ceiling 80 s
      const s = Math.floor(d / 1000);
      buckets.set(s, (buckets.get(s) ?? 0) + 1);
    }
    const peak = Math.max(...buckets.values());
    expect(peak).toBeLessThanOrEqual(8);
    expect(buckets.size).toBeGreaterThan(30);
  });

  it("§5.2 attempt n < maxAttempts retries, n ≥ maxAttempts fails with outcome failed", () => {
    const random = seededRandom(1);
    for (const kind of ["error", "timeout"] as const) {
      for (let n = 1; n < P.maxAttempts; n++) {
        const d = decideFailure(n, kind, P, random);
        expect(d.kind).toBe("retry");
        if (d.kind === "retry") {
          expect(d.delayMs).toBeGreaterThanOrEqual(P.floorMs);
          expect(d.delayMs).toBeLessThan(backoffCeilingMs(n, P));
        }
      }
      expect(decideFailure(P.maxAttempts, kind, P, random)).toEqual({ kind: "fail", outcome: "failed" });
      expect(decideFailure(P.maxAttempts + 3, kind, P, random)).toEqual({ kind: "fail", outcome: "failed" });
    }
  });

  it("§5.2 at most maxAttempts claims happen: counting attempts from 1, the last one is maxAttempts", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 30 }), fc.integer({ min: 0, max: 1000 }), (maxAttempts, seed) => {
        const policy = { ...P, maxAttempts };
        const random = seededRandom(seed);
        let claims = 0;
        for (let attempt = 1; ; attempt++) {
          claims++;
          if (decideFailure(attempt, "error", policy, random).kind === "fail") break;
        }
        expect(claims).toBe(maxAttempts);
      }),
    );
  });

  it("§5.3 a non-retryable error fails at once, even on the first attempt", () => {
    expect(decideFailure(1, "non_retryable", P, seededRandom(1))).toEqual({
      kind: "fail",
      outcome: "failed",
    });
  });

  it("§5.5 an unstorable result is faulted (never retried), on any attempt", () => {
    for (const n of [1, 2, P.maxAttempts, P.maxAttempts + 1]) {
      expect(decideFailure(n, "unstorable_result", P, seededRandom(1))).toEqual({
        kind: "fail",
        outcome: "faulted",
      });
    }
  });

  it("§5.2 a huge attempt number does not overflow past the cap", () => {
    expect(backoffCeilingMs(1e6, P)).toBe(P.capMs);
    expect(backoffMs(1e6, P, () => 0.5)).toBe(P.capMs / 2);
  });
});
