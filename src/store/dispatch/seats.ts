/**
 * Seats, capacity backoff, wakes and forgetting (spec §20.6, §20.14,
 * §20.21), as programs both stores run in one transaction each.
 */
import { attemptMoved } from "../../core/dispatch/facts.js";
import type { KeptSession } from "../../core/dispatch/sessions.js";
import { appendFacts } from "../outbox/facts.js";
import { one, type Program, q } from "../tree/program.js";
import { casKept } from "./attempts.js";
import { A, event, HOLDS_SEAT, I, SEATS } from "./items.js";
import { type AttemptRow, type ItemRow, type SeatRow, toAttempt, toItem } from "./rows.js";

/** Sets (or with null removes) a worker kind's seat limit for every runner of the store. */
export function* setSeatLimit(worker: string, limit: number | null): Program<void> {
  yield* q(
    `INSERT INTO ${SEATS} (worker, seat_limit, refusals) VALUES (:worker, :limit, 0)
     ON CONFLICT (worker) DO UPDATE SET seat_limit = excluded.seat_limit`,
    { worker, limit },
  );
}

export function* seats(): Program<SeatRow[]> {
  const rows = yield* q<Record<string, unknown>>(
    `SELECT s.worker, s.seat_limit, s.refusals, s.backoff_until,
       (SELECT count(*) FROM ${A} a WHERE a.worker = s.worker AND a.${HOLDS_SEAT.replace("AND state", "AND a.state")}) AS held
     FROM ${SEATS} s ORDER BY s.worker`,
  );
  return rows.map((r) => ({
    worker: r.worker as string,
    limit: r.seat_limit === null ? null : Number(r.seat_limit),
    held: Number(r.held),
    refusals: Number(r.refusals),
    backoffUntil: r.backoff_until === null ? null : Number(r.backoff_until),
  }));
}

/**
 * Records a capacity refusal of a worker kind (spec §20.6): its count goes
 * up and no attempt of the kind starts until `now + delayFor(count)`.
 * Returns the instant the backoff ends.
 */
export function* noteCapacityRefusal(
  worker: string,
  delayFor: (refusals: number) => number,
): Program<number> {
  const r = yield* one<{ refusals: number; t: number }>(
    `INSERT INTO ${SEATS} (worker, seat_limit, refusals) VALUES (:worker, NULL, 1)
     ON CONFLICT (worker) DO UPDATE SET refusals = ${SEATS}.refusals + 1 RETURNING refusals, :now AS t`,
    { worker },
  );
  const until = Number(r!.t) + Math.max(0, Math.round(delayFor(Number(r!.refusals))));
  yield* q(`UPDATE ${SEATS} SET backoff_until = CAST(:until AS bigint) WHERE worker = :worker`, {
    worker,
    until,
  });
  return until;
}

/** A start went through: the kind's refusals start counting from zero again. */
export function* clearCapacityRefusals(worker: string): Program<void> {
  yield* q(`UPDATE ${SEATS} SET refusals = 0, backoff_until = NULL WHERE worker = :worker AND refusals > 0`, {
    worker,
  });
}

/**
 * Takes a seat for a sleeping attempt's wake (spec §20.6): `sleeping` →
 * `waking` with `wokenAt = now`, if a seat of its kind is free or `overCap`.
 * Guarded like every move; `seat_full` changes nothing.
 * Invariant: a wake takes a seat beyond the limit only when asked over the cap.
 */
export function* wakeAttempt(
  g: { id: string; version: number; holder: string },
  defaultSeats: number | null,
  overCap: boolean,
): Program<{ kind: "woken"; attempt: AttemptRow } | { kind: "seat_full" } | { kind: "stale" }> {
  const a = yield* one(`SELECT worker FROM ${A} WHERE id = CAST(:id AS bigint)`, { id: g.id });
  if (!a) return { kind: "stale" };
  const worker = a.worker as string;
  yield { op: "lock", key: `dispatch-seat:${worker}` };
  if (!overCap) {
    const seat = yield* one<{ seat_limit: number | null }>(
      `SELECT seat_limit FROM ${SEATS} WHERE worker = :worker`,
      {
        worker,
      },
    );
    const limit = seat && seat.seat_limit !== null ? Number(seat.seat_limit) : defaultSeats;
    if (limit !== null) {
      const held = yield* one<{ n: number }>(
        `SELECT count(*) AS n FROM ${A} WHERE worker = :worker AND ${HOLDS_SEAT}`,
        {
          worker,
        },
      );
      if (Number(held!.n) >= limit) return { kind: "seat_full" };
    }
  }
  const r = yield* one(
    `UPDATE ${A} SET state = 'waking', woken_at = :now, version = version + 1, updated_at = :now
     WHERE id = CAST(:id AS bigint) AND version = CAST(:version AS bigint) AND holder = :holder
       AND ended_at IS NULL AND state = 'sleeping' RETURNING *`,
    g,
  );
  if (!r) return { kind: "stale" };
  const woken = toAttempt(r);
  yield* event(woken.id, "move", { to: "waking", overCap });
  yield* appendFacts([attemptMoved(woken, "sleeping")]); // spec §21.4
  return { kind: "woken", attempt: woken };
}

/** Items holding a kept session, with the latest attempt each session carries (spec §20.14). */
export function* keptSessions(limit: number): Program<{ item: ItemRow; latest: AttemptRow | null }[]> {
  const items = (yield* q(`SELECT * FROM ${I} WHERE kept IS NOT NULL ORDER BY id LIMIT :limit`, {
    limit,
  })).map(toItem);
  const out: { item: ItemRow; latest: AttemptRow | null }[] = [];
  for (const item of items) {
    const r = yield* one(`SELECT * FROM ${A} WHERE session = :s ORDER BY id DESC LIMIT 1`, {
      s: item.kept!.session,
    });
    out.push({ item, latest: r ? toAttempt(r) : null });
  }
  return out;
}

/**
 * Settled attempts that ended at or before `cutoff`, not forgotten and not
 * kept, whose session no live or kept attempt carries (a revived kept
 * session is shared by the attempts it served). spec §20.14.
 */
export function* sessionsToForget(cutoff: number, limit: number): Program<AttemptRow[]> {
  const rows = yield* q(
    `SELECT * FROM ${A} a WHERE a.ended_at IS NOT NULL AND a.forgotten = 0 AND a.ended_at <= CAST(:cutoff AS bigint)
       AND NOT EXISTS (SELECT 1 FROM ${I} i WHERE i.kept_attempt = a.id)
       AND NOT EXISTS (SELECT 1 FROM ${A} b WHERE b.session = a.session AND b.id <> a.id
                         AND (b.ended_at IS NULL OR EXISTS (SELECT 1 FROM ${I} j WHERE j.kept_attempt = b.id)))
     ORDER BY a.ended_at LIMIT :limit`,
    { cutoff, limit },
  );
  return rows.map(toAttempt);
}

/**
 * The worker confirmed a forget (spec §20.14): the attempt is marked
 * forgotten and, when the session was kept, the item's slot is cleared if
 * it still holds that session (even when the attempt was marked already).
 */
export function* markForgotten(
  attemptId: string,
  kept: { itemId: string; session: KeptSession } | null,
): Program<boolean> {
  const moved = yield* q(
    `UPDATE ${A} SET forgotten = 1, updated_at = :now WHERE id = CAST(:id AS bigint) AND ended_at IS NOT NULL AND forgotten = 0
     RETURNING id`,
    { id: attemptId },
  );
  if (moved.length === 1) yield* event(attemptId, "forgotten", null);
  if (kept) yield* casKept(kept.itemId, kept.session, null);
  return moved.length === 1;
}
