/**
 * PostgreSQL statements. Same READY fragment as SQLite (spec §3.1): the
 * listing and the claim are built from it. `{s}` is the schema, `:now` the
 * database clock (see named.ts).
 */
import { CLAIM_COLUMNS } from "../rows.js";

export const T = "{s}.ratchet_tasks";

export const READY = `(status = 'pending' OR (status = 'running' AND lease_until <= :now)
  OR (status = 'waiting' AND wake_at <= :now))`;

export const FENCE = `id = :id AND status = 'running' AND epoch = :token`;

const CLAIM_SET = `status = 'running', attempts = t.attempts + 1, epoch = t.epoch + 1,
  lease_until = :now + t.max_ms + :grace, locked_by = :worker, claimed_at = :now,
  started_at = coalesce(t.started_at, :now), updated_at = :now, wake_at = NULL`;

/**
 * Batch claim: candidates are locked with SKIP LOCKED (concurrent claimers
 * take disjoint rows instead of queueing), then one conditional UPDATE whose
 * returned rows are the ownership; READY is re-checked on the locked rows.
 * The times before the claim come back too: a row that may not start (a full
 * seat, an empty bucket) parks again as if never claimed (spec §14.9).
 *
 * The update reaches the locked rows by their ctid (a TID scan: a locked row's version cannot
 * change before this transaction ends), and the times before the claim come back from an array
 * (only for gated rows, the only ones that use them). As a join of the candidates with the table,
 * the planner, estimating a hash join cheaper below some 100,000 rows, read the whole table on
 * every claim: on 20,000 tasks a claim of 500 took 12.2 ms, 4.7 of them in that scan; by ctid,
 * 6–7 ms (EXPLAIN ANALYZE, PostgreSQL 15). `id = ANY(…)` instead was as fast with statistics, but
 * on a table not yet analyzed the planner chose a sequential scan comparing every row with every
 * id (a drain of 20,000 ran at a third of its rate); a TID scan has no such alternative.
 */
export const CLAIM_PENDING = `
WITH c AS MATERIALIZED (
  SELECT ctid AS tid, id, started_at, claimed_at FROM ${T}
  WHERE queue = :queue AND status = 'pending' AND name = ANY(:names)
  ORDER BY order_key, id LIMIT :limit FOR UPDATE SKIP LOCKED),
prev AS MATERIALIZED (SELECT array_agg(id) AS ids, array_agg(started_at) AS started, array_agg(claimed_at) AS claimed FROM c),
u AS (
  UPDATE ${T} t SET ${CLAIM_SET}
  WHERE t.ctid = ANY(ARRAY(SELECT tid FROM c))
    AND ${READY.replaceAll("status", "t.status").replaceAll("lease_until", "t.lease_until").replaceAll("wake_at", "t.wake_at")}
  RETURNING ${CLAIM_COLUMNS.map((c) => `t.${c}`).join(", ")})
SELECT u.*,
  CASE WHEN u.seat IS NULL AND u.rate IS NULL THEN NULL ELSE prev.started[array_position(prev.ids, u.id)] END AS prev_started,
  CASE WHEN u.seat IS NULL AND u.rate IS NULL THEN NULL ELSE prev.claimed[array_position(prev.ids, u.id)] END AS prev_claimed,
  :now AS claim_now
FROM u, prev`;

/**
 * Timer promotion (spec §3.4, bounded per call) and the expired leases, in one round trip: the
 * promotion is a data-modifying CTE, done whatever the SELECT returns, and its rows are visible to
 * the claim statements that follow in the same transaction. One statement fewer of the claim's
 * five (BEGIN, promote, expired, claim, COMMIT).
 */
export const PROMOTE_AND_EXPIRED = `
WITH promoted AS (
  UPDATE ${T} SET status = 'pending', wake_at = NULL, updated_at = :now
  WHERE id IN (SELECT id FROM ${T} WHERE status = 'waiting' AND wake_at <= :now ORDER BY wake_at LIMIT :promote FOR UPDATE SKIP LOCKED)
  RETURNING 1)
SELECT id, locked_by, lease_until, attempts, max_attempts, abort_requested, owns FROM ${T}
WHERE status = 'running' AND lease_until <= :now AND queue = ANY(:queues) AND name = ANY(:names)
ORDER BY lease_until LIMIT :limit FOR UPDATE SKIP LOCKED`;

export const CLAIM_ONE = `UPDATE ${T} t SET ${CLAIM_SET} WHERE t.id = :id AND ${READY.replaceAll("status", "t.status").replaceAll("lease_until", "t.lease_until").replaceAll("wake_at", "t.wake_at")} RETURNING ${CLAIM_COLUMNS.map((c) => `t.${c}`).join(", ")}`;

export const LIST_READY = `
SELECT * FROM ${T} WHERE queue = :queue AND ${READY}
ORDER BY (status = 'running'), order_key, id LIMIT :limit`;
