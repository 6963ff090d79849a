import { ValidationError } from "../errors.js";

export const MAX_JSON_DEPTH = 64;
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;

/**
 * Serialises a value that must round-trip exactly through storage. spec §4.6.
 * Accepts null, booleans, finite numbers, strings, arrays and plain objects;
 * rejects everything JSON.stringify would silently change (NaN → null,
 * Date → string, Map → {}, undefined members dropped, functions dropped),
 * getters and setters, and cycles, naming the path. `undefined` at the top is
 * stored as null. Used for task inputs and results, step results, schedule
 * inputs and signal payloads alike.
 * Invariant: parse(serialize(v)) deep-equals v for every accepted v, and every
 * refusal is a ValidationError with a code (spec §15.7), even when reading the
 * value throws (a Proxy trap): no caller's exception escapes raw.
 */
export function toStorableJson(
  value: unknown,
  what: string | (() => string),
  maxBytes = DEFAULT_MAX_PAYLOAD_BYTES,
): string {
  // A task's result is most often null or a primitive: no walk, no Set, and (below) no name for
  // the value unless something is wrong with it. Task results name themselves lazily (`what` as a
  // function): a template string per settled task otherwise.
  if (value === undefined || value === null) return "null";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "string" && value.length * 6 + 2 <= maxBytes) return JSON.stringify(value);
  return storableJsonOf(value, what, maxBytes);
}

/** The name a refused value is given in its error (lazy for the callers on hot paths). */
function nameOf(what: string | (() => string)): string {
  return typeof what === "string" ? what : what();
}

function storableJsonOf(value: unknown, what: string | (() => string), maxBytes: number): string {
  let text: string;
  try {
    if (!isFlatPlain(value)) check(value, { what, trail: [], above: [] }, 0);
    text = JSON.stringify(value);
  } catch (err) {
    if (err instanceof ValidationError) throw err;
    throw new ValidationError(
      `${nameOf(what)} could not be read as JSON: ${err instanceof Error ? err.message : String(err)}`,
      "RATCHET_INVALID_JSON",
      { cause: err },
    );
  }
  // Byte length only matters near the limit; length·3 bounds UTF-8 bytes.
  if (text.length * 3 > maxBytes) {
    const bytes = Buffer.byteLength(text, "utf8");
    if (bytes > maxBytes) {
      throw new ValidationError(
        `${nameOf(what)} is ${bytes} bytes of JSON, over the limit of ${maxBytes}; store large data elsewhere and pass a reference`,
        "RATCHET_PAYLOAD_TOO_LARGE",
      );
    }
  }
  return text;
}

/**
 * The common input, a plain object of primitives (`{ id, at }`), checked without the walk's
 * bookkeeping (spec §4.6: the same rules as check(): a plain prototype, no symbol keys, data
 * properties only, finite numbers other than -0, no undefined). `false` is not a refusal: check()
 * then walks the value and names what is wrong, or accepts its nested members. The walk's trail and
 * ancestors made it cost about as much as JSON.stringify for an object of two numbers (issue 43, W1).
 */
function isFlatPlain(v: unknown): boolean {
  if (typeof v !== "object" || v === null) return false;
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return false;
  const keys = Object.keys(v);
  for (let i = 0; i < keys.length; i++) {
    const d = Object.getOwnPropertyDescriptor(v, keys[i]!);
    if (d === undefined || !("value" in d)) return false;
    const x: unknown = d.value;
    switch (typeof x) {
      case "string":
      case "boolean":
        continue;
      case "number":
        if (Number.isFinite(x) && !Object.is(x, -0)) continue;
        return false;
      case "object":
        if (x === null) continue;
        return false;
      default:
        return false;
    }
  }
  return Object.getOwnPropertySymbols(v).length === 0;
}

/**
 * A walk of check(): the keys and indexes from the top to the value in hand (`trail`) and the
 * objects holding it (`above`, for cycles). The path is spelled only when a value is refused: as a
 * string per member it was most of the garbage of validating an input of a few keys, with the Set
 * the walk used to carry (an enqueueMany of 1,000 on PostgreSQL, sampling heap profile).
 */
interface Walk {
  what: string | (() => string);
  trail: (string | number)[];
  above: object[];
}

function fail(w: Walk, why: string): never {
  const what = nameOf(w.what);
  const path = w.trail.map((k) => (typeof k === "number" ? `[${k}]` : `.${k}`)).join("");
  throw new ValidationError(`${what}${path} ${why}`, "RATCHET_INVALID_JSON");
}

function check(v: unknown, w: Walk, depth: number): void {
  switch (typeof v) {
    case "string":
    case "boolean":
      return;
    case "number":
      if (!Number.isFinite(v)) fail(w, `is ${v}, which JSON cannot store`);
      // JSON writes -0 as 0; rejecting beats a silent change (normalise with `x || 0`).
      if (Object.is(v, -0)) fail(w, "is -0, which JSON would store as 0; normalise it (x || 0)");
      return;
    case "object":
      break;
    default:
      fail(w, `is a ${typeof v}, which JSON cannot store`);
  }
  if (v === null) return;
  if (depth >= MAX_JSON_DEPTH) fail(w, `is nested deeper than ${MAX_JSON_DEPTH} levels`);
  const obj = v as object;
  // At most MAX_JSON_DEPTH objects above: a scan of them is as cheap as a Set, without one.
  if (w.above.includes(obj)) fail(w, "is a cycle (refers to itself)");
  w.above.push(obj);
  if (Array.isArray(obj)) {
    for (let i = 0; i < obj.length; i++) {
      w.trail.push(i);
      if (!(i in obj)) fail(w, "is a hole in a sparse array");
      check(obj[i], w, depth + 1);
      w.trail.pop();
    }
  } else {
    const proto = Object.getPrototypeOf(obj);
    if (proto !== Object.prototype && proto !== null) {
      const name = (obj as { constructor?: { name?: string } }).constructor?.name ?? "object";
      fail(w, `is a ${name}, not a plain object; convert it (e.g. a Date to an ISO string) first`);
    }
    if (Object.getOwnPropertySymbols(obj).length > 0) fail(w, "has symbol keys");
    for (const key of Object.keys(obj)) {
      w.trail.push(key);
      // Read the descriptor, not the member: a getter runs the caller's code, and its value may
      // differ between this check and JSON.stringify, which would store a value never checked
      // (spec §4.6). Objects only: for array elements a descriptor each costs ~100× an index read
      // (300k elements: 51 ms against 0.5 ms), so an accessor on an array index is not caught.
      const d = Object.getOwnPropertyDescriptor(obj, key);
      if (d === undefined || !("value" in d)) fail(w, "is a getter or setter; pass plain data");
      const child: unknown = d.value;
      if (child === undefined) fail(w, "is undefined; omit the key or use null");
      check(child, w, depth + 1);
      w.trail.pop();
    }
  }
  w.above.pop();
}

/** Parses stored JSON; stored text was produced by toStorableJson. */
export function fromJson<T = unknown>(text: string | null | undefined): T {
  if (text === null || text === undefined) return null as T;
  return JSON.parse(text) as T;
}

export const MAX_ERROR_MESSAGE = 4_000;
export const MAX_ERROR_STACK = 16_000;

export interface StoredError {
  name: string;
  message: string;
  stack?: string;
  code?: string;
  /** For upstream_failed: the task whose failure caused it (spec §6.1). */
  upstream?: number;
}

function cut(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n - 15)}… [truncated]`;
}

/** Bounded error record (spec §4.7). Works for any thrown value. */
export function toStoredError(err: unknown): StoredError {
  if (err instanceof Error) {
    const out: StoredError = {
      name: cut(err.name || "Error", 200),
      message: cut(String(err.message), MAX_ERROR_MESSAGE),
    };
    if (typeof err.stack === "string") out.stack = cut(err.stack, MAX_ERROR_STACK);
    const code = (err as { code?: unknown }).code;
    if (typeof code === "string") out.code = cut(code, 200);
    return out;
  }
  let message: string;
  try {
    message = typeof err === "string" ? err : (JSON.stringify(err) ?? String(err));
  } catch {
    message = String(err);
  }
  return { name: "NonError", message: cut(message, MAX_ERROR_MESSAGE) };
}
