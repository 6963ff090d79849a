/** Close-outs as sessions write them (spec §20.17). */
import { describe, expect, it } from "vitest";
import { MAX_CLOSEOUT_BYTES, parseCloseout } from "../../src/dispatch/workers/adapter.js";

describe("close-outs (spec §20.17)", () => {
  it("§20.17 a well-formed close-out is read as written", () => {
    expect(parseCloseout('{"outcome":"failed","summary":"tests fail","data":{"n":2}}')).toEqual({
      outcome: "failed",
      summary: "tests fail",
      data: { n: 2 },
    });
  });

  it("§20.17 a malformed close-out reads as a failed one that says why", () => {
    for (const [text, why] of [
      ["not json", "not JSON"],
      ["[1]", "outcome"],
      ['"x"', "not an object"],
      ['{"outcome":"maybe"}', "outcome"],
      [`{"outcome":"succeeded","summary":"${"x".repeat(MAX_CLOSEOUT_BYTES)}"}`, "larger than"],
    ] as const) {
      const c = parseCloseout(text);
      expect(c.outcome).toBe("failed");
      expect(c.summary).toContain(why);
    }
  });
});
