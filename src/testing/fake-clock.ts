import type { Clock } from "../core/clock.js";

/** A clock that moves only when told to. */
export class FakeClock implements Clock {
  #now: number;
  constructor(start = Date.UTC(2026, 0, 1)) {
    this.#now = start;
  }
  now(): number {
    return this.#now;
  }
  advance(ms: number): number {
    this.#now += ms;
    return this.#now;
  }
  set(ms: number): void {
    this.#now = ms;
  }
}

/** A deterministic random source (mulberry32) for reproducible jitter. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
