/** The outbox's pure decisions (spec §21.5, §21.9, §21.10, §21.16), without a database. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decisionNotices } from "../../src/core/dispatch/facts.js";
import {
  DEFAULT_DELIVERY_POLICY,
  decideDeliveryFailure,
  ENVELOPE_BYTES,
  isFilterPattern,
  pickSendMove,
  planBatch,
  takesType,
} from "../../src/core/outbox.js";
import { seededRandom } from "../../src/testing/fake-clock.js";

const f = (seq: number, type = "a.b", size = 100) => ({ seq: String(seq), type, size });
const bytes = (x: { size: number }) => x.size;

describe("outbox decisions", () => {
  it("§21.5 a filter takes exact types, prefixes with .* and everything with *", () => {
    expect(takesType(["attempt.moved"], "attempt.moved")).toBe(true);
    expect(takesType(["attempt.moved"], "attempt.moved.x")).toBe(false);
    expect(takesType(["notice.*"], "notice.stalled")).toBe(true);
    expect(takesType(["notice.*"], "noticex.stalled")).toBe(false);
    expect(takesType(["notice.*"], "notice")).toBe(false);
    expect(takesType(["*"], "pr.state")).toBe(true);
    expect(takesType([], "pr.state")).toBe(false);
    for (const ok of ["*", "a.b", "notice.*", "pr.*"]) expect(isFilterPattern(ok)).toBe(true);
    for (const bad of ["", "A.b", "a.*.b", "**", "a.b*", "x".repeat(101)])
      expect(isFilterPattern(bad)).toBe(false);
  });

  it("§21.9 a batch is cut at maxFacts", () => {
    const w = [1, 2, 3, 4, 5].map((n) => f(n));
    const p = planBatch(w, ["*"], { maxFacts: 2, maxBytes: 1 << 20 }, bytes);
    expect(p).toEqual({ kind: "send", facts: [w[0], w[1]], to: "2", bytes: ENVELOPE_BYTES + 200 });
  });

  it("§21.9 a batch is cut where the next fact would pass maxBytes, envelope included", () => {
    const w = [f(1, "a.b", 300), f(2, "a.b", 300), f(3, "a.b", 300)];
    const p = planBatch(w, ["*"], { maxFacts: 100, maxBytes: ENVELOPE_BYTES + 600 }, bytes);
    expect(p.kind === "send" && p.facts.map((x) => x.seq)).toEqual(["1", "2"]);
    const q = planBatch(w, ["*"], { maxFacts: 100, maxBytes: ENVELOPE_BYTES + 599 }, bytes);
    expect(q.kind === "send" && q.facts.map((x) => x.seq)).toEqual(["1"]);
  });

  it("§21.9 a fact larger than maxBytes alone goes alone, never waits for ever", () => {
    const w = [f(1, "a.b", 5_000), f(2)];
    const p = planBatch(w, ["*"], { maxFacts: 100, maxBytes: 1_024 }, bytes);
    expect(p).toMatchObject({ kind: "send", to: "1", bytes: ENVELOPE_BYTES + 5_000 });
    expect(p.kind === "send" && p.facts).toHaveLength(1);
  });

  it("§21.5 facts the filter does not take are passed over: inside a batch's range, or as a whole window", () => {
    const w = [f(1, "x.y"), f(2), f(3, "x.y"), f(4)];
    const p = planBatch(w, ["a.b"], { maxFacts: 1, maxBytes: 1 << 20 }, bytes);
    expect(p).toMatchObject({ kind: "send", to: "2" });
    expect(p.kind === "send" && p.facts.map((x) => x.seq)).toEqual(["2"]);
    expect(planBatch([f(7, "x.y"), f(8, "x.y")], ["a.b"], { maxFacts: 5, maxBytes: 1 << 20 }, bytes)).toEqual(
      {
        kind: "pass",
        to: "8",
      },
    );
    expect(planBatch([], ["*"], { maxFacts: 5, maxBytes: 1 << 20 }, bytes)).toEqual({ kind: "idle" });
  });

  it("§21.9 property: a batch is a non-empty prefix of the taken facts, in order, within both bounds unless it is one fact", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ t: fc.constantFrom("a.b", "x.y"), size: fc.integer({ min: 1, max: 3_000 }) }), {
          maxLength: 40,
        }),
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 1_024, max: 8_000 }),
        (xs, maxFacts, maxBytes) => {
          const w = xs.map((x, i) => f(i + 1, x.t, x.size));
          const p = planBatch(w, ["a.b"], { maxFacts, maxBytes }, bytes);
          const taken = w.filter((x) => x.type === "a.b");
          if (w.length === 0) return p.kind === "idle";
          if (taken.length === 0) return p.kind === "pass" && p.to === w[w.length - 1]!.seq;
          if (p.kind !== "send") return false;
          const prefix = taken.slice(0, p.facts.length);
          const within = p.facts.length <= maxFacts && (p.facts.length === 1 || p.bytes <= maxBytes);
          const next = taken[p.facts.length];
          const maximal = next === undefined || p.facts.length === maxFacts || p.bytes + next.size > maxBytes;
          return (
            p.facts.every((x, i) => x === prefix[i]) && within && maximal && p.to === p.facts.at(-1)!.seq
          );
        },
      ),
    );
  });

  it("§21.9 a failure waits a full-jitter delay within [floor, ceiling], deterministic for a seeded random", () => {
    const p = DEFAULT_DELIVERY_POLICY;
    for (let n = 1; n <= 12; n++) {
      const d = decideDeliveryFailure(
        n,
        0,
        1,
        { retryable: true, retryAfterMs: undefined },
        p,
        seededRandom(n),
      );
      if (d.kind !== "retry") throw new Error("expected a retry");
      expect(d.delayMs).toBeGreaterThanOrEqual(p.retry.floorMs);
      expect(d.delayMs).toBeLessThanOrEqual(Math.min(p.retry.capMs, p.retry.baseMs * 2 ** (n - 1)));
      expect(d).toEqual(
        decideDeliveryFailure(n, 0, 1, { retryable: true, retryAfterMs: undefined }, p, seededRandom(n)),
      );
    }
  });

  it("§21.9 a receiver's Retry-After is honoured, clamped to [floor, maxRetryAfterMs]", () => {
    const p = DEFAULT_DELIVERY_POLICY;
    const r = seededRandom(1);
    expect(decideDeliveryFailure(1, null, 0, { retryable: true, retryAfterMs: 30_000 }, p, r)).toEqual({
      kind: "retry",
      delayMs: 30_000,
    });
    expect(decideDeliveryFailure(1, null, 0, { retryable: true, retryAfterMs: 0 }, p, r)).toEqual({
      kind: "retry",
      delayMs: p.retry.floorMs,
    });
    expect(decideDeliveryFailure(1, null, 0, { retryable: true, retryAfterMs: 9e12 }, p, r)).toEqual({
      kind: "retry",
      delayMs: p.maxRetryAfterMs,
    });
  });

  it("§21.10 dead-letter: at once when not retryable, after maxAttempts failures, or after maxAgeMs of retrying", () => {
    const p = { ...DEFAULT_DELIVERY_POLICY, maxAttempts: 3, maxAgeMs: 10_000 };
    const r = seededRandom(2);
    const ok = { retryable: true, retryAfterMs: undefined };
    expect(decideDeliveryFailure(1, null, 0, { retryable: false, retryAfterMs: undefined }, p, r)).toEqual({
      kind: "dead",
      reason: "not-retryable",
    });
    expect(decideDeliveryFailure(2, 0, 100, ok, p, r).kind).toBe("retry");
    expect(decideDeliveryFailure(3, 0, 100, ok, p, r)).toEqual({ kind: "dead", reason: "attempts" });
    expect(decideDeliveryFailure(2, 0, 9_999, ok, p, r).kind).toBe("retry");
    expect(decideDeliveryFailure(2, 0, 10_000, ok, p, r)).toEqual({ kind: "dead", reason: "age" });
  });

  it("§21.10 a dead destination is not tried; a retrying one waits for its next try", () => {
    expect(pickSendMove({ state: "dead", nextAt: null }, 5)).toEqual({ kind: "dead" });
    expect(pickSendMove({ state: "retrying", nextAt: 10 }, 9)).toEqual({ kind: "wait", until: 10 });
    expect(pickSendMove({ state: "retrying", nextAt: 10 }, 10)).toEqual({ kind: "send" });
    expect(pickSendMove({ state: "ok", nextAt: null }, 10)).toEqual({ kind: "send" });
  });

  it("§21.16 notices come from decisions: the owner waited for, a usage limit, a stall; nothing else", () => {
    const a = {
      id: "7",
      itemId: "3",
      pipeline: "p",
      phase: "build",
      worker: "tmux",
      mode: "attended" as const,
    };
    const kinds = (d: Parameters<typeof decisionNotices>[1]) => decisionNotices(a, d).map((n) => n.type);
    expect(
      kinds({ action: { kind: "sleep-if-idle", waitingSince: 1 }, rule: "bound:waiting-for-owner" }),
    ).toEqual(["notice.attention"]);
    expect(kinds({ action: { kind: "bind-only" }, rule: "bound:waiting-for-owner" })).toEqual([]);
    expect(kinds({ action: { kind: "sleep-unattended", since: 1 }, rule: "bound:unattended" })).toEqual([
      "notice.attention",
    ]);
    expect(
      kinds({ action: { kind: "close", cause: "usage-limit", resetsAt: 9 }, rule: "bound:usage-limit" }),
    ).toEqual(["notice.usage-limit"]);
    expect(kinds({ action: { kind: "close", cause: "stalled" }, rule: "bound:stall" })).toEqual([
      "notice.stalled",
    ]);
    expect(kinds({ action: { kind: "close", cause: "turn-ended" }, rule: "bound:turn-ended" })).toEqual([]);
    const [n] = decisionNotices(a, {
      action: { kind: "close", cause: "usage-limit", resetsAt: 9 },
      rule: "bound:usage-limit",
    });
    expect(n).toMatchObject({ subject: "attempt:7", data: { attempt: "7", item: "3", resetsAt: 9 } });
  });
});
