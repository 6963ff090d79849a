/** The outcome of a settled attempt (spec §20.23). */
import { describe, expect, it } from "vitest";
import { outcomeOf } from "../../src/dispatch/runner/settle.js";

describe("settlement (spec §20.23)", () => {
  it("§20.23 a forced settlement fails, whatever the close-out or exit code", () => {
    expect(outcomeOf("stalled", { outcome: "succeeded", summary: null, data: null }, 0)).toBe(false);
  });

  it("§20.23 otherwise the close-out decides, and without one exit code 0 succeeds", () => {
    expect(outcomeOf(null, { outcome: "failed", summary: null, data: null }, 0)).toBe(false);
    expect(outcomeOf(null, { outcome: "succeeded", summary: null, data: null }, 1)).toBe(true);
    expect(outcomeOf(null, null, 0)).toBe(true);
    expect(outcomeOf(null, null, 3)).toBe(false);
    expect(outcomeOf(null, null, null)).toBe(false);
  });
});
