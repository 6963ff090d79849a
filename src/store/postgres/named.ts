/**
 * Named parameters for PostgreSQL. The positional list is derived from the
 * statement text and a missing key throws, so a NULL is never bound by
 * accident (SEM A.3.4; a NULL in a claim predicate fails closed and looks like
 * contention). `:now` becomes `(SELECT <schema>.now_ms($k))`: the database clock, or the
 * test clock's override.
 *
 * As a scalar subquery, an init plan: the statement computes the clock once, where the bare call,
 * inlined, was evaluated wherever it appears on every row (a claim names it seven times per row:
 * the lease, the times it sets, the re-checked READY, the returned claim time; each a numeric
 * `extract(epoch …) * 1000`). now() is the transaction's start either way, so the value is the same.
 * Claims and completions of 500 over 60,000 tasks, alone on one connection
 * (`node dist/bench/pgshape.js`, variant ratchet, two builds alternating, two rounds each):
 * 18.45 and 18.72 → 16.88 and 16.84 µs of server time per task; in-process drains of 60,000, six
 * alternating pairs (`node dist/bench/drain.js --store pg --pairs 6 --base …`): 29.9 → 27.5 µs of
 * statement time per task, 27.6k → 29.0k tasks/s.
 *
 * An array of integers is bound as one array literal ('{1,2,3}'), which pg would otherwise build
 * element by element (each one stringified, quoted and escaped, then concatenated). pg sends both as
 * text of an unknown type, so the statement reads the same value. A settle batch's four arrays of
 * ids, tokens and result offsets made ~890 bytes of garbage per completed task that way, a sixth of a
 * PostgreSQL drain's (sampling heap profile of an in-process drain of 60,000 at c16), and 28 against
 * 5 µs of CPU per array of 500. With the literal: 5,270 → 4,449 bytes allocated per task in that
 * profile, and 9.1 → 8.6 µs of Node CPU per task in eight alternating pairs of drains (`node
 * dist/bench/drain.js --store pg --pairs 8 --base …`; the rate within its noise, 60.4k against 60.0k).
 * A batch enqueue's integer columns take the same form.
 */
export interface Compiled {
  name: string;
  text: string;
  params: string[];
}

let counter = 0;

export function compile(sql: string, schema: string): Compiled {
  const params: string[] = [];
  const text = sql
    .replaceAll("{s}", schema)
    .replace(/(?<![:\w]):([a-zA-Z_][a-zA-Z0-9_]*)/g, (_m, name: string) => {
      let i = params.indexOf(name);
      if (i < 0) {
        params.push(name);
        i = params.length - 1;
      }
      return name === "now" ? `(SELECT ${schema}.now_ms($${i + 1}::bigint))` : `$${i + 1}`;
    });
  return { name: `ratchet_${++counter}`, text, params };
}

export function bind(c: Compiled, values: Record<string, unknown>): unknown[] {
  return c.params.map((p) => {
    if (!(p in values)) throw new Error(`statement ${c.name}: missing parameter :${p}`);
    const v = values[p];
    if (v === undefined) return null;
    if (!Array.isArray(v)) return v;
    if (v.every(Number.isSafeInteger)) return `{${v.join(",")}}`;
    return v.every(isTextOrNull) ? textArray(v) : v;
  });
}

const isTextOrNull = (x: unknown): x is string | null => typeof x === "string" || x === null;

/**
 * A text array as the literal pg would send for it ('{"a","b\"c",NULL}': every element quoted,
 * backslashes and double quotes escaped), in one pass per element where pg makes two (a replace
 * for each character) and a call to its value preparation. A batch enqueue's five text columns
 * (queue, name, input, dedupe key, job) were ~8 % of the client's CPU of enqueueMany of 1,000 on
 * PostgreSQL (--cpu-prof: escapeElement, arrayString).
 */
function textArray(v: readonly (string | null)[]): string {
  if (v.length === 0) return "{}";
  // The usual columns: every element a text (queue, name, input), or every one NULL (dedupe, job).
  // One join of the escaped texts: appending element by element built a rope of ~3 strings each.
  if (!v.includes(null)) return `{"${(v as readonly string[]).map(escapeText).join('","')}"}`;
  if (v.every((x) => x === null)) return `{${"NULL,".repeat(v.length - 1)}NULL}`;
  return `{${v.map((x) => (x === null ? "NULL" : `"${escapeText(x)}"`)).join(",")}}`;
}

const escapeText = (x: string): string => x.replace(ESCAPED, "\\$&");
const ESCAPED = /[\\"]/g;
