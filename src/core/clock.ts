/**
 * Time and randomness are dependencies. spec §11.1.
 * The production clock reads Date.now and cannot be moved; tests use
 * `FakeClock` from `@ratchet-engine/ratchet/testing`.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

/** Returns a float in [0, 1). */
export type Random = () => number;

export const systemClock: Clock = Object.freeze({ now: () => Date.now() });
export const systemRandom: Random = Math.random;
