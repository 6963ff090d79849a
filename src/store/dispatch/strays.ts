/**
 * Strays and operator wakes (spec §20.26). A stray is a settled attempt whose
 * session was not known to be stopped (a give-up, or a spawn that may have
 * landed after the attempt settled); the runner keeps looking for it and
 * stopping it until it is, or until the session is forgotten.
 */
import { one, type Program, q } from "../tree/program.js";
import { A, event } from "./items.js";
import { type AttemptRow, toAttempt } from "./rows.js";

/**
 * The strays to look for (spec §20.26): settled, session not known stopped, and either not forgotten,
 * or forgotten but ended after `since` (a spawn that landed after its attempt was forgotten is
 * still found by its spawn name, stopped and forgotten). At most `limit`, oldest first.
 */
export function* strays(limit: number, since: number): Program<AttemptRow[]> {
  const rows = yield* q(
    `SELECT * FROM ${A} WHERE ended_at IS NOT NULL AND session_stopped = 0
       AND (forgotten = 0 OR ended_at > CAST(:since AS bigint))
     ORDER BY id LIMIT :limit`,
    { limit, since },
  );
  return rows.map(toAttempt);
}

/** The stray's session was found (by its spawn name): bind it to the settled attempt, if none was. */
export function* bindStray(id: string, session: string): Program<boolean> {
  const r = yield* q(
    `UPDATE ${A} SET session = :session, updated_at = :now
     WHERE id = CAST(:id AS bigint) AND ended_at IS NOT NULL AND session IS NULL RETURNING id`,
    { id, session },
  );
  if (r.length === 1) yield* event(id, "stray-found", { session });
  return r.length === 1;
}

/** The stray's session is seen stopped (ended, suspended or absent): it is a stray no more. */
export function* strayStopped(id: string, seen: string): Program<boolean> {
  const r = yield* q(
    `UPDATE ${A} SET session_stopped = 1, updated_at = :now
     WHERE id = CAST(:id AS bigint) AND ended_at IS NOT NULL AND session_stopped = 0 RETURNING id`,
    { id },
  );
  if (r.length === 1) yield* event(id, "stray-stopped", { seen });
  return r.length === 1;
}

/**
 * An operator (or a message for the item) asks a sleeping attempt to wake
 * (spec §20.6): the wake is requested, and the runner takes a seat for it,
 * or goes over the cap after `seatlessSeconds`. Returns the attempt, or null
 * when it is not sleeping. Bumps the version: a stale action changes nothing.
 */
export function* requestWake(id: string, by: string): Program<AttemptRow | null> {
  const r = yield* one(
    `UPDATE ${A} SET wake_requested_at = :now, version = version + 1, updated_at = :now
     WHERE id = CAST(:id AS bigint) AND ended_at IS NULL AND state = 'sleeping' AND wake_requested_at IS NULL RETURNING *`,
    { id },
  );
  if (!r) return null;
  yield* event(String(r.id), "wake-requested", { by });
  return toAttempt(r);
}
