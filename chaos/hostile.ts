/**
 * Scenario 8 (hostile inputs), the parts test/chaos/hostile.test.ts drives:
 * the hostile values, a spec-derived oracle of what must be refused, the
 * "did anything get written" fingerprint of a store, one attempt per kind
 * of name that says how the engine decided and what it reads back, and the
 * listener task a hostile signal payload is delivered to (§12.7).
 *
 * The oracle is written from the spec's text (§2.1, §4.6, §12.7), not from
 * the code, so a rule the code drops is caught.
 */
import fc from "fast-check";
import { RatchetError } from "../src/errors.js";
import { defineTask, type Ratchet } from "../src/index.js";
import { PostgresStore } from "../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../src/store/sqlite/sqlite-store.js";
import type { Store } from "../src/store/store.js";

/** Codes that mean "bad input, nothing written" (src/errors.ts; RATCHET_CONFIG for a bad definition). */
export const VALIDATION_CODES = new Set([
  "RATCHET_INVALID_INPUT",
  "RATCHET_INVALID_JSON",
  "RATCHET_PAYLOAD_TOO_LARGE",
  "RATCHET_UNKNOWN_TASK",
  "RATCHET_CONFIG",
]);

export type Decision = { kind: "rejected"; code: string } | { kind: "accepted"; back: unknown };

/** Runs `fn`; a RatchetError with a validation code is a rejection, anything else is thrown on. */
export async function decide(what: string, fn: () => Promise<unknown>): Promise<Decision> {
  try {
    return { kind: "accepted", back: await fn() };
  } catch (err) {
    if (err instanceof RatchetError && VALIDATION_CODES.has(err.code))
      return { kind: "rejected", code: err.code };
    const e = err as Error;
    throw new Error(
      `${what}: not a validation error: ${e?.name} ${(e as RatchetError)?.code}: ${e?.message}`,
      {
        cause: err,
      },
    );
  }
}

// ------------------------------------------------------------------ payloads

export const NESTING_LIMIT = 64;

/** `n` arrays nested around null: [[…[null]…]]. */
export function nest(n: number): unknown {
  let v: unknown = null;
  for (let i = 0; i < n; i++) v = [v];
  return v;
}

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
}

/** A getter that answers 1 on its first read and NaN after: a check that reads it, then a write that reads it again, stores null. */
function changingGetter(): unknown {
  let reads = 0;
  return {
    get x() {
      return reads++ === 0 ? 1 : Number.NaN;
    },
  };
}

/** A Proxy every trap of which throws: reading it at all must end in a typed refusal, not the caller's exception. */
function throwingProxy(): unknown {
  const boom = () => {
    throw new Error("hostile trap");
  };
  return new Proxy(
    {},
    { get: boom, ownKeys: boom, getPrototypeOf: boom, getOwnPropertyDescriptor: boom, has: boom },
  );
}

function revokedProxy(): unknown {
  const p = Proxy.revocable({ a: 1 }, {});
  p.revoke();
  return p.proxy;
}

function cycle(): unknown {
  const a: Record<string, unknown> = { a: 1 };
  a.self = a;
  return a;
}

/** The hand-picked hostile payloads of issue 7 (a label each, for failure messages). */
export function hostilePayloads(limit: number): [string, unknown][] {
  const sparse: unknown[] = [1];
  sparse[3] = 2;
  return [
    ["empty string", ""],
    ["empty object", {}],
    ["empty array", []],
    ["top-level undefined", undefined],
    ["null", null],
    ["NaN", Number.NaN],
    ["Infinity", Number.POSITIVE_INFINITY],
    ["-Infinity", Number.NEGATIVE_INFINITY],
    ["-0", -0],
    ["-0 inside", { x: [1, -0] }],
    ["NaN inside", { x: Number.NaN }],
    ["BigInt", 10n],
    ["BigInt inside", [1n]],
    ["Date", new Date(0)],
    ["Date inside", { at: new Date(0) }],
    ["Map", new Map([["a", 1]])],
    ["Set", new Set([1])],
    ["function", () => 1],
    ["function inside", { f: () => 1 }],
    ["symbol", Symbol("s")],
    ["symbol inside", [Symbol("s")]],
    ["symbol key", { [Symbol("k")]: 1 }],
    ["undefined in array", [1, undefined]],
    ["undefined in object", { a: undefined }],
    ["class instance", new Point(1, 2)],
    ["boxed string", new String("x")],
    ["cycle", cycle()],
    [
      "array cycle",
      (() => {
        const a: unknown[] = [];
        a.push(a);
        return a;
      })(),
    ],
    ["__proto__ key", JSON.parse('{"__proto__":{"polluted":"yes"}}')],
    ["constructor.prototype keys", JSON.parse('{"constructor":{"prototype":{"polluted":"yes"}}}')],
    ["prototype key", { prototype: { polluted: "yes" } }],
    ["null-prototype object", Object.assign(Object.create(null), { a: 1 })],
    [
      "getter",
      {
        get x() {
          return 1;
        },
      },
    ],
    ["getter whose value changes", changingGetter()],
    [
      "throwing getter",
      {
        get x(): number {
          throw new Error("hostile getter");
        },
      },
    ],
    ["setter only", { set x(_v: number) {} }],
    ["transparent Proxy of a plain object", new Proxy({ a: 1 }, {})],
    ["Proxy whose traps throw", throwingProxy()],
    ["revoked Proxy", revokedProxy()],
    ["toJSON member", { toJSON: "not a function" }],
    ["toJSON method", { toJSON: () => "changed" }],
    ["lone high surrogate", "a\ud800b"],
    ["lone low surrogate", { "\udfff": "\udfff" }],
    ["NUL", "a\u0000b"],
    ["NUL key", { "\u0000": 0 }],
    ["bidi and zero-width", "\u202e\u200b\ufeff"],
    ["very long string (100k)", "x".repeat(100_000)],
    ["nesting 64", nest(NESTING_LIMIT)],
    ["nesting 65", nest(NESTING_LIMIT + 1)],
    ["nesting 10,000", nest(10_000)],
    ["sparse array", sparse],
    ["new Array(3)", new Array(3)],
    ["Uint8Array", new Uint8Array([1, 2])],
    ["Float64Array inside", { f: new Float64Array(1) }],
    ["ArrayBuffer", new ArrayBuffer(2)],
    ["RegExp", /x/],
    ["Error", new Error("e")],
    ["Promise", Promise.resolve(1)],
    // A plain object with a function member: refused by §4.6, and must not be called.
    // biome-ignore lint/suspicious/noThenProperty: the hostile input is exactly a thenable.
    ["thenable", { then: (resolve: (v: unknown) => void) => resolve(2) }],
    ["max safe integer", Number.MAX_SAFE_INTEGER],
    ["beyond safe integer", 2 ** 60],
    ["tiny float", 5e-324],
    ["at the size limit (ASCII)", "x".repeat(limit - 2)],
    ["one byte over the limit (ASCII)", "x".repeat(limit - 1)],
    ["at the size limit (2-byte chars)", "é".repeat((limit - 2) / 2)],
    ["over the limit (2-byte chars)", `${"é".repeat((limit - 2) / 2)}x`],
    ["escapes count toward the limit", "\u0001".repeat(Math.ceil(limit / 6))],
  ];
}

/**
 * spec §4.6 as an oracle: null, booleans, finite numbers other than -0,
 * strings, dense arrays and plain objects (no symbol keys, no undefined
 * members, no getters or setters, no cycles), nested at most 64 deep; a value
 * that cannot even be read (a Proxy whose traps throw) is not storable either.
 * Returns why not, or null.
 */
export function whyNotStorable(v: unknown): string | null {
  try {
    return whyNot(v, 0, new Set());
  } catch (err) {
    return `unreadable (${(err as Error).message})`;
  }
}

function whyNot(v: unknown, depth: number, seen: Set<object>): string | null {
  if (v === null || typeof v === "string" || typeof v === "boolean") return null;
  if (typeof v === "number") return Number.isFinite(v) && !Object.is(v, -0) ? null : `number ${v}`;
  if (typeof v !== "object") return typeof v;
  if (depth >= NESTING_LIMIT) return "too deep";
  if (seen.has(v)) return "cycle";
  seen.add(v);
  try {
    if (Array.isArray(v)) {
      if (Object.getPrototypeOf(v) !== Array.prototype) return "array subclass";
      for (let i = 0; i < v.length; i++) {
        if (!(i in v)) return "hole";
        if (v[i] === undefined) return "undefined member";
        const why = whyNot(v[i], depth + 1, seen);
        if (why) return why;
      }
      return null;
    }
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) return "not a plain object";
    if (Object.getOwnPropertySymbols(v).length > 0) return "symbol key";
    for (const k of Object.keys(v)) {
      const d = Object.getOwnPropertyDescriptor(v, k);
      if (d === undefined || !("value" in d)) return "getter or setter";
      const child: unknown = d.value;
      if (child === undefined) return "undefined member";
      const why = whyNot(child, depth + 1, seen);
      if (why) return why;
    }
    return null;
  } finally {
    seen.delete(v);
  }
}

/**
 * Exact JSON equality: same types, numbers by Object.is, arrays element by
 * element, objects by own keys in the same order (the stored text keeps the
 * order; a reader that stringifies again must get the same text).
 */
export function sameJson(a: unknown, b: unknown): boolean {
  if (typeof a === "number" || typeof b === "number") return Object.is(a, b);
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return a === b;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((x, i) => sameJson(x, bb[i]));
  }
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length || ka.some((k, i) => k !== kb[i])) return false;
  return ka.every((k) => sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

const anythingHostile = fc.anything({
  maxDepth: 4,
  maxKeys: 4,
  withBigInt: true,
  withBoxedValues: true,
  withDate: true,
  withMap: true,
  withSet: true,
  withNullPrototype: true,
  withObjectString: true,
  withSparseArray: true,
  withTypedArray: true,
  stringUnit: "binary",
});

/** JSON-shaped values with dangerous keys (own `__proto__` made by JSON.parse) and awkward strings. */
const jsonWithDangerousKeys = fc
  .dictionary(
    fc.constantFrom(
      "__proto__",
      "constructor",
      "prototype",
      "toJSON",
      "valueOf",
      "",
      "\u0000",
      "\ud800",
      "a",
    ),
    fc.oneof(fc.jsonValue(), fc.constant({ polluted: "yes" })),
    { maxKeys: 4 },
  )
  .map((o) => JSON.parse(JSON.stringify(o)) as unknown);

/**
 * Hand-picked values fast-check itself cannot hold: it reads every value it
 * generates (a clone-method probe, printing), and these throw on any read.
 * The hand-picked tests try them on each backend.
 */
const UNREADABLE = new Set(["Proxy whose traps throw", "revoked Proxy"]);

/** Any value, mostly hostile; the hand-picked ones weigh as much as the generated ones. */
export function payloadArb(limit: number): fc.Arbitrary<unknown> {
  return fc.oneof(
    anythingHostile,
    fc.jsonValue(),
    jsonWithDangerousKeys,
    fc.constantFrom(
      ...hostilePayloads(limit)
        .filter(([label]) => !UNREADABLE.has(label))
        .map(([, v]) => v),
    ),
  );
}

// --------------------------------------------------------------------- names

/** Fragments of hostile names; a generated name joins a few. */
export const NAME_FRAGMENTS = [
  "",
  " ",
  "\t",
  "'",
  '"',
  "`",
  "'; DROP TABLE ratchet_tasks; --",
  "%",
  "_",
  "%_%",
  "\\",
  "../",
  "..\\..\\",
  "/etc/passwd",
  "\u0000",
  "\u0007",
  "\n",
  "\u001f",
  "\u007f",
  "\u0085",
  "\u00a0",
  "\u2028",
  "\u202e",
  "\u200b",
  "\u200d",
  "\ufeff",
  "\ud800",
  "\udfff",
  "😀",
  "👩‍👩‍👧",
  "e\u0301",
  "$1",
  ":x",
  "?",
  "{s}.",
  "@ids(x)",
  "NULL",
  "a",
  "job",
];

export const LONG_NAMES = [
  "x".repeat(200),
  "x".repeat(201),
  "x".repeat(10_000),
  "😀".repeat(100),
  "😀".repeat(101),
  "é".repeat(200),
];

export function nameArb(): fc.Arbitrary<string> {
  return fc.oneof(
    fc.array(fc.constantFrom(...NAME_FRAGMENTS), { maxLength: 4 }).map((a) => a.join("")),
    fc.string({ unit: "binary", maxLength: 12 }),
    fc
      .tuple(
        fc.constantFrom(...NAME_FRAGMENTS),
        fc.string({ maxLength: 8 }),
        fc.constantFrom(...NAME_FRAGMENTS),
      )
      .map(([a, b, c]) => `${a}${b}${c}`),
    fc.constantFrom(...LONG_NAMES),
  );
}

/** What spec §2.1 says must be refused: empty, over 200 characters (by any count), or with a control character. */
export function mustRefuseName(n: string): boolean {
  return n.length === 0 || [...n].length > 200 || /\p{Cc}/u.test(n);
}

export const NAME_KINDS = [
  "task name",
  "queue",
  "job",
  "dedupe",
  "signal",
  "schedule",
  "concurrency key",
] as const;
export type NameKind = (typeof NAME_KINDS)[number];

export const echo = defineTask<unknown, unknown>({ name: "echo", run: (_ctx, input) => input });
export const seated = defineTask<{ k: string }, null>({
  name: "seated",
  concurrency: { limit: 1, key: (i) => i.k },
  run: () => null,
});

/**
 * One use of `name` as a `kind`; resolves with what the store reads back
 * (which must be `name` itself), or throws what the engine threw.
 */
export async function useName(r: Ratchet, kind: NameKind, name: string): Promise<string | null> {
  switch (kind) {
    case "task name": {
      const def = defineTask({ name, run: () => null });
      r.register(def);
      const t = await r.get(await r.enqueue(name, null));
      return t?.name ?? null;
    }
    case "queue": {
      const id = await r.enqueue(echo, null, { queue: name });
      const listed = await r.list({ queue: name, limit: 1000 });
      // A LIKE-built filter would match other queues for "%" or "_".
      if (!listed.some((t) => t.id === id) || listed.some((t) => t.queue !== name))
        throw new Error(`list({queue}) for ${JSON.stringify(name)} returned other queues`);
      return (await r.get(id))?.queue ?? null;
    }
    case "job": {
      const id = await r.enqueue(echo, null, { job: name });
      const listed = await r.list({ job: name, limit: 1000 });
      const status = await r.jobStatus(name);
      if (listed.some((t) => t.job !== name) || status.total !== listed.length)
        throw new Error(`list/jobStatus for job ${JSON.stringify(name)} counted other jobs`);
      return (await r.get(id))?.job ?? null;
    }
    case "dedupe": {
      const id = await r.enqueue(echo, null, { dedupe: name });
      const again = await r.enqueue(echo, null, { dedupe: name });
      if (again !== id)
        throw new Error(`dedupe ${JSON.stringify(name)}: a second enqueue made task ${again}`);
      return (await r.get(id))?.dedupe ?? null;
    }
    case "signal": {
      await r.signal(name, { n: name.length });
      if ((await r.signal(name, null)).first)
        throw new Error(`signal ${JSON.stringify(name)}: the second send was "first" again`);
      return (await rawSignals(r.store)).find((s) => s.name === name)?.name ?? null;
    }
    case "schedule": {
      await r.schedule(name, "0 0 1 1 *", echo, { hostile: true });
      return (await r.schedules()).find((s) => s.name === name)?.name ?? null;
    }
    case "concurrency key": {
      const t = await r.get(await r.enqueue(seated, { k: name }));
      const seat = t?.seat ?? "";
      return seat.startsWith("seated\u001f") ? seat.slice("seated\u001f".length) : null;
    }
  }
}

/** Every row of ratchet_signals, read from the table itself (not through the engine). */
export async function rawSignals(store: Store): Promise<{ name: string; payload: string }[]> {
  if (store instanceof SqliteStore)
    return store.db.prepare("SELECT name, payload FROM ratchet_signals").all() as {
      name: string;
      payload: string;
    }[];
  if (store instanceof PostgresStore)
    return (await store.pool.query(`SELECT name, payload FROM "${store.schema}".ratchet_signals`)).rows;
  throw new Error("unknown store");
}

// ------------------------------------------------------------ signal payloads

/**
 * Waits for the event named by its input (spec §12.7) and returns the
 * payload; a timeout (7 days by default, so never in a test) fails it.
 */
export const listener = defineTask<string, unknown>({
  name: "listener",
  async run(ctx, name) {
    const out = await ctx.waitForEvent(name);
    if (out.kind !== "signal") throw new Error(`the wait for "${name}" timed out`);
    return out.payload;
  },
});

// ----------------------------------------------------------------- fingerprint

/**
 * Everything a refused input must leave alone: the task count (`store.list`),
 * the row count of every Ratchet table, and the schema (SQLite: sqlite_master;
 * PostgreSQL: the tables and columns of the store's schema and of `public`).
 */
export async function fingerprint(r: Ratchet): Promise<string> {
  const tasks = (await r.store.list({ limit: 100_000 })).length;
  const store = r.store;
  if (store instanceof SqliteStore) {
    const master = store.db
      .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
      .all() as { type: string; name: string }[];
    const counts = master
      .filter((m) => m.type === "table")
      .map(
        (m) =>
          `${m.name}=${(store.db.prepare(`SELECT count(*) AS n FROM "${m.name}"`).get() as { n: number }).n}`,
      );
    return JSON.stringify({ tasks, master, counts });
  }
  if (store instanceof PostgresStore) {
    const s = store.schema;
    const cols = await store.pool.query(
      `SELECT table_schema, table_name, column_name, data_type FROM information_schema.columns
       WHERE table_schema IN ($1, 'public') ORDER BY table_schema, table_name, ordinal_position`,
      [s],
    );
    const tables = await store.pool.query(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name",
      [s],
    );
    const names = (tables.rows as { table_name: string }[]).map((t) => t.table_name);
    const counts = await store.pool.query(
      `SELECT ${names.map((n) => `(SELECT count(*) FROM "${s}"."${n}") AS "${n}"`).join(", ")}`,
    );
    return JSON.stringify({ tasks, cols: cols.rows, counts: counts.rows });
  }
  throw new Error("unknown store");
}
