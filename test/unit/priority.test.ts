import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  AGING_STEP_MS,
  effectivePriority,
  MAX_PRIORITY,
  MIN_PRIORITY,
  orderKey,
} from "../../src/core/priority.js";

const T0 = Date.UTC(2026, 0, 1);

/**
 * The precise relation between the two orders.
 *
 * Let S = AGING_STEP_MS and define the real-valued e'(t) = p + (now − c)/S =
 * (now − orderKey(t))/S. Because p is an integer, effective(t) = p + ⌊(now − c)/S⌋
 * = ⌊e'(t)⌋ whenever now ≥ c. So, for any now at or after both creation times:
 *   (1) orderKey(a) < orderKey(b)  ⇒  e'(a) > e'(b)  ⇒  effective(a) ≥ effective(b)
 *       (⌊·⌋ is monotone; it may turn ">" into "=", never into "<"), and
 *   (2) effective(a) > effective(b)  ⇒  orderKey(a) < orderKey(b)  (strictly),
 *       since ⌊e'(a)⌋ > ⌊e'(b)⌋ forces e'(a) > e'(b).
 * Claiming in ascending orderKey therefore never takes a task of strictly lower
 * effective priority before one of higher effective priority. Inside one step
 * (equal effective priority) the key is the finer order; among equal priorities
 * it is plain FIFO.
 * Caveat on the spec's "ties fall to the older task": no now-independent key can
 * promise that for *different* priorities. Example: a (created 0, p 0) and
 * b (created 5 min, p 1). At now = 5 min b leads (1 vs 0), at now = 7 min they
 * tie (1 vs 1) and a static key must still put b first. So ties go to the older
 * task only among equal priorities, which is what the FIFO test checks.
 */
const arbTask = fc.record({
  created: fc.integer({ min: T0, max: T0 + 30 * 86_400_000 }),
  priority: fc.integer({ min: MIN_PRIORITY, max: MAX_PRIORITY }),
});

describe("priority with aging (spec §3.5)", () => {
  it("§3.5 orderKey(a) < orderKey(b) implies effective(a) ≥ effective(b) at any now after both creations", () => {
    fc.assert(
      fc.property(arbTask, arbTask, fc.integer({ min: 0, max: 60 * 86_400_000 }), (a, b, later) => {
        const now = Math.max(a.created, b.created) + later;
        if (orderKey(a.created, a.priority) < orderKey(b.created, b.priority)) {
          expect(effectivePriority(a.created, a.priority, now)).toBeGreaterThanOrEqual(
            effectivePriority(b.created, b.priority, now),
          );
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it("§3.5 effective(a) > effective(b) implies orderKey(a) < orderKey(b), strictly", () => {
    fc.assert(
      fc.property(arbTask, arbTask, fc.integer({ min: 0, max: 60 * 86_400_000 }), (a, b, later) => {
        const now = Math.max(a.created, b.created) + later;
        if (effectivePriority(a.created, a.priority, now) > effectivePriority(b.created, b.priority, now)) {
          expect(orderKey(a.created, a.priority)).toBeLessThan(orderKey(b.created, b.priority));
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it("§3.5 orderKey is created − priority × 6 min, independent of now", () => {
    expect(AGING_STEP_MS).toBe(360_000);
    expect(orderKey(T0, 0)).toBe(T0);
    expect(orderKey(T0, 3)).toBe(T0 - 3 * 360_000);
    expect(orderKey(T0, -2)).toBe(T0 + 2 * 360_000);
  });

  it("§3.5 effective priority is priority + ⌊age / 6 min⌋", () => {
    expect(effectivePriority(T0, 5, T0)).toBe(5);
    expect(effectivePriority(T0, 5, T0 + AGING_STEP_MS - 1)).toBe(5);
    expect(effectivePriority(T0, 5, T0 + AGING_STEP_MS)).toBe(6);
    expect(effectivePriority(T0, -1, T0 + 10 * AGING_STEP_MS + 5)).toBe(9);
  });

  it("§3.5 a task one hour old beats a fresh priority +9 task", () => {
    const old = { created: T0, priority: 0 };
    const now = T0 + 3_600_000;
    const fresh = { created: now, priority: 9 };
    expect(effectivePriority(old.created, old.priority, now)).toBe(10);
    expect(effectivePriority(fresh.created, fresh.priority, now)).toBe(9);
    expect(orderKey(old.created, old.priority)).toBeLessThan(orderKey(fresh.created, fresh.priority));
  });

  it("§3.5 with equal priority, the older task comes first (FIFO)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: MIN_PRIORITY, max: MAX_PRIORITY }),
        fc.integer({ min: T0, max: T0 + 86_400_000 }),
        fc.integer({ min: 1, max: 86_400_000 }),
        (p, c, gap) => {
          expect(orderKey(c, p)).toBeLessThan(orderKey(c + gap, p));
        },
      ),
    );
  });
});
