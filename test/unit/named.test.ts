import { createRequire } from "node:module";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { bind, compile } from "../../src/store/postgres/named.js";

describe("named parameters on PostgreSQL", () => {
  const c = compile("SELECT :ids::bigint[], :names::text[], :xs::float8[], :n, :ids", "s");

  it("binds each name once, in order of first use, and refuses a missing one", () => {
    expect(c.params).toEqual(["ids", "names", "xs", "n"]);
    expect(c.text).toBe("SELECT $1::bigint[], $2::text[], $3::float8[], $4, $1");
    expect(() => bind(c, { ids: [1], names: [], xs: [] })).toThrow(/missing parameter :n/);
  });

  it("binds an array of integers as one array literal; anything else as pg would", () => {
    const names = ["a", 'b"c'];
    const xs = [1.5, 2];
    const mixed = [1, null];
    expect(bind(c, { ids: [3, -1, 9_007_199_254_740_991], names, xs, n: 7 })).toEqual([
      "{3,-1,9007199254740991}",
      '{"a","b\\"c"}',
      xs,
      7,
    ]);
    expect(bind(c, { ids: [], names: mixed, xs: [2 ** 53], n: undefined })).toEqual([
      "{}",
      mixed,
      [2 ** 53],
      null,
    ]);
  });

  it("binds an array of texts and NULLs as the very literal pg would send for it", () => {
    // pg's own serialisation of a parameter, the reference.
    const { prepareValue } = createRequire(import.meta.url)("pg/lib/utils.js") as {
      prepareValue: (v: unknown) => unknown;
    };
    const text = fc.oneof(
      fc.string({ unit: fc.constantFrom("a", '"', "\\", ",", "{", "}", " ", "é", "😀", "NULL", "\n") }),
      fc.string({ unit: "grapheme" }),
      fc.constant(null),
    );
    fc.assert(
      fc.property(fc.array(text, { maxLength: 20 }), fc.string(), (names, first) => {
        const v = [first, ...names];
        expect(bind(c, { ids: [], names: v, xs: [], n: 1 })[1]).toBe(prepareValue(v));
      }),
      { numRuns: 2_000 },
    );
  });
});
