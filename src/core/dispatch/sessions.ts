/**
 * Kept sessions and forgetting (spec §20.13–§20.15), and the wake's seat
 * and capacity backoff (spec §20.6). Pure.
 */
import { backoffMs, type RetryPolicy } from "../backoff.js";
import type { Random } from "../clock.js";
import type { AttemptView, Instant } from "./model.js";
import type { Pipeline } from "./pipeline.js";
import { type DispatchTimeouts, thresholdMs } from "./timeouts.js";

/** An item's kept session: a succeeded attempt's stopped session, kept to be revived by a `resume: true` edge. */
export interface KeptSession {
  readonly session: string;
  /** The worker kind that hosts it. */
  readonly worker: string;
  /** The attempt whose session it is. */
  readonly attempt: string;
  readonly keptAt: Instant;
}

/**
 * Whether a settled attempt's session is kept for its item: it succeeded with
 * its session stopped and bound, and some edge of the pipeline comes back to
 * its phase with `resume: true`. spec §20.13.
 * Invariant: no other attempt's session is ever kept.
 */
export function shouldKeep(
  pipeline: Pipeline,
  attempt: AttemptView,
  succeeded: boolean,
  sessionStopped: boolean,
): boolean {
  if (!succeeded || !sessionStopped || attempt.session === null) return false;
  for (const step of pipeline.steps.values()) {
    for (const e of Object.values(step.on)) {
      if (e && "to" in e && e.to === attempt.phase && e.resume === true) return true;
    }
  }
  return false;
}

export type ItemState = "open" | "running" | "done" | "closed" | "archived";

/**
 * Whether a kept session is due to be forgotten (spec §20.14): never while
 * the latest attempt its session carries is another, still live attempt;
 * otherwise when the item is gone, closed, done or archived, or the session
 * was kept `keptSessionHours` ago.
 * Invariant: a session a live attempt runs on is never forgotten.
 */
export function isKeptDue(
  kept: KeptSession,
  item: { readonly state: ItemState } | null,
  latest: AttemptView | null,
  now: Instant,
  t: DispatchTimeouts,
): boolean {
  if (latest !== null && latest.id !== kept.attempt && latest.endedAt === null) return false;
  if (item === null || item.state === "closed" || item.state === "done" || item.state === "archived")
    return true;
  return now - kept.keptAt >= thresholdMs(t, "keptSessionHours");
}

/** The instant at or before which settled, un-kept attempts' sessions are forgotten (spec §20.14). */
export function forgetCutoff(now: Instant, t: DispatchTimeouts): Instant {
  return Math.max(0, now - thresholdMs(t, "failedSessionHours"));
}

/**
 * The instant after which a stray that was never found is still looked for (spec §20.26): strays whose
 * attempt ended after it, forgotten or not; one that ended `strayWatchHours` ago or earlier is not.
 * Invariant: the search is bounded in time, and in rows by the pass's batch.
 */
export function strayWatchCutoff(now: Instant, t: DispatchTimeouts): Instant {
  return Math.max(0, now - thresholdMs(t, "strayWatchHours"));
}

/** Whether a settled, un-kept attempt's session is due to be forgotten: it ended `failedSessionHours` ago. */
export function isForgetDue(endedAt: Instant, now: Instant, t: DispatchTimeouts): boolean {
  return endedAt <= forgetCutoff(now, t);
}

/** What a worker said to a request to start or revive a session (spec §20.16). */
export type StartOutcome =
  | { readonly kind: "started"; readonly session: string }
  | { readonly kind: "refused"; readonly cause: "capacity" | "other"; readonly message: string }
  | { readonly kind: "unanswered"; readonly message: string };

/**
 * After a kept session's revival: fall back to a fresh spawn only when the
 * worker refused for a cause other than capacity. A capacity refusal would
 * meet a spawn too, and an unanswered revival may still be running.
 * spec §20.15.
 * Invariant: `fallback` is true exactly for `refused: other`.
 */
export function resumeFallback(outcome: StartOutcome): boolean {
  return outcome.kind === "refused" && outcome.cause === "other";
}

/** Capacity backoff: 5 s doubling to 10 min, full jitter, 1 s floor (spec §20.6). */
export const CAPACITY_BACKOFF: Readonly<RetryPolicy> = Object.freeze({
  maxAttempts: Number.MAX_SAFE_INTEGER,
  baseMs: 5_000,
  factor: 2,
  capMs: 10 * 60_000,
  floorMs: 1_000,
});

/**
 * The wait after the `refusals`-th capacity refusal in a row of a worker
 * kind. Full jitter, so runners refused together do not come back together.
 * spec §20.6.
 */
export function capacityDelayMs(refusals: number, random: Random, p: RetryPolicy = CAPACITY_BACKOFF): number {
  return backoffMs(Math.max(1, refusals), p, random);
}

/**
 * Whether a waking attempt may take a seat now: one is free, or its wake
 * was requested `seatlessSeconds` ago (over the cap). spec §20.6.
 */
export function maySeat(
  held: number,
  limit: number,
  wakeRequestedAt: Instant | null,
  now: Instant,
  t: DispatchTimeouts,
): "seat" | "over-cap" | "wait" {
  if (held < limit) return "seat";
  if (wakeRequestedAt !== null && now - wakeRequestedAt >= thresholdMs(t, "seatlessSeconds"))
    return "over-cap";
  return "wait";
}
