/**
 * The outbox's pure decisions (spec §21.5–§21.10): which facts a destination
 * takes, where a batch is cut, whether a destination may be tried now, and
 * what a failed delivery leads to. Functions of plain records; the clock and
 * the random source are parameters. The sender (src/dispatch/outbox/sender.ts)
 * applies them with the store's guarded writes.
 */
import { backoffMs, type RetryPolicy } from "./backoff.js";
import type { Random } from "./clock.js";

/** A fact as a change states it; the store adds its seq, id and instant (spec §21.1). */
export interface FactInput {
  /** Dotted kind, e.g. `attempt.moved`. */
  readonly type: string;
  /** What it is about, e.g. `attempt:12`. */
  readonly subject: string;
  /** JSON-serialisable payload, at most 64 KiB encoded. */
  readonly data: unknown;
}

/** A fact as read back, the fields the decisions need. */
export interface SeqFact {
  readonly seq: string;
  readonly type: string;
}

/**
 * A destination's filter (spec §21.5): exact types (`attempt.moved`), prefixes
 * (`notice.*` takes every type under `notice.`), or `*` for everything.
 */
export type FactFilter = readonly string[];

const PATTERN_RE = /^(\*|[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*(\.\*)?)$/;

export function isFilterPattern(p: string): boolean {
  return typeof p === "string" && p.length <= 100 && PATTERN_RE.test(p);
}

/** Whether a destination with `filter` takes facts of `type` (spec §21.5). */
export function takesType(filter: FactFilter, type: string): boolean {
  for (const p of filter) {
    if (p === "*" || p === type) return true;
    if (p.endsWith(".*") && type.startsWith(p.slice(0, -1))) return true;
  }
  return false;
}

/** A batch's bounds (spec §21.9): facts, and wire bytes including the envelope. */
export interface BatchBounds {
  readonly maxFacts: number;
  readonly maxBytes: number;
}

export const DEFAULT_BATCH_BOUNDS: Readonly<BatchBounds> = Object.freeze({
  maxFacts: 100,
  maxBytes: 256 * 1024,
});

/** Bytes a batch's envelope may take on any sink's wire (the webhook body's wrapper, spec §21.9). */
export const ENVELOPE_BYTES = 512;

/** The next step for a destination's window of facts after its cursor (spec §21.5, §21.9). */
export type BatchPlan<F> =
  /** Nothing after the cursor. */
  | { readonly kind: "idle" }
  /** Only facts the filter does not take: move the cursor over them without delivering. */
  | { readonly kind: "pass"; readonly to: string }
  /** Deliver `facts`; on success the cursor moves to `to` (the last one's seq). */
  | { readonly kind: "send"; readonly facts: readonly F[]; readonly to: string; readonly bytes: number };

/**
 * Cuts the next batch from `window` (facts after the cursor, ascending seq)
 * by the filter and the bounds (spec §21.9). A batch holds at most `maxFacts`
 * facts and at most `maxBytes` wire bytes counting `ENVELOPE_BYTES`, except
 * that its first fact always goes, alone if it alone is larger: no fact waits
 * for ever behind a bound (a sink that cannot take it refuses it, and the
 * destination dead-letters, spec §21.10). Facts the filter does not take are
 * passed over inside the batch's range; a window that holds only those is
 * passed over whole.
 * Invariant: the facts sent are the filter's facts of the range, in seq order.
 */
export function planBatch<F extends SeqFact>(
  window: readonly F[],
  filter: FactFilter,
  bounds: BatchBounds,
  wireBytes: (f: F) => number,
): BatchPlan<F> {
  if (window.length === 0) return { kind: "idle" };
  const facts: F[] = [];
  let bytes = ENVELOPE_BYTES;
  let to = window[0]!.seq;
  for (const f of window) {
    if (!takesType(filter, f.type)) continue; // passed over inside the batch's range
    const size = wireBytes(f);
    if (facts.length > 0 && (facts.length >= bounds.maxFacts || bytes + size > bounds.maxBytes)) break;
    facts.push(f);
    bytes += size;
    to = f.seq;
  }
  if (facts.length === 0) return { kind: "pass", to: window[window.length - 1]!.seq };
  return { kind: "send", facts, to, bytes };
}

/** When a destination gives up on its head batch (spec §21.9, §21.10). */
export interface DeliveryPolicy {
  /** Full-jitter backoff between tries (floor, base, factor, cap). `maxAttempts` is not used here. */
  readonly retry: RetryPolicy;
  /** Dead-letter after this many failed tries of one batch. */
  readonly maxAttempts: number;
  /** ... or once it has been retrying this long. */
  readonly maxAgeMs: number;
  /** A receiver's Retry-After is honoured up to this. */
  readonly maxRetryAfterMs: number;
}

export const DEFAULT_DELIVERY_POLICY: Readonly<DeliveryPolicy> = Object.freeze({
  retry: Object.freeze({ maxAttempts: 0, baseMs: 1_000, factor: 2, capMs: 5 * 60_000, floorMs: 250 }),
  maxAttempts: 20,
  maxAgeMs: 24 * 3_600_000,
  maxRetryAfterMs: 3_600_000,
});

/** What the destination's row says about trying now (spec §21.9, §21.10). */
export type SendMove =
  | { readonly kind: "send" }
  | { readonly kind: "wait"; readonly until: number }
  | { readonly kind: "dead" };

export function pickSendMove(d: { state: string; nextAt: number | null }, now: number): SendMove {
  if (d.state === "dead") return { kind: "dead" };
  if (d.nextAt !== null && d.nextAt > now) return { kind: "wait", until: d.nextAt };
  return { kind: "send" };
}

/** A failed delivery as the sender saw it. */
export interface DeliveryFailure {
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;
}

export type FailureDecision =
  | { readonly kind: "retry"; readonly delayMs: number }
  | { readonly kind: "dead"; readonly reason: "not-retryable" | "attempts" | "age" };

/**
 * What a failed delivery of the head batch leads to (spec §21.9, §21.10).
 * `failures` counts this one; `since` is when the destination started
 * retrying (null on the first failure). Dead-letter when the sink said it
 * will never accept the batch, when `maxAttempts` tries failed, or when it
 * has been retrying for `maxAgeMs`. Otherwise wait the receiver's Retry-After
 * (clamped to [retry.floorMs, maxRetryAfterMs]) or else a full-jitter delay.
 * Invariant: a delay is never below the floor nor above max(cap, maxRetryAfterMs).
 */
export function decideDeliveryFailure(
  failures: number,
  since: number | null,
  now: number,
  f: DeliveryFailure,
  p: DeliveryPolicy,
  random: Random,
): FailureDecision {
  if (!f.retryable) return { kind: "dead", reason: "not-retryable" };
  if (failures >= p.maxAttempts) return { kind: "dead", reason: "attempts" };
  if (since !== null && now - since >= p.maxAgeMs) return { kind: "dead", reason: "age" };
  if (f.retryAfterMs !== undefined && Number.isFinite(f.retryAfterMs))
    return {
      kind: "retry",
      delayMs: Math.round(Math.min(p.maxRetryAfterMs, Math.max(p.retry.floorMs, f.retryAfterMs))),
    };
  return { kind: "retry", delayMs: backoffMs(failures, p.retry, random) };
}
