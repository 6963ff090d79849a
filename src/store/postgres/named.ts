/**
 * Named parameters for PostgreSQL. The positional list is derived from the
 * statement text and a missing key throws, so a NULL is never bound by
 * accident (SEM A.3.4; a NULL in a claim predicate fails closed and looks like
 * contention). `:now` becomes `<schema>.now_ms($k)`: the database clock, or the
 * test clock's override.
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
      return name === "now" ? `${schema}.now_ms($${i + 1}::bigint)` : `$${i + 1}`;
    });
  return { name: `ratchet_${++counter}`, text, params };
}

export function bind(c: Compiled, values: Record<string, unknown>): unknown[] {
  return c.params.map((p) => {
    if (!(p in values)) throw new Error(`statement ${c.name}: missing parameter :${p}`);
    const v = values[p];
    return v === undefined ? null : v;
  });
}
