/**
 * The partial indexes of `ratchet_tasks` that a plain task's claim and completion never enter (the
 * same ten on both stores): pgshape.ts and rowcost.ts drop them to measure what testing their
 * predicates on every rewrite of a row costs.
 */
export const RARE_INDEXES = [
  "wake",
  "dedupe",
  "job",
  "spawn",
  "marked",
  "completing",
  "parked",
  "scope",
  "seat",
  "seat_parked",
].map((n) => `ratchet_tasks_${n}`);

/** What a client needs to change a table (a pg.Client; this module imports no driver). */
interface Querier {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/** Drops every CHECK constraint of table `t` (quoted, schema-qualified): pgshape's and claimshape's `-checks`. */
export async function dropChecks(c: Querier, t: string): Promise<void> {
  const cs = await c.query(
    "SELECT conname FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'c'",
    [t],
  );
  for (const r of cs.rows as { conname: string }[])
    await c.query(`ALTER TABLE ${t} DROP CONSTRAINT "${r.conname}"`);
}
