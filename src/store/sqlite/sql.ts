/**
 * SQL shared by several statements. spec §3.1.
 *
 * READY is the one definition of "ready": the listing and the claim are built
 * from it, so whatever is listed as runnable can be claimed. An earlier design
 * claimed only status='pending' while listing expired running rows too; those
 * rows looked runnable for ever and no driver could take them (SEM A.3.3).
 * Named parameters are bound from the statement text by better-sqlite3, which
 * throws on a missing one, so a NULL can never be bound silently (SEM A.3.4).
 */
import { CLAIM_COLUMNS } from "../rows.js";
import { bySize } from "../sized.js";
export const READY = `(status = 'pending' OR (status = 'running' AND lease_until <= :now)
  OR (status = 'waiting' AND wake_at <= :now))`;

/** The fence (spec §3.7): only the current holder's writes match. */
export const FENCE = `id = :id AND status = 'running' AND epoch = :token AND claimed_at = :claimed`;

export const CLAIM_SET = `status = 'running', attempts = attempts + 1, epoch = epoch + 1,
  lease_until = :now + max_ms + :grace, locked_by = :worker, claimed_at = :now,
  started_at = coalesce(started_at, :now), updated_at = :now, wake_at = NULL`;

/**
 * The claim itself: one conditional write per task whose success is the
 * ownership (principle 2). Candidates come from the two selections below,
 * read in the same IMMEDIATE transaction. Selecting ids first and updating by
 * primary key measured ~65 µs per claim against ~150 µs for one
 * UPDATE … WHERE id IN (SELECT … ORDER BY … LIMIT) on a 20k-row table.
 */
export const CLAIM_ONE = `UPDATE ratchet_tasks SET ${CLAIM_SET} WHERE id = :id AND ${READY} RETURNING ${CLAIM_COLUMNS.join(", ")}`;

/**
 * The claim of n ids at once, same condition as CLAIM_ONE: the ids are anonymous parameters after
 * the named ones, `stmt.all({ now, grace, worker }, ...ids)`. Positional, not :i0, :i1, …: a
 * parameter object of 35 keys per chunk was a dictionary-mode object built key by key, ~350 bytes
 * of garbage per claimed task (sampling heap profile of a 20,000-task drain).
 */
export const claimIn = bySize((n) =>
  CLAIM_ONE.replace("WHERE id = :id", `WHERE id IN (${placeholders(n, "?")})`),
);

/**
 * The claim of n pending ids that the claim's own selection just read (claim.ts claimMany), same
 * condition as CLAIM_ONE, returning only what the claimer does not already know. Queue, status,
 * holder, claimed_at, lease_until (now + max_ms + grace) and started_at (the selection read it)
 * follow from the claim itself; job, owner_id, scope, checkpoint, seat and rate are NULL on most
 * tasks, so one flag says whether CLAIM_RARE must read them. better-sqlite3 converts every returned
 * column of every row into a JS value (~0.07 µs each, NULLs included). Claim and commit of chunks of
 * 32 took 6.88 µs of CPU per task returning the 22 CLAIM_COLUMNS against 5.65 returning these 10
 * (`node dist/bench/rowcost.js`, 11 rounds, medians); in an in-process drain of 100,000 no-ops at
 * c16, where claims are ~45 % of the CPU, six alternating pairs drained 64.9k against 60.8k tasks/s.
 */
export const claimLean = bySize((n) =>
  claimIn(n).replace(
    /RETURNING .*$/s,
    `RETURNING id, name, version, input, priority, max_ms, attempts, epoch, abort_requested,
  job IS NOT NULL OR owner_id IS NOT NULL OR scope IS NOT NULL OR checkpoint IS NOT NULL
    OR seat IS NOT NULL OR rate IS NOT NULL`,
  ),
);

/** The columns claimLean leaves out, for a row whose flag says one of them is set. */
export const CLAIM_RARE =
  "SELECT job, owner_id, scope, checkpoint, seat, rate FROM ratchet_tasks WHERE id = ?";

/** n copies of `one`, comma-separated. */
export function placeholders(n: number, one: string): string {
  return Array.from({ length: n }, () => one).join(", ");
}

/**
 * `col IN (:p0, :p1, …)` with one named parameter per value. Only the count is
 * in the text (values are bound), so statements are cached per count.
 * Measured: `name IN (SELECT value FROM json_each(:names))` made SQLite build a
 * bloom filter on every execution, ~110 µs per claim select against ~10 µs.
 */
export function inList(prefix: string, n: number): string {
  return `(${Array.from({ length: n }, (_, i) => `:${prefix}${i}`).join(", ")})`;
}

export function bindList(
  prefix: string,
  values: readonly (string | number)[],
  into: Record<string, unknown>,
): void {
  for (let i = 0; i < values.length; i++) into[`${prefix}${i}`] = values[i];
}

/**
 * Due pending rows in claim order (index ratchet_tasks_ready). started_at comes from the row the
 * select reads anyway (for seat and rate): NULL means the task never started (ClaimedTask.fresh).
 */
export function selectPending(names: number): string {
  return `SELECT id, seat, rate, started_at FROM ratchet_tasks WHERE queue = :queue AND status = 'pending' AND name IN ${inList("n", names)}
ORDER BY order_key, id LIMIT :limit`;
}

/** Running rows whose lease expired (index ratchet_tasks_lease), with the holder that lost them. */
export function selectExpired(queues: number, names: number): string {
  return `SELECT id, locked_by, lease_until, attempts, max_attempts, abort_requested, owns FROM ratchet_tasks
WHERE status = 'running' AND lease_until <= :now AND queue IN ${inList("q", queues)} AND name IN ${inList("n", names)}
ORDER BY lease_until LIMIT :limit`;
}

export const LIST_READY = `
SELECT * FROM ratchet_tasks WHERE queue = :queue AND ${READY}
ORDER BY (status = 'running'), order_key, id LIMIT :limit`;

/** Timer promotion (spec §3.4), bounded per call. */
export const PROMOTE_DUE = `
UPDATE ratchet_tasks SET status = 'pending', wake_at = NULL, updated_at = :now
WHERE id IN (SELECT id FROM ratchet_tasks WHERE status = 'waiting' AND wake_at <= :now ORDER BY wake_at LIMIT :limit)`;

/**
 * Is any timer due? Checked before PROMOTE_DUE on every claim: the UPDATE … IN (subquery) costs
 * ~16 µs even when nothing is due, ~35 µs once ratchet_tasks has an UPDATE trigger (SQLite then
 * materialises the subquery first), against ~2 µs for this probe (measured on 20k pending rows).
 */
export const ANY_DUE = `SELECT 1 FROM ratchet_tasks WHERE status = 'waiting' AND wake_at <= :now LIMIT 1`;

/** Has any lease expired? (index ratchet_tasks_lease; a hand-off waits for the reclaim, spec §8.8). */
export const ANY_EXPIRED = `SELECT 1 FROM ratchet_tasks WHERE status = 'running' AND lease_until <= :now LIMIT 1`;
