/**
 * floor-pg's statements: the peers harness's floor (bench/peers/floor.ts) and `drain.js --floor` run
 * these, so that both measure the same floor. `t` is the quoted table name.
 */

/** What fillFloorPg needs of a client (a pg.Client; this module imports no driver). */
interface Querier {
  query(text: string, values?: unknown[]): Promise<unknown>;
}

/**
 * A new schema with floor-pg's table (or, of kind "lease", floor-lease-pg's) holding `n` jobs (a
 * multiple of 1,000; payloads shaped like the harness's), vacuumed and analyzed: drain.js --floor
 * and --lean, pgshape's floor-pg variant and claimshape's floor-lease variant start from it.
 */
export async function fillFloorPg(
  c: Querier,
  schema: string,
  n: number,
  kind: "plain" | "lease" = "plain",
): Promise<void> {
  const lease = kind === "lease";
  const t = `"${schema}".floor_jobs`;
  await c.query(`CREATE SCHEMA "${schema}"`);
  for (const sql of lease ? floorLeaseSchema(t) : floorPgSchema(t)) await c.query(sql);
  for (let i = 0; i < n; i += 1_000)
    await c.query(lease ? floorLeaseInsert(t) : floorPgInsert(t), [
      Array.from({ length: 1_000 }, (_, j) => JSON.stringify({ seq: i + j, enqueuedAt: Date.now() })),
    ]);
  await c.query(`VACUUM ANALYZE ${t}`);
}

/** The table and its one partial index of pending jobs. */
export const floorPgSchema = (t: string): string[] => [
  `CREATE TABLE ${t} (id bigserial PRIMARY KEY, payload text NOT NULL, status smallint NOT NULL DEFAULT 0, locked_by text)`,
  `CREATE INDEX ON ${t} (id) WHERE status = 0`,
];

/** A batch of jobs, $1 the payloads. */
export const floorPgInsert = (t: string): string => `INSERT INTO ${t} (payload) SELECT unnest($1::text[])`;

/**
 * A claim of up to `limit` ($1 the holder). `id = ANY(ARRAY(…))`: the locked ids come from an init
 * plan and the update finds them by primary key. As `id IN (SELECT …)` the planner joined the
 * subquery to a scan of the whole table on every claim (EXPLAIN: Hash Semi Join over a Seq Scan; 4.1
 * against 2.4 ms for a claim of 500 of 20,000), which held the floor ~2× below what the store allows
 * (in-process, 60,000 jobs: 47k jobs/s and 23 µs of server CPU per job).
 */
export const floorPgClaim = (t: string, limit: number): string =>
  `UPDATE ${t} SET status = 1, locked_by = $1 WHERE id = ANY(ARRAY(
     SELECT id FROM ${t} WHERE status = 0 ORDER BY id LIMIT ${limit} FOR UPDATE SKIP LOCKED)) RETURNING id, payload`;

/** The completion of a claimed batch, $1 its ids. */
export const floorPgComplete = (t: string): string =>
  `UPDATE ${t} SET status = 2 WHERE id = ANY($1::bigint[])`;

/**
 * floor-lease-pg: floor-pg plus what Ratchet's rules ask of every claim and completion, and nothing
 * else of Ratchet's. The claim takes the due jobs of a queue in claim order (spec §3.5: a queue, an
 * order key, the id), counts the attempt (§5), raises the fencing epoch (§3.7) and sets a lease that
 * expires (§3.2), found again by its own partial index (§3.3: an expired lease is reclaimed); the
 * completion is fenced by that epoch and keeps the job's row with its result and end time (§4.3).
 * No retries, events, counters, trees, flow control or dedupe. The gap between floor-pg and this is
 * what the promises cost the store; the gap between this and Ratchet is Ratchet's own.
 */
export const floorLeaseSchema = (t: string): string[] => [
  `CREATE TABLE ${t} (id bigserial PRIMARY KEY, queue text NOT NULL DEFAULT 'default', order_key bigint NOT NULL,
     payload text NOT NULL, status smallint NOT NULL DEFAULT 0, attempts integer NOT NULL DEFAULT 0,
     epoch integer NOT NULL DEFAULT 0, max_ms bigint NOT NULL DEFAULT 60000, lease_until bigint, locked_by text,
     claimed_at bigint, result text, ended_at bigint)`,
  `CREATE INDEX ON ${t} (queue, order_key, id) WHERE status = 0`,
  `CREATE INDEX ON ${t} (lease_until) WHERE status = 1`,
];

/** A batch of jobs, $1 the payloads; the order key is the enqueue time, as Ratchet's at priority 0. */
export const floorLeaseInsert = (t: string): string =>
  `INSERT INTO ${t} (order_key, payload) SELECT (extract(epoch from now()) * 1000)::bigint, unnest($1::text[])`;

/**
 * A claim of up to `limit` ($1 the holder, $2 the time in ms), returning each job's fence (its epoch
 * and the claim's time). Its commit does not wait for the flush, as Ratchet's fast claim (spec §13.8).
 */
export const floorLeaseClaim = (t: string, limit: number): string =>
  `UPDATE ${t} SET status = 1, locked_by = $1, attempts = attempts + 1, epoch = epoch + 1,
     lease_until = $2::bigint + max_ms, claimed_at = $2::bigint
   WHERE id = ANY(ARRAY(SELECT id FROM ${t} WHERE queue = 'default' AND status = 0
     ORDER BY order_key, id LIMIT ${limit} FOR UPDATE SKIP LOCKED))
     AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
   RETURNING id, epoch, claimed_at, payload`;

/**
 * The fenced completion of a claimed batch: $1 its ids ascending, $2 their epochs, $3 the time, $4
 * their claims' times (spec §3.7). Each row finds its fence by binary search (width_bucket over the
 * sorted ids), as Ratchet's does.
 */
export const floorLeaseComplete = (t: string): string =>
  `UPDATE ${t} SET status = 2, result = 'null', ended_at = $3::bigint, lease_until = NULL, locked_by = NULL
   WHERE id = ANY($1::bigint[]) AND status = 1 AND epoch = ($2::int[])[width_bucket(id, $1::bigint[])]
     AND claimed_at = ($4::bigint[])[width_bucket(id, $1::bigint[])]`;
