/**
 * The outbox's read and delivery side (spec §21.5–§21.12), programs for both
 * backends: the facts after a cursor, a destination's lease, its guarded
 * cursor advance, its failure and dead-letter record, and the prune.
 *
 * The store decides nothing here: whether to send, how long to back off and
 * when to dead-letter are the sender's pure decisions (src/core/outbox.ts);
 * these programs apply them with conditional writes.
 */
import { one, type Program, q } from "../tree/program.js";
import { O } from "./facts.js";

export const D = "{s}.ratchet_outbox_destinations";

/** A stored fact (spec §21.1): its id is derived from its seq, so it never changes. */
export interface FactRow {
  readonly id: string;
  readonly seq: string;
  readonly type: string;
  readonly subject: string;
  readonly at: number;
  readonly data: unknown;
}

export type DestinationState = "ok" | "retrying" | "dead";

/** A destination's row (spec §21.6). Secrets are never stored here: a sink's configuration stays in code. */
export interface DestinationRow {
  readonly name: string;
  /** The last seq delivered or passed over by the destination's filter. */
  readonly cursor: string;
  readonly holder: string | null;
  readonly leaseUntil: number | null;
  readonly state: DestinationState;
  /** Failed deliveries of the head batch since the last success. */
  readonly failures: number;
  /** When the destination started retrying (or was dead-lettered). */
  readonly since: number | null;
  /** No delivery is tried before this instant. */
  readonly nextAt: number | null;
  readonly lastError: string | null;
  /** The batch that was dead-lettered (its id), while `dead`. */
  readonly deadBatch: string | null;
  readonly lastOkAt: number | null;
  /** Facts delivered, batches delivered and failed deliveries, since the destination was first seen. */
  readonly delivered: number;
  readonly batches: number;
  readonly failed: number;
  readonly createdAt: number;
  readonly updatedAt: number;
}

const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

export function toFact(r: Record<string, unknown>): FactRow {
  const seq = String(r.seq);
  return {
    id: `fact_${seq}`,
    seq,
    type: String(r.type),
    subject: String(r.subject),
    at: Number(r.at),
    data: JSON.parse(String(r.data)),
  };
}

export function toDestination(r: Record<string, unknown>): DestinationRow {
  return {
    name: String(r.name),
    cursor: String(r.cursor),
    holder: r.holder === null ? null : String(r.holder),
    leaseUntil: num(r.lease_until),
    state: r.state as DestinationState,
    failures: Number(r.failures),
    since: num(r.since),
    nextAt: num(r.next_at),
    lastError: r.last_error === null ? null : String(r.last_error),
    deadBatch: r.dead_batch === null ? null : String(r.dead_batch),
    lastOkAt: num(r.last_ok_at),
    delivered: Number(r.delivered),
    batches: Number(r.batches),
    failed: Number(r.failed),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

/** Facts with seq > `after`, ascending, at most `limit`. */
export function* readFacts(after: string, limit: number): Program<FactRow[]> {
  const rows = yield* q(`SELECT * FROM ${O} WHERE seq > CAST(:after AS bigint) ORDER BY seq LIMIT :limit`, {
    after,
    limit,
  });
  return rows.map(toFact);
}

/** The newest seq (0 when empty) and the transaction's clock. */
export function* head(): Program<{ seq: string; now: number }> {
  const r = yield* one<{ seq: unknown; now: unknown }>(
    `SELECT coalesce(max(seq), 0) AS seq, :now AS now FROM ${O}`,
  );
  return { seq: String(r?.seq ?? 0), now: Number(r?.now) };
}

/**
 * Registers a destination if it is new (spec §21.6): its cursor starts before
 * every retained fact (`start`) or at the newest one (`end`). An existing
 * destination keeps its cursor and status.
 */
export function* ensureDestination(name: string, from: "start" | "end"): Program<DestinationRow> {
  const cursor = from === "start" ? "0" : (yield* head()).seq;
  yield* q(
    `INSERT INTO ${D} (name, cursor, state, failures, delivered, batches, failed, created_at, updated_at)
     VALUES (:name, CAST(:cursor AS bigint), 'ok', 0, 0, 0, 0, :now, :now) ON CONFLICT (name) DO NOTHING`,
    { name, cursor },
  );
  const r = yield* one(`SELECT * FROM ${D} WHERE name = :name`, { name });
  return toDestination(r!);
}

/**
 * Leases a destination to `holder` for `leaseMs` (spec §21.7): if nobody
 * holds it, its lease ran out, or `holder` holds it already (a renewal).
 * Returns the row and the transaction's clock, or null if another sender
 * holds it (or it is unknown).
 * Invariant: at most one sender whose lease runs holds a destination.
 */
export function* leaseDestination(
  name: string,
  holder: string,
  leaseMs: number,
): Program<{ row: DestinationRow; now: number } | null> {
  const r = yield* one(
    `UPDATE ${D} SET holder = :holder, lease_until = :now + CAST(:lease AS bigint)
     WHERE name = :name AND (holder IS NULL OR holder = :holder OR lease_until <= :now)
     RETURNING *, :now AS now_ms`,
    { name, holder, lease: leaseMs },
  );
  return r ? { row: toDestination(r), now: Number(r.now_ms) } : null;
}

/** The guard of every write a sender makes: it still holds the lease, and the cursor is where it read it. */
const HELD = "name = :name AND holder = :holder AND cursor = CAST(:from AS bigint)";

/**
 * Moves a destination's cursor from `from` to `to` after its sink accepted a
 * batch of `facts` facts (or passed over facts its filter does not take,
 * with `facts` 0), and clears its failure state (spec §21.8).
 * Invariant: refused (false) unless `holder` holds the lease and the cursor
 * is still at `from`; a sender that lost its lease never moves a cursor.
 */
export function* advanceCursor(
  name: string,
  holder: string,
  from: string,
  to: string,
  facts: number,
): Program<boolean> {
  const delivered = facts > 0 ? 1 : 0;
  const rows = yield* q(
    `UPDATE ${D} SET cursor = CAST(:to AS bigint), updated_at = :now,
       state = CASE WHEN :delivered = 1 THEN 'ok' ELSE state END,
       failures = CASE WHEN :delivered = 1 THEN 0 ELSE failures END,
       since = CASE WHEN :delivered = 1 THEN NULL ELSE since END,
       next_at = CASE WHEN :delivered = 1 THEN NULL ELSE next_at END,
       last_error = CASE WHEN :delivered = 1 THEN NULL ELSE last_error END,
       last_ok_at = CASE WHEN :delivered = 1 THEN :now ELSE last_ok_at END,
       delivered = delivered + CAST(:facts AS bigint), batches = batches + :delivered
     WHERE ${HELD} RETURNING name`,
    { name, holder, from, to, facts, delivered },
  );
  return rows.length === 1;
}

/** A failed delivery as the sender decided it (spec §21.9, §21.10). */
export interface FailureWrite {
  /** Retry after this many ms, or dead-letter. */
  readonly next:
    | { readonly kind: "retry"; readonly delayMs: number }
    | { readonly kind: "dead"; readonly batch: string };
  /** The error's text, already free of secrets and bounded. */
  readonly error: string;
}

/**
 * Records a failed delivery (spec §21.9, §21.10): retrying since the first
 * failure with the next try after the delay, or dead-lettered with the batch.
 * Invariant: guarded like advanceCursor; the cursor does not move.
 */
export function* recordFailure(
  name: string,
  holder: string,
  from: string,
  f: FailureWrite,
): Program<boolean> {
  const dead = f.next.kind === "dead";
  const rows = yield* q(
    `UPDATE ${D} SET state = :state, failures = failures + 1, failed = failed + 1,
       since = coalesce(since, :now), last_error = :error, updated_at = :now,
       next_at = CASE WHEN :dead = 1 THEN NULL ELSE :now + CAST(:delay AS bigint) END,
       dead_batch = CAST(:batch AS text)
     WHERE ${HELD} RETURNING name`,
    {
      name,
      holder,
      from,
      state: dead ? "dead" : "retrying",
      dead: dead ? 1 : 0,
      error: f.error,
      delay: f.next.kind === "retry" ? f.next.delayMs : 0,
      batch: f.next.kind === "dead" ? f.next.batch : null,
    },
  );
  return rows.length === 1;
}

/** Gives a destination's lease back, so another sender may take it at once. */
export function* releaseDestination(name: string, holder: string): Program<void> {
  yield* q(`UPDATE ${D} SET holder = NULL, lease_until = NULL WHERE name = :name AND holder = :holder`, {
    name,
    holder,
  });
}

/**
 * An operator's retry (spec §21.11): a dead or retrying destination is tried
 * again at once, its failure count reset, its head batch unchanged. Null if
 * the destination is unknown.
 */
export function* retryDestination(name: string): Program<DestinationRow | null> {
  const r = yield* one(
    `UPDATE ${D} SET state = CASE WHEN state = 'dead' THEN 'retrying' ELSE state END, failures = 0,
       since = CASE WHEN state = 'ok' THEN since ELSE :now END, next_at = NULL, dead_batch = NULL, updated_at = :now
     WHERE name = :name RETURNING *`,
    { name },
  );
  return r ? toDestination(r) : null;
}

export function* listDestinations(limit: number): Program<DestinationRow[]> {
  const rows = yield* q(`SELECT * FROM ${D} ORDER BY name LIMIT :limit`, { limit });
  return rows.map(toDestination);
}

/** A destination's backlog (spec §21.12): facts after its cursor (counted up to `cap`) and the oldest one's instant. */
export function* backlog(cursor: string, cap: number): Program<{ facts: number; oldestAt: number | null }> {
  const n = yield* one<{ n: unknown }>(
    `SELECT count(*) AS n FROM (SELECT seq FROM ${O} WHERE seq > CAST(:cursor AS bigint) ORDER BY seq LIMIT :cap) AS b`,
    { cursor, cap },
  );
  const first = yield* one<{ at: unknown }>(
    `SELECT at FROM ${O} WHERE seq > CAST(:cursor AS bigint) ORDER BY seq LIMIT 1`,
    { cursor },
  );
  return { facts: Number(n?.n ?? 0), oldestAt: first ? Number(first.at) : null };
}

/**
 * Deletes at most `limit` facts that every known destination has passed and
 * that are older than `retentionMs` (spec §21.13); with no destination known,
 * by age alone. Returns how many it deleted.
 * Invariant: a fact some destination has not passed is never deleted.
 */
export function* pruneFacts(retentionMs: number, limit: number): Program<number> {
  const rows = yield* q(
    `DELETE FROM ${O} WHERE seq IN (
       SELECT seq FROM ${O}
       WHERE seq <= coalesce((SELECT min(cursor) FROM ${D}), 9007199254740991)
         AND at < :now - CAST(:retention AS bigint)
       ORDER BY seq LIMIT :limit)
     RETURNING seq`,
    { retention: retentionMs, limit },
  );
  return rows.length;
}

/** Forgets a destination (spec §21.13): it no longer holds facts back from the prune. */
export function* removeDestination(name: string): Program<boolean> {
  const rows = yield* q(`DELETE FROM ${D} WHERE name = :name RETURNING name`, { name });
  return rows.length === 1;
}
