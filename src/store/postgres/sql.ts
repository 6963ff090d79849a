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
 */
export const CLAIM_PENDING = `
UPDATE ${T} t SET ${CLAIM_SET}
FROM (SELECT id, started_at AS prev_started, claimed_at AS prev_claimed FROM ${T}
      WHERE queue = :queue AND status = 'pending' AND name = ANY(:names)
      ORDER BY order_key, id LIMIT :limit FOR UPDATE SKIP LOCKED) c
WHERE t.id = c.id AND ${READY.replaceAll("status", "t.status").replaceAll("lease_until", "t.lease_until").replaceAll("wake_at", "t.wake_at")}
RETURNING ${CLAIM_COLUMNS.map((c) => `t.${c}`).join(", ")}, c.prev_started, c.prev_claimed, :now AS claim_now`;

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
