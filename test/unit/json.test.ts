import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  fromJson,
  MAX_ERROR_MESSAGE,
  MAX_ERROR_STACK,
  MAX_JSON_DEPTH,
  toStorableJson,
  toStoredError,
} from "../../src/core/json.js";
import { RatchetError } from "../../src/errors.js";

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof RatchetError) return e.code;
    throw e;
  }
  return undefined;
}

function messageOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error("expected a throw");
}

const roundTrip = (v: unknown) => fromJson(toStorableJson(v, "value"));

function nested(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

/** An array with a hole at `hole` (a sparse array, without a literal the linter rejects). */
function sparse(values: unknown[], hole: number): unknown[] {
  const a = [...values];
  delete a[hole];
  return a;
}

/** True when -0 occurs anywhere in v. */
function hasNegativeZero(v: unknown): boolean {
  if (Object.is(v, -0)) return true;
  if (v !== null && typeof v === "object") return Object.values(v).some(hasNegativeZero);
  return false;
}

describe("storable JSON (spec §4.6)", () => {
  it("§4.6 plain values round-trip exactly", () => {
    const values: unknown[] = [
      null,
      true,
      false,
      0,
      1.5,
      -42,
      Number.MAX_SAFE_INTEGER,
      Number.MIN_VALUE,
      "",
      "héllo ✓ \u0000 \n",
      [],
      {},
      [1, "a", null, [true, { x: [] }]],
      { a: 1, b: { c: [1, 2, { d: null }] }, "": "empty key" },
    ];
    for (const v of values) expect(roundTrip(v)).toEqual(v);
  });

  it("§4.6 a top-level undefined is stored as null", () => {
    expect(toStorableJson(undefined, "value")).toBe("null");
    expect(roundTrip(undefined)).toBeNull();
  });

  it("§4.6 an object with a null prototype is a plain object and is accepted", () => {
    const o = Object.create(null) as Record<string, unknown>;
    o.a = 1;
    expect(roundTrip(o)).toEqual({ a: 1 });
  });

  it.each([
    ["NaN", Number.NaN],
    ["Infinity", Number.POSITIVE_INFINITY],
    ["-Infinity", Number.NEGATIVE_INFINITY],
    ["BigInt", 10n],
    ["Date", new Date(0)],
    ["Map", new Map([[1, 2]])],
    ["Set", new Set([1])],
    ["function", () => 1],
    ["symbol", Symbol("s")],
    [
      "class instance",
      new (class Point {
        x = 1;
      })(),
    ],
    ["RegExp", /x/],
    ["boxed number", Object(1)],
    ["undefined member", { a: undefined }],
    ["undefined in an array", [1, undefined]],
    ["sparse array", sparse([1, 2, 3], 1)],
    ["nested NaN", { a: [{ b: Number.NaN }] }],
    ["symbol key", { [Symbol("k")]: 1 }],
  ])("§4.6 rejects %s with RATCHET_INVALID_JSON", (_what, v) => {
    expect(codeOf(() => toStorableJson(v, "input"))).toBe("RATCHET_INVALID_JSON");
  });

  it("§4.6 the error names the path of the bad value", () => {
    expect(messageOf(() => toStorableJson({ a: [1, { b: Number.NaN }] }, "input"))).toContain(".a[1].b");
    expect(messageOf(() => toStorableJson({ when: new Date(0) }, "input"))).toContain(".when");
    expect(messageOf(() => toStorableJson(sparse([0, 1, 2, 3], 2), "input"))).toContain("[2]");
  });

  it("§4.6 rejects cycles, but accepts the same object twice in non-cyclic positions", () => {
    const a: Record<string, unknown> = { x: 1 };
    a.self = a;
    expect(codeOf(() => toStorableJson(a, "input"))).toBe("RATCHET_INVALID_JSON");
    const arr: unknown[] = [];
    arr.push([arr]);
    expect(codeOf(() => toStorableJson(arr, "input"))).toBe("RATCHET_INVALID_JSON");
    const shared = { s: 1 };
    expect(roundTrip({ a: shared, b: shared, c: [shared, shared] })).toEqual({
      a: { s: 1 },
      b: { s: 1 },
      c: [{ s: 1 }, { s: 1 }],
    });
  });

  it("§4.6 nesting is bounded at 64 levels", () => {
    expect(MAX_JSON_DEPTH).toBe(64);
    expect(roundTrip(nested(64))).toEqual(nested(64));
    expect(codeOf(() => toStorableJson(nested(65), "input"))).toBe("RATCHET_INVALID_JSON");
    let deepObject: unknown = null;
    for (let i = 0; i < 65; i++) deepObject = { k: deepObject };
    expect(codeOf(() => toStorableJson(deepObject, "input"))).toBe("RATCHET_INVALID_JSON");
    // Far deeper than the bound: still a typed error, not a stack overflow.
    expect(codeOf(() => toStorableJson(nested(100_000), "input"))).toBe("RATCHET_INVALID_JSON");
  });

  it("§4.6 the size bound throws RATCHET_PAYLOAD_TOO_LARGE and counts UTF-8 bytes", () => {
    expect(codeOf(() => toStorableJson("x".repeat(100), "input", 101))).toBe("RATCHET_PAYLOAD_TOO_LARGE");
    expect(toStorableJson("x".repeat(98), "input", 100)).toBe(JSON.stringify("x".repeat(98)));
    // "é" is 2 bytes in UTF-8: 50 of them plus quotes = 102 bytes.
    expect(codeOf(() => toStorableJson("é".repeat(50), "input", 101))).toBe("RATCHET_PAYLOAD_TOO_LARGE");
    expect(toStorableJson("é".repeat(49), "input", 100)).toBe(JSON.stringify("é".repeat(49)));
    expect(codeOf(() => toStorableJson("x".repeat(2 * 1024 * 1024), "input"))).toBe(
      "RATCHET_PAYLOAD_TOO_LARGE",
    );
  });

  it("§4.6 an own __proto__ key round-trips as data and pollutes no prototype", () => {
    const v = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}') as Record<string, unknown>;
    expect(Object.keys(v)).toContain("__proto__");
    const back = roundTrip(v) as Record<string, unknown>;
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(Object.hasOwn(back, "__proto__")).toBe(true);
    expect(Object.getOwnPropertyDescriptor(back, "__proto__")?.value).toEqual({ polluted: true });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect((back as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it("§4.6 a getter or setter is refused without being run, on a flat object as in a nested one", () => {
    let reads = 0;
    const getter = () => {
      reads++;
      return 1;
    };
    const flat = Object.defineProperty({ a: 1 }, "b", { get: getter, enumerable: true });
    const setterOnly = Object.defineProperty({ a: 1 }, "b", { set: () => {}, enumerable: true });
    const nested = { a: { c: 2, d: Object.defineProperty({}, "e", { get: getter, enumerable: true }) } };
    expect(messageOf(() => toStorableJson(flat, "input"))).toContain(".b is a getter or setter");
    expect(messageOf(() => toStorableJson(setterOnly, "input"))).toContain(".b is a getter or setter");
    expect(messageOf(() => toStorableJson(nested, "input"))).toContain(".a.d.e is a getter or setter");
    expect(reads).toBe(0);
  });

  it("§4.6 a flat object is held to every rule of a nested one, naming the key", () => {
    // Objects of primitives take a shorter check than the walk (isFlatPlain); what it does not
    // accept goes to the walk, which names what is wrong.
    const cases: [unknown, string][] = [
      [{ a: 1, b: -0 }, ".b is -0"],
      [{ a: Number.NaN }, ".a is NaN"],
      [{ a: 1, b: undefined }, ".b is undefined"],
      [{ a: () => 1 }, ".a is a function"],
      [{ a: 1n }, ".a is a bigint"],
      [{ a: Symbol("s") }, ".a is a symbol"],
      [{ a: 1, [Symbol("k")]: 2 }, "has symbol keys"],
      [Object.assign(Object.create({ inherited: 1 }), { a: 1 }), "not a plain object"],
    ];
    for (const [v, message] of cases) expect(messageOf(() => toStorableJson(v, "input"))).toContain(message);
    const bare = Object.create(null) as Record<string, unknown>;
    bare.s = "x";
    bare.n = null;
    expect(toStorableJson(bare, "input")).toBe('{"s":"x","n":null}');
    expect(toStorableJson({ a: 1.5, b: 'q"', c: true, d: null }, "input")).toBe(
      '{"a":1.5,"b":"q\\"","c":true,"d":null}',
    );
  });

  it("§4.6 -0 is never silently converted: it is either rejected or read back as -0", () => {
    // JSON.stringify(-0) is "0", so a stored -0 would read back as +0 unless the
    // store rejects it. Either is allowed by §4.6; silent conversion is not.
    let text: string | undefined;
    try {
      text = toStorableJson({ x: -0 }, "input");
    } catch (e) {
      expect((e as RatchetError).code).toBe("RATCHET_INVALID_JSON");
      return;
    }
    const back = fromJson<{ x: number }>(text);
    expect(Object.is(back.x, -0)).toBe(true);
  });

  it("§4.6 property: every fc.jsonValue() (without -0, covered above) round-trips exactly", () => {
    fc.assert(
      fc.property(
        fc.jsonValue().filter((v) => !hasNegativeZero(v)),
        (v) => {
          expect(roundTrip(v)).toStrictEqual(v);
        },
      ),
      { numRuns: 1_000 },
    );
  });

  it("§4.6 property: whatever is accepted reads back deep-equal (accept or reject, never convert)", () => {
    const anything = fc.anything({
      withBigInt: true,
      withBoxedValues: true,
      withDate: true,
      withMap: true,
      withSet: true,
      withNullPrototype: true,
      withSparseArray: true,
      withTypedArray: true,
      withObjectString: true,
    });
    fc.assert(
      fc.property(
        anything.filter((v) => !hasNegativeZero(v)),
        (v) => {
          let text: string;
          try {
            text = toStorableJson(v, "value");
          } catch (e) {
            expect(["RATCHET_INVALID_JSON", "RATCHET_PAYLOAD_TOO_LARGE"]).toContain((e as RatchetError).code);
            return;
          }
          expect(fromJson(text)).toEqual(v === undefined ? null : v);
        },
      ),
      { numRuns: 1_000 },
    );
  });
});

describe("storable JSON of a primitive (spec §4.6, the fast path of task results)", () => {
  it("§4.6 a string is refused exactly when its JSON is over the byte limit, escapes and multi-byte characters included", () => {
    const chars = fc.constantFrom("a", "€", "😀", "\u0001", '"', "\\", "\n", "\ud800");
    fc.assert(
      fc.property(fc.array(chars, { maxLength: 60 }), fc.integer({ min: 2, max: 300 }), (parts, max) => {
        const s = parts.join("");
        const bytes = Buffer.byteLength(JSON.stringify(s), "utf8");
        if (bytes > max)
          expect(codeOf(() => toStorableJson(s, "value", max))).toBe("RATCHET_PAYLOAD_TOO_LARGE");
        else expect(toStorableJson(s, "value", max)).toBe(JSON.stringify(s));
      }),
      { numRuns: 2_000 },
    );
  });

  it("§4.6 null, booleans and undefined need no name; a refused value is named by the lazy `what`", () => {
    let asked = 0;
    const what = () => {
      asked++;
      return 'result of task "t"';
    };
    expect([null, true, false, undefined, "x", 7, { a: 1 }].map((v) => toStorableJson(v, what))).toEqual([
      "null",
      "true",
      "false",
      "null",
      '"x"',
      "7",
      '{"a":1}',
    ]);
    const before = asked;
    expect(messageOf(() => toStorableJson(Number.NaN, what))).toContain('result of task "t"');
    expect(asked).toBe(before + 1);
    expect(codeOf(() => toStorableJson("é".repeat(20), what, 30))).toBe("RATCHET_PAYLOAD_TOO_LARGE");
  });
});

describe("stored errors (spec §4.7)", () => {
  it("§4.7 an error is stored as {name, message, stack, code}", () => {
    const e = Object.assign(new TypeError("bad"), { code: "E_BAD" });
    const s = toStoredError(e);
    expect(s.name).toBe("TypeError");
    expect(s.message).toBe("bad");
    expect(s.stack).toContain("bad");
    expect(s.code).toBe("E_BAD");
  });

  it("§4.7 the message is capped at 4,000 characters and the stack at 16,000", () => {
    expect(MAX_ERROR_MESSAGE).toBe(4_000);
    expect(MAX_ERROR_STACK).toBe(16_000);
    const e = new Error("m".repeat(50_000));
    const s = toStoredError(e);
    expect(s.message.length).toBeLessThanOrEqual(4_000);
    expect(s.message.startsWith("mmmm")).toBe(true);
    expect(s.stack!.length).toBeLessThanOrEqual(16_000);
    const thrownString = toStoredError("s".repeat(50_000));
    expect(thrownString.message.length).toBeLessThanOrEqual(4_000);
  });

  it("§4.7 non-Error throws are stored too (strings, objects, cycles)", () => {
    expect(toStoredError("plain")).toEqual({ name: "NonError", message: "plain" });
    expect(toStoredError({ a: 1 })).toEqual({ name: "NonError", message: '{"a":1}' });
    const c: Record<string, unknown> = {};
    c.c = c;
    expect(toStoredError(c).name).toBe("NonError");
    expect(toStoredError(undefined).name).toBe("NonError");
  });
});
