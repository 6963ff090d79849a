/**
 * PostgreSQL statements. Same READY fragment as SQLite (spec §3.1): the
 * listing and the claim are built from it. `{s}` is the schema, `:now` the
 * database clock (see named.ts).
 */
import { CLAIM_COLUMNS } from "../rows.js";
import { bySize } from "../sized.js";
import { PROMOTE_BATCH } from "../store.js";

export const T = "{s}.ratchet_tasks";

export const READY = `(status = 'pending' OR (status = 'running' AND lease_until <= :now)
  OR (status = 'waiting' AND wake_at <= :now))`;

export const FENCE = `id = :id AND status = 'running' AND epoch = :token AND claimed_at = :claimed`;

const CLAIM_SET = `status = 'running', attempts = t.attempts + 1, epoch = t.epoch + 1,
  lease_until = :now + t.max_ms + :grace, locked_by = :worker, claimed_at = :now,
  started_at = coalesce(t.started_at, :now), updated_at = :now, wake_at = NULL`;

const T_READY = READY.replaceAll("status", "t.status")
  .replaceAll("lease_until", "t.lease_until")
  .replaceAll("wake_at", "t.wake_at");
const T_CLAIM_COLUMNS = CLAIM_COLUMNS.map((c) => `t.${c}`).join(", ");

/**
 * Timer promotion (spec §3.4), bounded by PROMOTE_BATCH, as a data-modifying CTE named `promoted`.
 *
 * The bound is written in the text and the locked ids are reached by primary key (`id =
 * ANY(ARRAY(…))`, an init plan). With the bound a parameter and `id IN (SELECT …)`, the generic plan
 * of every claim statement took the promotion for 10 % of the waiting rows and joined them to a
 * sequential scan of the whole table; beside 200,000 future tasks it cost 13,110 against 848 for a
 * custom plan (EXPLAIN EXECUTE of claimFast(16), each plan_cache_mode forced), so the plan cache
 * never kept the generic plan and planned every claim anew: the claim's bind took 1.06 against 0.18
 * ms per call with none waiting (the server's log of `npm run bench`'s drain of 2,000 due tasks
 * beside 200,000 future ones, no prefetch: 382 claims per side), and that drain ran at 0.64–0.79× of
 * its baseline. Written in, both plans cost ~153, and the drain ran at 1.01× and 1.05× of its
 * baseline in two runs alternating with the build before (0.77×, 0.79×); W2 with nothing waiting
 * unchanged (`node dist/bench/drain.js --store pg --cold --tasks 20000 --pairs 4 --base …`: 29.8k →
 * 30.4k tasks/s). A prefetching worker (the peers harness's W5) makes a few dozen claims of
 * hundreds, so it paid little of this.
 */
const PROMOTE_CTE = `promoted AS (
  UPDATE ${T} SET status = 'pending', wake_at = NULL, updated_at = :now
  WHERE id = ANY(ARRAY(SELECT id FROM ${T} WHERE status = 'waiting' AND wake_at <= :now ORDER BY wake_at LIMIT ${PROMOTE_BATCH} FOR UPDATE SKIP LOCKED))
  RETURNING 1)`;

/** Claims up to this many take the join form of claimPending, with the limit in the text. */
export const SMALL_CLAIM = 32;

/**
 * Batch claim: candidates are locked with SKIP LOCKED (concurrent claimers take disjoint rows
 * instead of queueing), then one conditional UPDATE whose returned rows are the ownership; READY is
 * re-checked on the locked rows. The times before the claim come back too: a row that may not
 * start (a full seat, an empty bucket) parks again as if never claimed (spec §14.9).
 *
 * Two forms, by size:
 * - Up to SMALL_CLAIM, a join of the candidates with the table, the limit written in the text (one
 *   prepared statement per size), so the planner knows how few rows come and takes them by primary
 *   key: 0.61 ms for a claim of one task, the latency of every enqueue to an idle worker.
 * - Above it, the update reaches the locked rows by their ctid (a TID scan: a locked row's version
 *   cannot change before this transaction ends), and the times before the claim are looked up in
 *   the candidates only for gated rows. With the join and the limit a parameter, the planner, once
 *   the table was analyzed, read the whole table into a hash on every claim: on 20,000 tasks a
 *   claim of 500 took 12.2 ms, 4.7 of them in that scan; by ctid 6–7 ms (EXPLAIN ANALYZE,
 *   PostgreSQL 15), 26.6 against 35.8 µs per claimed task in a sequential bench. `id = ANY(…)`
 *   was as fast with statistics but, without them, compared every row with every id. The TID
 *   form costs a claim of one task 1.2 ms (the materialized candidates and the array), hence two.
 *
 *   A row of the large form is fresh (ClaimedTask.fresh: no stored steps to read) when this claim
 *   made its epoch 1: only claims raise the epoch, so no holder came before it. Looked up in the
 *   candidates instead, as `t.id = ANY(ARRAY(…))`, each row was compared with half the claim (~4 %
 *   of the server's CPU in a drain of 150,000 tasks, perf); joined to them, the planner took a
 *   nested loop over both when the table had no statistics (twice the server's CPU per task). A
 *   task whose claim a seat or rate limit parked again never started but is not on its first
 *   claim: this form says false for it, which costs it one read of its (no) steps.
 */
/** ClaimedTask.fresh in the large forms (claimPending's and claimFast's): see above. */
const FRESH_BY_EPOCH = "t.epoch = 1 AS fresh";

export function claimPending(limit: number): string {
  return limit > SMALL_CLAIM ? CLAIM_PENDING_LARGE : claimPendingSmall(limit);
}
const claimPendingSmall = bySize(
  (n) => `
UPDATE ${T} t SET ${CLAIM_SET}
FROM (SELECT id, started_at AS prev_started, claimed_at AS prev_claimed ${candidates(String(n))}) c
WHERE t.id = c.id AND ${T_READY}
RETURNING ${T_CLAIM_COLUMNS}, c.prev_started, c.prev_claimed, :now AS claim_now`,
);

/** The pending rows of :queue with :names in claim order (spec §3.5), locked, up to `limit`. */
function candidates(limit: string): string {
  return `FROM ${T} WHERE queue = :queue AND status = 'pending' AND name = ANY(:names)
  ORDER BY order_key, id LIMIT ${limit} FOR UPDATE SKIP LOCKED`;
}

const CLAIM_PENDING_LARGE = `
WITH c AS MATERIALIZED (
  SELECT ctid AS tid, id, started_at, claimed_at ${candidates(":limit")})
UPDATE ${T} t SET ${CLAIM_SET}
WHERE t.ctid = ANY(ARRAY(SELECT tid FROM c)) AND ${T_READY}
RETURNING ${T_CLAIM_COLUMNS},
  CASE WHEN t.seat IS NULL AND t.rate IS NULL THEN NULL ELSE (SELECT c.started_at FROM c WHERE c.id = t.id) END AS prev_started,
  CASE WHEN t.seat IS NULL AND t.rate IS NULL THEN NULL ELSE (SELECT c.claimed_at FROM c WHERE c.id = t.id) END AS prev_claimed,
  ${FRESH_BY_EPOCH},
  :now AS claim_now`;

/**
 * What a fast claim returns: one row, whose `rows` is a JSON array with one array per claimed task,
 * in claim order (spec §3.5): [id, name, version, input, priority, max_ms, attempts, epoch,
 * abort_requested, started_at, rare]. The claimer knows the rest: the queue is the one claimed,
 * status, holder and claimed_at follow from the claim, lease_until is claim_now + max_ms + grace,
 * and fresh (ClaimedTask.fresh) is an epoch of 1 (see FRESH_BY_EPOCH). `rare` is null, or
 * [job, owner_id, scope, checkpoint, seat, rate] when one of them is set, or 0 for a task whose
 * input and checkpoint are too long to go inline (see claimRowText).
 *
 * One text parsed by one JSON.parse, where the rows of a claim of 500 used to come as 500 DataRow
 * messages of 13 fields each: node-postgres parses every message and field in JavaScript (its
 * parser, the row's object, a type parser per field), and each task's input went through a
 * JSON.parse of its own. The input is stored JSON (toStorableJson wrote it), so it goes into the
 * text as it is and comes out parsed. Cold drains of 20,000 at c16, six alternating pairs (`node
 * dist/bench/drain.js --store pg --cold --tasks 20000 --pairs 6 --base …`): the worker's CPU 30.0 →
 * 25.4 µs per task (main thread 16.3 → 13.8, its compiler threads 12.5 → 9.8: pg's row parser
 * no longer gets hot enough to be compiled), the server's within its noise (45.5 → 43.5; a second
 * set of six: worker 27.1 → 22.4, server 39.8 → 41.0); warm drains of 60,000 (four pairs) 13.8 →
 * 10.5 µs and 31.3k → 32.7k tasks/s. Before this, the same rows came back as one
 * DataRow each, with the values most tasks share sent as NULL (a NULL costs the parser nothing):
 * 500 rows of 17 fields took 3.26 µs of node CPU per row, of 26 fields 4.25 (`node
 * dist/bench/pgrows.js`).
 */
const claimRowText = (limit: string) => {
  // One claim's text stays within CLAIM_TEXT_BUDGET: a task whose input and checkpoint take more
  // than its share comes as a 0 in place of `rare` and no input, and claim.ts reads those two after
  // the claim (its own row by id; the task is held by this claim). A longer text than V8 can hold
  // in a string (2^29 − 24 characters in Node 20) or PostgreSQL in a value (1 GB) would fail every
  // claim of the queue for as long as those tasks came first.
  const big = `octet_length(t.input) + coalesce(octet_length(t.checkpoint), 0) > ${CLAIM_TEXT_BUDGET} / ${limit}`;
  return `t.order_key, concat('[', t.id, ',', to_json(t.name), ',', t.version, ',',
    CASE WHEN ${big} THEN 'null' ELSE t.input END, ',', t.priority, ',', t.max_ms, ',', t.attempts, ',', t.epoch, ',',
    t.abort_requested, ',', t.started_at, ',',
    CASE WHEN ${big} THEN '0' ELSE coalesce(${RARE}, 'null') END, ']') AS r`;
};

/** The most characters of inputs and checkpoints one fast claim carries inline (see claimRowText). */
export const CLAIM_TEXT_BUDGET = 32 * 1024 * 1024;

/** [job, owner_id, scope, checkpoint, seat, rate] as JSON text, or NULL when none is set (most tasks). */
const RARE = `CASE WHEN t.job IS NULL AND t.owner_id IS NULL AND t.scope IS NULL AND t.checkpoint IS NULL
    AND t.seat IS NULL AND t.rate IS NULL THEN NULL
    ELSE json_build_array(t.job, t.owner_id, t.scope, t.checkpoint, t.seat, t.rate)::text END`;

/** What claim.ts reads after a fast claim for the tasks it did not inline (rare = 0). */
export const CLAIMED_LONG = `SELECT id, input, ${RARE} AS rare FROM ${T} t WHERE id = ANY(:ids::bigint[])`;

/**
 * A fast claim's one row: `full` (true, else NULL) when it deferred to the full claim (see
 * claimFast), the claim's time, and the claimed tasks (see claimRowText), NULL when none.
 *
 * spec §13.8: its commit does not wait for the WAL to reach the disk (`synchronous_commit` off for
 * this transaction only; set_config's third argument). A claim lost in a server crash leaves its
 * tasks pending as before it, and nothing of their holder can be stored without it: every holder
 * write is a commit that waits for the disk, and WAL is flushed in order, so the first one makes the
 * claim durable too. The holder of a lost claim is refused by the fence (its claim time, §3.7), and
 * the tasks run again, as after any lost claim (§15.3). The flush was on every worker's path from
 * claim to handlers: the drain waited on it, and an idle worker's start of a new task too. A
 * commit's flush here: ~0.6 ms at the median (1.05 against 0.44 ms for a one-row INSERT, p99 2.8–3.4
 * against 0.75). Measured against the build before (2026-12-03, a noisy VM): an idle worker (c16,
 * prefetch 500) in one process, enqueues from another Ratchet 15 ms apart, from each enqueue's
 * return to its handler's start, three alternating pairs of 300: p50 0.91–1.18 against 1.35–1.45 ms.
 * Cold drains (`node dist/bench/drain.js --store pg --cold --base …`): WAL flushes 2.7 → 1.3 per
 * 1,000 tasks; 60,000 × 6 pairs 33,414 → 36,017 tasks/s, 20,000 × 8 pairs 32,662 → 33,422, 60,000 ×
 * 4 pairs 30,930 → 29,656: a few per cent at most, within this machine's noise. With every commit
 * asynchronous (a diagnosis only: PGOPTIONS, three pairs) 36–38k → 44–46k; the rest is the
 * completions' flush, which stays (an outcome, once answered, must not be lost).
 */
const FAST_SELECT = `SELECT NULLIF(f.expired OR f.gated OR f.promoted > 0, false) AS "full", :now AS claim_now,
  (SELECT '[' || string_agg(u.r, ',' ORDER BY u.order_key, u.id) || ']' FROM u) AS rows,
  set_config('synchronous_commit', 'off', true) AS commit_mode
FROM f`;

/** What sends a fast claim on to the full one (see claimFast), as the CTE `f` over the candidates `c`. */
const FAST_FINDINGS = `f AS MATERIALIZED (
  SELECT EXISTS (SELECT 1 FROM ${T} WHERE status = 'running' AND lease_until <= :now
                   AND queue = ANY(:queues) AND name = ANY(:names)) AS expired,
         EXISTS (SELECT 1 FROM c WHERE seat IS NOT NULL OR rate IS NOT NULL) AS gated,
         (SELECT count(*) FROM promoted)::int AS promoted)`;

/**
 * The claim of one queue's tasks in one round trip and its own transaction, for the latency of an
 * idle worker (spec §8.8 in spirit: an enqueue's task should start at once) and the refills of a
 * prefetching one. The full
 * claim takes four (BEGIN, promotion and expired leases, the claim, COMMIT); this statement does
 * the same work and claims only when nothing in it needs the full path: no expired lease in the
 * worker's queues (a reclaim writes events and may fail or park the task), no gated candidate (a
 * seat or a rate limit is admitted in the claim's transaction), and no timer it promoted (rows it
 * promotes are not visible to this same statement, and one of them may come first in claim order,
 * spec §3.5). Its first row always carries those three findings; any of them sends the caller on
 * to the full claim. Claim of one task, 300 in a row: 1.05 ms against 2.3-2.5 ms for the full claim.
 * Its claimed tasks come as one text (see claimRowText; claim.ts claimedFrom makes the ClaimedTasks).
 */
export function claimFast(limit: number): string {
  if (limit <= SMALL_CLAIM) return claimFastSmall(limit);
  // Multiples of SMALL_CLAIM: the driver's sizes (CLAIM_STEP is one) and what is left of them after
  // a full small claim (claim.ts goes on with the rest, e.g. 512 − 32), so neither is planned anew.
  return limit % SMALL_CLAIM === 0 && limit <= MAX_WRITTEN_LIMIT
    ? claimFastLargeSized(limit)
    : CLAIM_FAST_LARGE;
}
const claimFastSmall = bySize(
  (n) => `
WITH ${PROMOTE_CTE},
c AS MATERIALIZED (
  SELECT id, seat, rate ${candidates(String(n))}),
${FAST_FINDINGS},
u AS (
  UPDATE ${T} t SET ${CLAIM_SET}
  FROM c
  WHERE t.id = c.id AND NOT (SELECT expired OR gated OR promoted > 0 FROM f) AND ${T_READY}
  RETURNING t.id, ${claimRowText(String(n))})
${FAST_SELECT}`,
);

/**
 * The same for a claim of more than SMALL_CLAIM (a worker that prefetches refills hundreds at a
 * time), with the rows reached by ctid and fresh read from the epoch, as in claimPending's large
 * form. One round trip and one commit where the full claim takes four: a prefetching worker on
 * PostgreSQL drained at the pace of its refills (a refill of 500 took ~12 ms as the small fast claim
 * plus the full claim: 1.6 + 0.6 + 1.6 + 7.7 + 1.1 ms, measured per statement in a drain; the 250
 * tasks left in the buffer when it began ran in ~7).
 */
const claimFastLarge = (limit: string) => `
WITH ${PROMOTE_CTE},
c AS MATERIALIZED (
  SELECT ctid AS tid, id, seat, rate ${candidates(limit)}),
${FAST_FINDINGS},
u AS (
  UPDATE ${T} t SET ${CLAIM_SET}
  WHERE t.ctid = ANY(ARRAY(SELECT tid FROM c)) AND NOT (SELECT expired OR gated OR promoted > 0 FROM f) AND ${T_READY}
  RETURNING t.id, ${claimRowText(limit === ":limit" ? ":limit::int" : limit)})
${FAST_SELECT}`;
const CLAIM_FAST_LARGE = claimFastLarge(":limit");

/**
 * The large fast claim with its limit written in the text, for the sizes a prefetching worker's
 * refills come in (CLAIM_STEP): a prepared statement per size whose generic plan PostgreSQL keeps.
 * With the limit a parameter, the generic plan (the same plan) is costed for 10 % of the pending
 * rows instead of the limit, so the plan cache never chose it and planned the statement anew on
 * every claim: pg_stat_statements with track_planning, an in-process drain of 60,000 at c16 with
 * prefetch 500: 119 plans for 118 claims, 1.15 ms of planning each (~2.3 µs of server time per
 * task); with the limit written, 10 plans (the first five of each size). Eight alternating pairs of
 * such drains (`node dist/bench/drain.js --store pg --pairs 8 --base …`): 30.9 → 28.9 µs of server
 * CPU per task; the rate within the machine's noise (28.9k → 29.2k tasks/s; a second set of eight
 * 29.3k → 33.0k). The driver's refills come in multiples of CLAIM_STEP (spec §8.7).
 */
const claimFastLargeSized = bySize((n) => claimFastLarge(String(n)));
/** Sizes above this keep the limit a parameter: each written size is a prepared statement per connection. */
const MAX_WRITTEN_LIMIT = 4_096;

/**
 * Timer promotion (spec §3.4, bounded per call) and the expired leases, in one round trip: the
 * promotion is a data-modifying CTE, done whatever the SELECT returns, and its rows are visible to
 * the claim statements that follow in the same transaction. One statement fewer of the claim's
 * five (BEGIN, promote, expired, claim, COMMIT).
 */
export const PROMOTE_AND_EXPIRED = `
WITH ${PROMOTE_CTE}
SELECT id, locked_by, lease_until, attempts, max_attempts, abort_requested, owns FROM ${T}
WHERE status = 'running' AND lease_until <= :now AND queue = ANY(:queues) AND name = ANY(:names)
ORDER BY lease_until LIMIT :limit FOR UPDATE SKIP LOCKED`;

export const CLAIM_ONE = `UPDATE ${T} t SET ${CLAIM_SET} WHERE t.id = :id AND ${T_READY} RETURNING ${T_CLAIM_COLUMNS}`;

export const LIST_READY = `
SELECT * FROM ${T} WHERE queue = :queue AND ${READY}
ORDER BY (status = 'running'), order_key, id LIMIT :limit`;
