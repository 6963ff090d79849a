/**
 * Token buckets for rate limits (spec §14.9–§14.11). Pure: the stores keep the
 * state in ratchet_buckets and call these inside the claim transaction.
 *
 * A bucket of `limit` per `periodMs` refills at limit/periodMs tokens per ms
 * up to `burst` (default `limit`). A start of cost c is admitted when the level
 * is at least min(c, burst), and takes c (the level may go below zero when
 * c > burst; the debt is repaid by the refill). So over any window of length w
 * the admitted cost is at most burst + limit·w/periodMs + max(0, c_max − burst).
 *
 * A blocked task is parked until the level would suffice. `nextWake` spaces the
 * wake-ups of tasks parked on one bucket by their cost, so a long line wakes
 * one at a time instead of all at each refill.
 */
export interface BucketConfig {
  limit: number;
  periodMs: number;
  burst: number;
}

export interface BucketState {
  tokens: number;
  /** The time `tokens` was measured at; later than now while paused. */
  at: number;
  nextWake: number;
  pausedUntil: number;
}

export function fullBucket(cfg: BucketConfig, now: number): BucketState {
  return { tokens: cfg.burst, at: now, nextWake: 0, pausedUntil: 0 };
}

/** Tokens per millisecond. */
function rate(cfg: BucketConfig): number {
  return cfg.limit / cfg.periodMs;
}

/** The level at `now`. */
export function level(s: BucketState, cfg: BucketConfig, now: number): number {
  if (now <= s.at) return Math.min(s.tokens, cfg.burst);
  return Math.min(cfg.burst, s.tokens + (now - s.at) * rate(cfg));
}

/** The earliest time the level reaches `need`, with no other takes. */
export function readyAt(s: BucketState, cfg: BucketConfig, now: number, need: number): number {
  const from = Math.max(now, s.at, s.pausedUntil);
  const have = level(s, cfg, from);
  if (have >= need) return from;
  return from + Math.ceil((need - have) / rate(cfg));
}

export type Decision =
  | { ok: true; states: BucketState[] }
  | { ok: false; until: number; states: BucketState[]; paused: boolean };

/**
 * Admit one start charging `costs[i]` to bucket i, or park it: all buckets or
 * none. Returns the states to write back.
 */
export function decide(
  buckets: readonly { state: BucketState; cfg: BucketConfig; cost: number }[],
  now: number,
): Decision {
  let blockedUntil = 0;
  let paused = false;
  for (const b of buckets) {
    const need = Math.min(b.cost, b.cfg.burst);
    if (b.state.pausedUntil > now) paused = true;
    if (b.state.pausedUntil > now || level(b.state, b.cfg, now) < need)
      blockedUntil = Math.max(blockedUntil, readyAt(b.state, b.cfg, now, need));
  }
  if (blockedUntil === 0) {
    return {
      ok: true,
      states: buckets.map((b) => ({
        ...b.state,
        tokens: level(b.state, b.cfg, now) - b.cost,
        at: Math.max(now, b.state.at),
      })),
    };
  }
  // Wait in line behind the tasks already parked on these buckets.
  const until = Math.max(blockedUntil, ...buckets.map((b) => b.state.nextWake));
  return {
    ok: false,
    until,
    paused,
    states: buckets.map((b) => ({
      ...b.state,
      nextWake: until + Math.max(1, Math.ceil(Math.min(b.cost, b.cfg.burst) / rate(b.cfg))),
    })),
  };
}

/** A provider said "slow down" (429): the bucket is empty and refills only after `until`. */
export function pause(s: BucketState, cfg: BucketConfig, now: number, until: number): BucketState {
  return {
    tokens: Math.min(0, level(s, cfg, now)),
    at: Math.max(s.at, until),
    nextWake: Math.max(s.nextWake, until),
    pausedUntil: Math.max(s.pausedUntil, until),
  };
}

/** Reported actual usage replaces the charged estimate (spec §14.10). */
export function correct(s: BucketState, cfg: BucketConfig, now: number, delta: number): BucketState {
  return { ...s, tokens: level(s, cfg, now) - delta, at: Math.max(now, s.at) };
}
