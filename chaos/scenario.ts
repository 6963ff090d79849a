/**
 * What every scenario takes and returns. A scenario is a function of its
 * config; everything random in it comes from `Rng(seed)`, so a run replays
 * with the same `--seed` (up to the scheduling of the OS, which the seed
 * cannot fix: the kills land at the same offsets, not at the same instructions).
 */
import { seededRandom } from "../src/testing/index.js";

export type Promise_ = "P1" | "P2" | "P3" | "P4" | "P5" | "P6" | "P7" | "harness";

export interface Violation {
  promise: Promise_;
  detail: string;
}

export interface ScenarioConfig {
  seed: number;
  /** The sizes of the issue (`--full`); otherwise the short sizes of `npm test`. */
  full: boolean;
  /** Overrides the scenario's main count (tasks, rounds, kills…); `--rounds N`. */
  rounds?: number;
  /** Progress lines (the runner prints them; tests drop them). */
  log: (line: string) => void;
  /** Keep the temp dir (printed) for a post-mortem. */
  keep?: boolean;
}

export interface ScenarioResult {
  name: string;
  seed: number;
  ms: number;
  violations: Violation[];
  /** Numbers for the summary table: kills, rejections, recovery times… */
  stats: Record<string, number | string>;
}

export type Scenario = (c: ScenarioConfig) => Promise<ScenarioResult>;

export class Rng {
  readonly #next: () => number;
  constructor(seed: number) {
    this.#next = seededRandom(seed);
  }
  next(): number {
    return this.#next();
  }
  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.#next() * (hi - lo + 1));
  }
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.#next() * xs.length)]!;
  }
}

/** A bounded sleep for pacing the chaos itself (kill intervals), never for "letting things settle". */
export function pause(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}
