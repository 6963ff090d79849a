import { describe, expect, it } from "vitest";
import {
  type BreakerConfig,
  type BreakerState,
  CLOSED,
  checkBreakerConfig,
  decideBreaker,
} from "../../src/core/breaker.js";
import { ValidationError } from "../../src/errors.js";
import { FakeClock } from "../../src/testing/fake-clock.js";

const CFG: BreakerConfig = { failures: 3, windowMs: 1_000, coolDownMs: 500, probeMs: 2_000 };

/** Applies a decision's state, as the store does. */
function apply(s: BreakerState, ev: Parameters<typeof decideBreaker>[1], now: number) {
  const d = decideBreaker(s, ev, now, CFG);
  const next = d.kind === "refuse" ? s : (d.next ?? s);
  return { d, next };
}

describe("breaker transitions (pure, fake clock)", () => {
  it("§18.6 closed → open after N failures within the window; a stale window starts again", () => {
    const clock = new FakeClock();
    let s = CLOSED;
    for (let i = 0; i < 2; i++) s = apply(s, { kind: "failure", probe: false }, clock.now()).next;
    clock.advance(1_000);
    s = apply(s, { kind: "failure", probe: false }, clock.now()).next;
    expect(s).toMatchObject({ state: "closed", failures: 1 });
    for (let i = 0; i < 2; i++) s = apply(s, { kind: "failure", probe: false }, clock.advance(10)).next;
    expect(s).toMatchObject({ state: "open", openedAt: clock.now() });
  });

  it("§18.6 open refuses until the cool-down, then admits one probe (half_open); others refused", () => {
    const clock = new FakeClock();
    let s: BreakerState = { ...CLOSED, state: "open", openedAt: clock.now() };
    expect(decideBreaker(s, { kind: "request" }, clock.advance(499), CFG)).toEqual({
      kind: "refuse",
      until: s.openedAt + 500,
    });
    const r = apply(s, { kind: "request" }, clock.advance(1));
    expect(r.d).toMatchObject({ kind: "admit", probe: true });
    s = r.next;
    expect(s.state).toBe("half_open");
    expect(decideBreaker(s, { kind: "request" }, clock.advance(1), CFG).kind).toBe("refuse");
    // A straggler that is not the probe moves nothing.
    expect(decideBreaker(s, { kind: "failure", probe: false }, clock.now(), CFG)).toEqual({
      kind: "record",
      next: null,
    });
    expect(decideBreaker(s, { kind: "success", probe: false }, clock.now(), CFG)).toEqual({
      kind: "record",
      next: null,
    });
    expect(apply(s, { kind: "success", probe: true }, clock.now()).next).toEqual(CLOSED);
    expect(apply(s, { kind: "failure", probe: true }, clock.now()).next).toMatchObject({
      state: "open",
      openedAt: clock.now(),
    });
  });

  it("§18.6 a probe that never reports lapses after probeMs: the next request probes", () => {
    const clock = new FakeClock();
    const s: BreakerState = { ...CLOSED, state: "half_open", openedAt: 0, probeUntil: clock.now() + 2_000 };
    expect(decideBreaker(s, { kind: "request" }, clock.advance(1_999), CFG).kind).toBe("refuse");
    expect(decideBreaker(s, { kind: "request" }, clock.advance(1), CFG)).toMatchObject({
      kind: "admit",
      probe: true,
    });
  });

  it("§18.6 a success in closed resets the count; bad configs are refused", () => {
    const s: BreakerState = { ...CLOSED, failures: 2, windowStart: 5 };
    expect(decideBreaker(s, { kind: "success", probe: false }, 6, CFG)).toEqual({
      kind: "record",
      next: CLOSED,
    });
    expect(decideBreaker(CLOSED, { kind: "success", probe: false }, 6, CFG)).toEqual({
      kind: "record",
      next: null,
    });
    expect(() => checkBreakerConfig({ failures: 0 })).toThrow(ValidationError);
    expect(() => checkBreakerConfig({ coolDownMs: 1.5 })).toThrow(ValidationError);
    expect(checkBreakerConfig(undefined).failures).toBe(5);
  });
});
