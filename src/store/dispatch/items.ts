/**
 * Item programs (spec §20.18–§20.19): add, read, list, close, and the
 * start of an attempt with its seat check. Written once (see
 * ../tree/program.ts); each runs in one transaction on either store.
 */
import { attemptMoved, itemMoved } from "../../core/dispatch/facts.js";
import type { AttemptMode, AttemptState } from "../../core/dispatch/model.js";
import type { ItemState } from "../../core/dispatch/sessions.js";
import { appendFacts } from "../outbox/facts.js";
import { one, type Program, q } from "../tree/program.js";
import { type AttemptRow, type ItemRow, toAttempt, toItem } from "./rows.js";

export const I = "{s}.ratchet_dispatch_items";
export const A = "{s}.ratchet_dispatch_attempts";
export const E = "{s}.ratchet_dispatch_events";
export const SEATS = "{s}.ratchet_dispatch_seats";
/** An attempt holds a seat in every live state but sleeping (spec §20.6). */
export const HOLDS_SEAT = "ended_at IS NULL AND state <> 'sleeping'";

/** The most events an attempt's timeline keeps (spec §20.18); later ones are dropped, but `settled` always lands. */
export const MAX_EVENTS_PER_ATTEMPT = 1_000;

/**
 * Appends to an attempt's timeline, unless it holds MAX_EVENTS_PER_ATTEMPT
 * already (a session that ignores stop for half an hour would otherwise add
 * one per pass). The settlement is always recorded.
 */
export function* event(attemptId: string, kind: string, detail: unknown): Program<void> {
  yield* q(
    `INSERT INTO ${E} (attempt_id, at, kind, detail)
     SELECT CAST(:a AS bigint), :now, :kind, :detail
     WHERE :kind = 'settled'
        OR (SELECT count(*) FROM (SELECT 1 FROM ${E} WHERE attempt_id = CAST(:a AS bigint) LIMIT :max) x) < :max`,
    {
      a: attemptId,
      kind,
      max: MAX_EVENTS_PER_ATTEMPT,
      detail: detail === null || detail === undefined ? null : JSON.stringify(detail),
    },
  );
}

export function* addItem(pipeline: string, step: string, input: string): Program<ItemRow> {
  const r = yield* one(
    `INSERT INTO ${I} (pipeline, step, state, input, taken, resume_next, created_at, updated_at)
     VALUES (:pipeline, :step, 'open', :input, '{}', 0, :now, :now) RETURNING *`,
    { pipeline, step, input },
  );
  const item = toItem(r!);
  yield* appendFacts([itemMoved(item, null)]); // spec §21.4
  return item;
}

export function* getItem(id: string): Program<ItemRow | null> {
  const r = yield* one(`SELECT * FROM ${I} WHERE id = CAST(:id AS bigint)`, { id });
  return r ? toItem(r) : null;
}

export interface ItemFilter {
  state?: ItemRow["state"] | null;
  pipeline?: string | null;
  /** Items with ids above this one (paging). */
  after?: string | null;
  limit: number;
}

export function* listItems(f: ItemFilter): Program<ItemRow[]> {
  const rows = yield* q(
    `SELECT * FROM ${I} WHERE (CAST(:state AS text) IS NULL OR state = :state)
       AND (CAST(:pipeline AS text) IS NULL OR pipeline = :pipeline) AND id > CAST(:after AS bigint)
     ORDER BY id LIMIT :limit`,
    { state: f.state ?? null, pipeline: f.pipeline ?? null, after: f.after ?? "0", limit: f.limit },
  );
  return rows.map(toItem);
}

/**
 * Closes an item (spec §20.19): open or running items only; every live
 * attempt not closing yet moves to `closing` for `item-closed`, its version
 * bumped, so a runner's action computed before the close changes nothing.
 */
export function* closeItem(id: string): Program<{ item: ItemRow; closing: string[] } | null> {
  // spec §21.4: the states it moves from, read with the rows locked.
  const was = yield* one<{ step: string; state: ItemState }>(
    `SELECT step, state FROM ${I} WHERE id = CAST(:id AS bigint) AND state IN ('open', 'running') @update`,
    { id },
  );
  if (!was) return null;
  const from = new Map(
    (yield* q<{ id: unknown; state: AttemptState }>(
      `SELECT id, state FROM ${A} WHERE item_id = CAST(:id AS bigint) AND ended_at IS NULL AND state <> 'closing' @update`,
      { id },
    )).map((x) => [String(x.id), x.state]),
  );
  const r = yield* one(
    `UPDATE ${I} SET state = 'closed', ended_at = :now, updated_at = :now
     WHERE id = CAST(:id AS bigint) AND state IN ('open', 'running') RETURNING *`,
    { id },
  );
  if (!r) return null;
  const moved = (yield* q(
    `UPDATE ${A} SET state = 'closing', closing = 'item-closed', closing_at = :now, version = version + 1, updated_at = :now
     WHERE item_id = CAST(:id AS bigint) AND ended_at IS NULL AND state <> 'closing' RETURNING *`,
    { id },
  )).map(toAttempt);
  for (const m of moved) yield* event(m.id, "move", { to: "closing", cause: "item-closed" });
  const item = toItem(r);
  yield* appendFacts([itemMoved(item, was), ...moved.map((m) => attemptMoved(m, from.get(m.id) ?? null))]);
  return { item, closing: moved.map((m) => m.id) };
}

/**
 * Moves an open item from the step it was read at to another step (spec
 * §20.30): the compare-and-set is on state `open` and step `from`, so a move
 * decided from a stale read (the item started, closed or moved meanwhile)
 * changes nothing and returns null.
 */
export function* moveItem(id: string, from: string, to: string): Program<ItemRow | null> {
  const r = yield* one(
    `UPDATE ${I} SET step = :to, pr_wait = NULL, updated_at = :now
     WHERE id = CAST(:id AS bigint) AND state = 'open' AND step = :from RETURNING *`,
    { id, from, to },
  );
  if (!r) return null;
  const item = toItem(r);
  yield* appendFacts([itemMoved(item, { step: from, state: "open" })]); // spec §21.4
  return item;
}

/** Archives a done or closed item (spec §20.19): it leaves the board; its kept session becomes due. */
export function* archiveItem(id: string): Program<ItemRow | null> {
  const was = yield* one<{ step: string; state: ItemState }>(
    `SELECT step, state FROM ${I} WHERE id = CAST(:id AS bigint) AND state IN ('done', 'closed') @update`,
    { id },
  );
  if (!was) return null;
  const r = yield* one(
    `UPDATE ${I} SET state = 'archived', updated_at = :now WHERE id = CAST(:id AS bigint) AND state IN ('done', 'closed') RETURNING *`,
    { id },
  );
  if (!r) return null;
  const item = toItem(r);
  yield* appendFacts([itemMoved(item, was)]); // spec §21.4
  return item;
}

export interface StartSpec {
  readonly itemId: string;
  /** The step the runner saw the item at: a moved item is not started (stale). */
  readonly phase: string;
  readonly worker: string;
  readonly mode: AttemptMode;
  /** The seat limit of the worker kind when the store has none set (null: no limit). */
  readonly defaultSeats: number | null;
  readonly holder: string;
  readonly leaseMs: number;
  /** The spawn request (JSON) for the new attempt's id. */
  readonly spawnFor: (attemptId: string) => string;
}

export type StartResult =
  | { readonly kind: "started"; readonly attempt: AttemptRow; readonly item: ItemRow }
  | { readonly kind: "stale" }
  | { readonly kind: "seat_full"; readonly held: number; readonly limit: number }
  | { readonly kind: "backoff"; readonly until: number }
  | { readonly kind: "not_before"; readonly until: number }
  | { readonly kind: "pr_wait" };

/**
 * Starts an attempt for an open item (spec §20.6, §20.19): the item must
 * still be open at `phase`; the worker kind must not be backing off after a
 * capacity refusal; and a seat must be free. The seat check and the insert
 * hold the kind's lock (PostgreSQL; SQLite's write transaction already
 * serialises), so two runners cannot both take the last seat.
 * Invariant: at most `limit` attempts of a kind hold seats, counting every
 * store's runners, except wakes over the cap (spec §20.6).
 */
export function* startAttempt(s: StartSpec): Program<StartResult> {
  yield { op: "lock", key: `dispatch-seat:${s.worker}` };
  const item = yield* one(
    `SELECT * FROM ${I} WHERE id = CAST(:id AS bigint) AND state = 'open' AND step = :phase @update`,
    { id: s.itemId, phase: s.phase },
  );
  if (!item) return { kind: "stale" };
  const now = Number((yield* one<{ t: number }>("SELECT :now AS t"))!.t);
  // spec §20.29: an item waiting for a usage limit to reset starts nothing before then.
  if (item.not_before != null && Number(item.not_before) > now)
    return { kind: "not_before", until: Number(item.not_before) };
  // spec §22.7: an item waiting on its pull request starts nothing until the wait ends.
  if (item.pr_wait != null) return { kind: "pr_wait" };
  const seat = yield* one<{ seat_limit: number | null; backoff_until: number | null }>(
    `SELECT seat_limit, backoff_until FROM ${SEATS} WHERE worker = :worker`,
    { worker: s.worker },
  );
  if (seat?.backoff_until != null && Number(seat.backoff_until) > now)
    return { kind: "backoff", until: Number(seat.backoff_until) };
  const limit = seat && seat.seat_limit !== null ? Number(seat.seat_limit) : s.defaultSeats;
  if (limit !== null) {
    const held = Number(
      (yield* one<{ n: number }>(`SELECT count(*) AS n FROM ${A} WHERE worker = :worker AND ${HOLDS_SEAT}`, {
        worker: s.worker,
      }))!.n,
    );
    if (held >= limit) return { kind: "seat_full", held, limit };
  }
  const row = yield* one<{ id: number }>(
    `INSERT INTO ${A} (item_id, pipeline, phase, worker, mode, state, claimed_at, spawn, resume_fallback, forgotten,
       version, holder, lease_until, updated_at)
     VALUES (CAST(:item AS bigint), :pipeline, :phase, :worker, :mode, 'starting', :now, '', 0, 0, 0, :holder,
       :now + CAST(:lease AS bigint), :now) RETURNING id`,
    {
      item: s.itemId,
      pipeline: item.pipeline,
      phase: s.phase,
      worker: s.worker,
      mode: s.mode,
      holder: s.holder,
      lease: s.leaseMs,
    },
  );
  const id = String(row!.id);
  const a = yield* one(`UPDATE ${A} SET spawn = :spawn WHERE id = CAST(:id AS bigint) RETURNING *`, {
    id,
    spawn: s.spawnFor(id),
  });
  const it = yield* one(
    `UPDATE ${I} SET state = 'running', updated_at = :now WHERE id = CAST(:id AS bigint) RETURNING *`,
    {
      id: s.itemId,
    },
  );
  yield* event(id, "claimed", { phase: s.phase, worker: s.worker });
  const started = { kind: "started" as const, attempt: toAttempt(a!), item: toItem(it!) };
  // spec §21.4: the attempt is created `starting`, and its item leaves `open`.
  yield* appendFacts([
    attemptMoved(started.attempt, null),
    itemMoved(started.item, { step: String(item.step), state: "open" }),
  ]);
  return started;
}
