/**
 * Tick fitting. spec §8.3–§8.4.
 * A step killed by the platform mid-run is retried for nothing, turning a
 * budget overrun into a retry loop (SEM A.5.3), so a tick never starts a task
 * whose whole maxMs (plus the reserve for writing results) does not fit.
 */
export const DEFAULT_TICK_RESERVE_MS = 3_000;

export type Fit = "fits" | "skip";

export function fitsRemaining(maxMs: number, remainingMs: number, reserveMs: number): Fit {
  return maxMs + reserveMs <= remainingMs ? "fits" : "skip";
}

/**
 * "Can never fit" is judged only against the largest configured tick budget,
 * never the calling tick's (a small opportunistic drain must not fail work
 * the cron's large tick could run; fixes SEM A.5.6).
 */
export function canEverFit(maxMs: number, largestBudgetMs: number | undefined, reserveMs: number): boolean {
  return largestBudgetMs === undefined || maxMs + reserveMs <= largestBudgetMs;
}
