import { describe, expect, it } from "vitest";
import { canEverFit, DEFAULT_TICK_RESERVE_MS, fitsRemaining } from "../../src/core/tick.js";

describe("tick fitting (spec §8.3–§8.4)", () => {
  it("§8.3 the default reserve is 3 s", () => {
    expect(DEFAULT_TICK_RESERVE_MS).toBe(3_000);
  });

  it("§8.3 a task fits when maxMs + reserve is at most the remaining budget (exactly equal fits)", () => {
    expect(fitsRemaining(7_000, 10_000, 3_000)).toBe("fits");
    expect(fitsRemaining(6_999, 10_000, 3_000)).toBe("fits");
    expect(fitsRemaining(7_001, 10_000, 3_000)).toBe("skip");
    expect(fitsRemaining(1, 0, 0)).toBe("skip");
    expect(fitsRemaining(0, 0, 0)).toBe("fits");
    expect(fitsRemaining(1_000, 3_999, 3_000)).toBe("skip");
  });

  it("§8.4 canEverFit judges only against the largest tick budget (exactly equal fits; none configured always fits)", () => {
    expect(canEverFit(57_000, 60_000, 3_000)).toBe(true);
    expect(canEverFit(57_001, 60_000, 3_000)).toBe(false);
    expect(canEverFit(2 ** 31 - 1, undefined, 3_000)).toBe(true);
  });
});
