/**
 * A circuit breaker's transitions (spec §18.6), decided purely: `(state, event, now, config) →
 * decision`. The store holds the state (one row per provider+model) and applies a decision in
 * the transaction that read the state, so every worker and process shares one breaker.
 *
 * Modes:
 * - closed: requests pass. Failures are counted in a window that starts at the first failure;
 *   `failures` failures within `windowMs` open the breaker; a window older than `windowMs` starts
 *   again at the next failure; a success resets the count.
 * - open: requests are refused until `coolDownMs` after it opened; the first request after that
 *   is admitted as the probe and moves the breaker to half_open.
 * - half_open: the one probe is in flight; every other request is refused. The probe's success
 *   closes the breaker, its failure opens it again (a new cool-down). A probe that never reports
 *   (its worker died) lapses at `probe_until`, and the next request becomes the probe.
 *
 * Invariant: in half_open at most one probe is admitted per claim (spec §18.6); only the probe's
 * report moves a half_open breaker.
 */
import { ValidationError } from "../errors.js";

export interface BreakerConfig {
  /** Failures within windowMs that open the breaker. */
  failures: number;
  windowMs: number;
  /** How long an open breaker refuses before admitting one probe. */
  coolDownMs: number;
  /** How long a probe's claim lasts before another request may probe (its worker may have died). */
  probeMs: number;
}

export const DEFAULT_BREAKER: BreakerConfig = {
  failures: 5,
  windowMs: 60_000,
  coolDownMs: 30_000,
  probeMs: 120_000,
};

export type BreakerMode = "closed" | "open" | "half_open";

export interface BreakerState {
  state: BreakerMode;
  /** closed: failures counted in the current window. */
  failures: number;
  /** closed: when the current window started (its first failure). */
  windowStart: number;
  /** open / half_open: when the breaker last opened. */
  openedAt: number;
  /** half_open: when the probe's claim lapses. */
  probeUntil: number;
}

export const CLOSED: BreakerState = {
  state: "closed",
  failures: 0,
  windowStart: 0,
  openedAt: 0,
  probeUntil: 0,
};

export type BreakerEvent =
  | { kind: "request" }
  | { kind: "success"; probe: boolean }
  | { kind: "failure"; probe: boolean };

export type BreakerDecision =
  /** Let the request through; `probe` says it is the half-open probe. `next` is the state to write (null: unchanged). */
  | { kind: "admit"; probe: boolean; next: BreakerState | null }
  /** Refuse: the breaker is open (or its probe is in flight) until `until`. */
  | { kind: "refuse"; until: number }
  /** A report: write `next` (null: nothing changes). */
  | { kind: "record"; next: BreakerState | null };

const MAX_MS = 24 * 3600_000;

/** A config with every field a bounded integer; throws on a bad one (nothing was written). */
export function checkBreakerConfig(c: Partial<BreakerConfig> | undefined): BreakerConfig {
  const out = { ...DEFAULT_BREAKER, ...(c ?? {}) };
  for (const [k, v] of Object.entries(out)) {
    const max = k === "failures" ? 10_000 : MAX_MS;
    if (!Number.isInteger(v) || v < 1 || v > max)
      throw new ValidationError(`breaker ${k} must be an integer in [1, ${max}] (got ${String(v)})`);
  }
  return out;
}

/** spec §18.6: the breaker's answer to an event at `now`. */
export function decideBreaker(
  s: BreakerState,
  e: BreakerEvent,
  now: number,
  c: BreakerConfig,
): BreakerDecision {
  if (e.kind === "request") return onRequest(s, now, c);
  if (e.kind === "success") {
    if (s.state === "closed") return { kind: "record", next: s.failures === 0 ? null : CLOSED };
    // Only the probe's report closes a half_open breaker; a straggler from before it opened changes nothing.
    return { kind: "record", next: e.probe && s.state === "half_open" ? CLOSED : null };
  }
  if (s.state === "half_open") return { kind: "record", next: e.probe ? opened(now) : null };
  if (s.state === "open") return { kind: "record", next: null };
  const fresh = s.failures === 0 || now - s.windowStart >= c.windowMs;
  const failures = fresh ? 1 : s.failures + 1;
  if (failures >= c.failures) return { kind: "record", next: opened(now) };
  return { kind: "record", next: { ...CLOSED, failures, windowStart: fresh ? now : s.windowStart } };
}

function onRequest(s: BreakerState, now: number, c: BreakerConfig): BreakerDecision {
  if (s.state === "closed") return { kind: "admit", probe: false, next: null };
  if (s.state === "open") {
    const until = s.openedAt + c.coolDownMs;
    if (now < until) return { kind: "refuse", until };
    return { kind: "admit", probe: true, next: { ...s, state: "half_open", probeUntil: now + c.probeMs } };
  }
  if (now < s.probeUntil) return { kind: "refuse", until: s.probeUntil };
  // The probe's claim lapsed: this request is the new probe.
  return { kind: "admit", probe: true, next: { ...s, probeUntil: now + c.probeMs } };
}

function opened(now: number): BreakerState {
  return { state: "open", failures: 0, windowStart: 0, openedAt: now, probeUntil: 0 };
}
