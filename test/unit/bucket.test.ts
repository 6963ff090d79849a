/** Token-bucket arithmetic (spec §14.10–§14.11), checked over random arrival sequences. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type BucketConfig,
  type BucketState,
  decide,
  fullBucket,
  level,
  pause,
} from "../../src/core/bucket.js";

/**
 * Simulates a claimer on one bucket: at each arrival time the head of the line
 * is admitted or parked until the time `decide` names (when it retries).
 * Returns the (time, cost) of every admission.
 */
function simulate(cfg: BucketConfig, costs: readonly number[], gaps: readonly number[]) {
  let state: BucketState = fullBucket(cfg, 0);
  const starts: { at: number; cost: number }[] = [];
  const retry: { at: number; cost: number }[] = [];
  let now = 0;
  const queue = costs.map((cost, i) => {
    now += gaps[i % gaps.length]!;
    return { at: now, cost };
  });
  let guard = 0;
  while ((queue.length || retry.length) && guard++ < 100_000) {
    retry.sort((a, b) => a.at - b.at);
    const next = retry[0] && (!queue[0] || retry[0].at <= queue[0].at) ? retry.shift()! : queue.shift()!;
    const d = decide([{ state, cfg, cost: next.cost }], next.at);
    state = d.states[0]!;
    if (d.ok) starts.push({ at: next.at, cost: next.cost });
    else {
      expect(d.until).toBeGreaterThan(next.at);
      retry.push({ at: d.until, cost: next.cost });
    }
  }
  return starts;
}

describe("token buckets (spec §14.10)", () => {
  it("§14.10 over any window w the admitted cost is at most burst + limit·w/period + max(0, c_max − burst)", () => {
    fc.assert(
      fc.property(
        fc.record({
          limit: fc.integer({ min: 1, max: 50 }),
          periodMs: fc.integer({ min: 100, max: 10_000 }),
          burstFactor: fc.double({ min: 0.2, max: 2, noNaN: true }),
        }),
        fc.array(fc.integer({ min: 0, max: 80 }), { minLength: 1, maxLength: 60 }),
        fc.array(fc.integer({ min: 0, max: 500 }), { minLength: 1, maxLength: 10 }),
        ({ limit, periodMs, burstFactor }, costs, gaps) => {
          const cfg = { limit, periodMs, burst: Math.max(1, limit * burstFactor) };
          const starts = simulate(cfg, costs, gaps);
          expect(starts.length).toBe(costs.length); // nobody starves
          const over = Math.max(0, Math.max(...costs) - cfg.burst);
          for (let i = 0; i < starts.length; i++) {
            let sum = 0;
            for (let j = i; j < starts.length; j++) {
              sum += starts[j]!.cost;
              const w = starts[j]!.at - starts[i]!.at;
              expect(sum).toBeLessThanOrEqual(cfg.burst + (limit * w) / periodMs + over + 1e-6);
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("§14.10 a parked start is told the earliest time the bucket admits it, and tasks in line are spaced by cost", () => {
    const cfg = { limit: 10, periodMs: 1_000, burst: 10 };
    let s: BucketState = { ...fullBucket(cfg, 0), tokens: 0 };
    const a = decide([{ state: s, cfg, cost: 5 }], 0);
    expect(a).toMatchObject({ ok: false, until: 500 });
    s = a.states[0]!;
    const b = decide([{ state: s, cfg, cost: 5 }], 0);
    expect(b).toMatchObject({ ok: false, until: 1_000 }); // behind a, by a's refill time
    expect(decide([{ state: s, cfg, cost: 5 }], 500).ok).toBe(true);
  });

  it("§14.11 a pause admits nothing before its end and leaves the bucket empty at it", () => {
    const cfg = { limit: 10, periodMs: 1_000, burst: 10 };
    const s = pause(fullBucket(cfg, 0), cfg, 0, 5_000);
    const d = decide([{ state: s, cfg, cost: 1 }], 4_999);
    expect(d).toMatchObject({ ok: false, paused: true, until: 5_100 });
    expect(level(s, cfg, 5_000)).toBe(0);
    expect(decide([{ state: s, cfg, cost: 1 }], 5_100).ok).toBe(true);
  });
});
