/**
 * Attempt programs (spec §20.18, §20.20): lease live attempts to one runner
 * at a time, move them with compare-and-set writes, settle them with their
 * item's route and kept session in one transaction, and read them back.
 */

import { attemptMoved, itemMoved } from "../../core/dispatch/facts.js";
import type {
  AttemptState,
  ClosingCause,
  ForcedFailure,
  LiveAttemptState,
} from "../../core/dispatch/model.js";
import type { ItemPrWait } from "../../core/dispatch/pulls.js";
import type { ItemState, KeptSession } from "../../core/dispatch/sessions.js";
import type { FactInput } from "../../core/outbox.js";
import { appendFacts } from "../outbox/facts.js";
import { releaseWait } from "../pulls/waits.js";
import { one, type Program, q } from "../tree/program.js";
import { A, E, event, I } from "./items.js";
import { type AttemptEvent, type AttemptRow, toAttempt, toEvent } from "./rows.js";

/** What a move names: the attempt, the version it read, and the runner holding it. */
export interface Guard {
  readonly id: string;
  readonly version: number;
  readonly holder: string;
}

export type MoveResult =
  | { readonly kind: "moved"; readonly attempt: AttemptRow }
  | { readonly kind: "stale" };

/** The fields a move may set (a fixed list: no column name comes from input). */
export interface AttemptPatch {
  readonly state?: LiveAttemptState;
  readonly startedAt?: number | null;
  readonly wokenAt?: number | null;
  readonly wakeRequestedAt?: number | null;
  readonly suspendRequestedAt?: number | null;
  readonly closingAt?: number | null;
  readonly closing?: ClosingCause | null;
  readonly session?: string | null;
  readonly resumeFallback?: boolean;
  readonly usageResetsAt?: number | null;
}

const COLUMNS: Readonly<Record<keyof AttemptPatch, string>> = {
  state: "state",
  startedAt: "started_at",
  wokenAt: "woken_at",
  wakeRequestedAt: "wake_requested_at",
  suspendRequestedAt: "suspend_requested_at",
  closingAt: "closing_at",
  closing: "closing",
  session: "session",
  resumeFallback: "resume_fallback",
  usageResetsAt: "usage_resets_at",
};
const BIGINTS = new Set([
  "started_at",
  "woken_at",
  "wake_requested_at",
  "suspend_requested_at",
  "closing_at",
  "usage_resets_at",
]);
const GUARD =
  "id = CAST(:id AS bigint) AND version = CAST(:version AS bigint) AND holder = :holder AND ended_at IS NULL";

/**
 * Leases up to `limit` live attempts to `holder` for `leaseMs`: those no
 * runner holds, whose lease ran out, or that `holder` holds already, the
 * least recently leased first. On PostgreSQL rows another runner is leasing
 * right now are skipped.
 * spec §20.20.
 * Invariant: a live attempt is held by at most one runner whose lease runs.
 */
export function* leaseAttempts(holder: string, leaseMs: number, limit: number): Program<AttemptRow[]> {
  const rows = yield* q(
    `UPDATE ${A} SET holder = :holder, lease_until = :now + CAST(:lease AS bigint)
     WHERE id IN (SELECT id FROM ${A} WHERE ended_at IS NULL
                    AND (holder IS NULL OR holder = :holder OR lease_until IS NULL OR lease_until <= :now)
                  ORDER BY coalesce(lease_until, 0), id LIMIT :limit @skip)
     RETURNING *`,
    { holder, lease: leaseMs, limit },
  );
  return rows.map(toAttempt).sort((a, b) => Number(a.id) - Number(b.id));
}

/**
 * Gives back the attempts `holder` holds (at the end of a pass), so another
 * runner may take them at once. `lease_until` stays as when it was last
 * leased: leases go to the least recently leased attempts first, so a
 * runner whose batch is smaller than the live attempts still reaches all.
 */
export function* releaseAttempts(holder: string, ids: readonly string[]): Program<number> {
  const rows = yield* q(
    `UPDATE ${A} SET holder = NULL WHERE holder = :holder AND id IN @ids(ids) RETURNING id`,
    { holder, ids: ids.map(Number) },
  );
  return rows.length;
}

/**
 * Applies a move if the attempt is still as the runner read it (spec §20.3):
 * same version, still held by the runner, still live. Records the event.
 * Invariant: an action computed from a stale listing changes nothing.
 */
export function* moveAttempt(
  g: Guard,
  patch: AttemptPatch,
  detail: unknown,
  facts: readonly FactInput[] = [],
): Program<MoveResult> {
  // spec §21.4: the state it moves from, read under the same guard (and row lock) as the write.
  const before = patch.state
    ? yield* one<{ state: AttemptState }>(`SELECT state FROM ${A} WHERE ${GUARD} @update`, { ...g })
    : undefined;
  const sets: string[] = [];
  const p: Record<string, unknown> = { id: g.id, version: g.version, holder: g.holder };
  for (const [key, col] of Object.entries(COLUMNS) as [keyof AttemptPatch, string][]) {
    if (!(key in patch)) continue;
    const v = patch[key];
    p[`p_${col}`] = typeof v === "boolean" ? (v ? 1 : 0) : (v ?? null);
    sets.push(BIGINTS.has(col) ? `${col} = CAST(:p_${col} AS bigint)` : `${col} = :p_${col}`);
  }
  sets.push("version = version + 1", "updated_at = :now");
  const r = yield* one(`UPDATE ${A} SET ${sets.join(", ")} WHERE ${GUARD} RETURNING *`, p);
  if (!r) return { kind: "stale" };
  const a = toAttempt(r);
  yield* event(a.id, "move", detail);
  const moved = before && before.state !== a.state ? [attemptMoved(a, before.state)] : [];
  yield* appendFacts([...moved, ...facts]); // spec §21.2: with the move, or not at all
  return { kind: "moved", attempt: a };
}

export interface Settlement {
  readonly state: "succeeded" | "failed";
  readonly forced: ForcedFailure | null;
  readonly sessionStopped: boolean;
  /** The close-out read from the session (JSON), if any. */
  readonly closeout: string | null;
}

/** Where the item goes (spec §20.11): applied only while the item is still running. */
export interface ItemRoute {
  readonly step: string;
  readonly state: ItemState;
  readonly taken: Readonly<Record<string, number>>;
  readonly resumeNext: boolean;
  /** No attempt of the item starts before this instant (spec §20.29). */
  readonly notBefore: number | null;
  /** The item waits for its pull request before it moves on (spec §22.7); its state is then `open`. */
  readonly prWait?: ItemPrWait | null;
}

/** The kept-session write (spec §20.13): applied only if the item's slot still holds `expect`. */
export interface KeepWrite {
  readonly expect: KeptSession | null;
  readonly value: KeptSession;
}

/**
 * Settles an attempt, routes its item and writes its kept session, in one
 * transaction (spec §20.11, §20.13, §20.20). A stale guard changes nothing
 * at all; an item closed meanwhile stays closed; a kept slot that changed
 * since it was read is left alone.
 * Invariant: the attempt's end, its item's route and its kept session
 * commit together or not at all.
 */
export function* settleAttempt(
  g: Guard,
  s: Settlement,
  route: ItemRoute | null,
  keep: KeepWrite | null,
  detail: unknown,
  facts: readonly FactInput[] = [],
): Program<MoveResult & { kept?: boolean }> {
  const before = yield* one<{ state: AttemptState }>(`SELECT state FROM ${A} WHERE ${GUARD} @update`, {
    ...g,
  });
  if (!before) return { kind: "stale" };
  const r = yield* one(
    `UPDATE ${A} SET state = :state, ended_at = :now, forced = :forced, session_stopped = :stopped, closeout = :closeout,
       version = version + 1, holder = NULL, lease_until = NULL, updated_at = :now
     WHERE ${GUARD} RETURNING *`,
    { ...g, state: s.state, forced: s.forced, stopped: s.sessionStopped ? 1 : 0, closeout: s.closeout },
  );
  if (!r) return { kind: "stale" };
  const a = toAttempt(r);
  const out: FactInput[] = [attemptMoved(a, before.state)];
  if (route) {
    const ends = route.state === "done" || route.state === "closed" || route.state === "archived";
    const was = yield* one<{ step: string; state: ItemState }>(
      `SELECT step, state FROM ${I} WHERE id = CAST(:item AS bigint) AND state = 'running' @update`,
      { item: a.itemId },
    );
    const moved = yield* one<{ id: unknown; pipeline: string; step: string; state: ItemState }>(
      `UPDATE ${I} SET step = :step, state = :state, taken = :taken, resume_next = :resume, updated_at = :now,
         not_before = CAST(:notBefore AS bigint), pr_wait = :prWait, ended_at = ${ends ? ":now" : "NULL"}
       WHERE id = CAST(:item AS bigint) AND state = 'running' RETURNING id, pipeline, step, state`,
      {
        item: a.itemId,
        step: route.step,
        state: route.state,
        taken: JSON.stringify(route.taken),
        resume: route.resumeNext ? 1 : 0,
        notBefore: route.notBefore,
        prWait: route.prWait ? JSON.stringify(route.prWait) : null,
      },
    );
    if (moved && was) out.push(itemMoved({ ...moved, id: String(moved.id) }, was));
    // spec §22.7: a pull request already in the state waited for lets the item move on at once.
    if (route.prWait) out.push(...(yield* releaseWait(a.itemId)));
  }
  let kept: boolean | undefined;
  if (keep) kept = yield* casKept(a.itemId, keep.expect, keep.value);
  yield* event(a.id, "settled", detail);
  yield* appendFacts([...out, ...facts]); // spec §21.2
  return { kind: "moved", attempt: a, kept };
}

/** Writes an item's kept slot if it still holds `expect` (compare-and-set, spec §20.13). */
export function* casKept(
  itemId: string,
  expect: KeptSession | null,
  value: KeptSession | null,
): Program<boolean> {
  const rows = yield* q(
    `UPDATE ${I} SET kept = :value, kept_attempt = CAST(:attempt AS bigint), updated_at = :now
     WHERE id = CAST(:item AS bigint) AND (kept = :expect OR (kept IS NULL AND CAST(:expect AS text) IS NULL)) RETURNING id`,
    {
      item: itemId,
      value: value === null ? null : JSON.stringify(value),
      attempt: value === null ? null : value.attempt,
      expect: expect === null ? null : JSON.stringify(expect),
    },
  );
  return rows.length === 1;
}

export function* getAttempt(id: string): Program<AttemptRow | null> {
  const r = yield* one(`SELECT * FROM ${A} WHERE id = CAST(:id AS bigint)`, { id });
  return r ? toAttempt(r) : null;
}

export interface AttemptFilter {
  itemId?: string | null;
  state?: string | null;
  live?: boolean;
  after?: string | null;
  limit: number;
}

export function* listAttempts(f: AttemptFilter): Program<AttemptRow[]> {
  const rows = yield* q(
    `SELECT * FROM ${A} WHERE (CAST(:item AS bigint) IS NULL OR item_id = CAST(:item AS bigint))
       AND (CAST(:state AS text) IS NULL OR state = :state) AND (:live = 0 OR ended_at IS NULL)
       AND id > CAST(:after AS bigint)
     ORDER BY id LIMIT :limit`,
    {
      item: f.itemId ?? null,
      state: f.state ?? null,
      live: f.live ? 1 : 0,
      after: f.after ?? "0",
      limit: f.limit,
    },
  );
  return rows.map(toAttempt);
}

/** The attempt's timeline, oldest first, at most `limit` events after `after`. */
export function* attemptEvents(id: string, after: number, limit: number): Program<AttemptEvent[]> {
  const rows = yield* q(
    `SELECT * FROM ${E} WHERE attempt_id = CAST(:id AS bigint) AND id > CAST(:after AS bigint) ORDER BY id LIMIT :limit`,
    { id, after, limit },
  );
  return rows.map(toEvent);
}

/** Records an event without a move (a reading, a decision, a refusal). */
export function* noteEvent(id: string, kind: string, detail: unknown): Program<void> {
  yield* event(id, kind, detail);
}

/**
 * A close-out reported to the store (CLI `ratchet dispatch closeout`, HTTP),
 * for a live attempt (spec §20.24): kept with the attempt, and an attempt
 * not closing yet moves to `closing` for `closed-out`, its version bumped.
 * The runner then stops the session after its grace and settles by it.
 * Invariant: a close-out for a settled or unknown attempt changes nothing.
 */
export function* recordCloseout(id: string, closeout: string): Program<AttemptRow | null> {
  const before = yield* one<{ state: AttemptState }>(
    `SELECT state FROM ${A} WHERE id = CAST(:id AS bigint) AND ended_at IS NULL @update`,
    { id },
  );
  const r = yield* one(
    `UPDATE ${A} SET closeout = :closeout, version = version + 1, updated_at = :now,
       closing = CASE WHEN state = 'closing' THEN closing ELSE 'closed-out' END,
       closing_at = CASE WHEN state = 'closing' THEN closing_at ELSE :now END,
       state = 'closing'
     WHERE id = CAST(:id AS bigint) AND ended_at IS NULL RETURNING *`,
    { id, closeout },
  );
  if (!r) return null;
  yield* event(String(r.id), "closeout", JSON.parse(closeout));
  const a = toAttempt(r);
  if (before?.state !== a.state) yield* appendFacts([attemptMoved(a, before?.state ?? null)]); // spec §21.4
  return a;
}
