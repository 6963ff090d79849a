import type { Random } from "./clock.js";
import type { StoredError } from "./json.js";

/** spec §5.1. */
export interface RetryPolicy {
  maxAttempts: number;
  baseMs: number;
  factor: number;
  capMs: number;
  floorMs: number;
}

export const DEFAULT_RETRY: Readonly<RetryPolicy> = Object.freeze({
  maxAttempts: 4,
  baseMs: 5_000,
  factor: 4,
  capMs: 15 * 60_000,
  floorMs: 1_000,
});

/** Upper bound of the delay after attempt n (n ≥ 1): min(cap, base·factor^(n−1)). */
export function backoffCeilingMs(attempt: number, p: RetryPolicy): number {
  const exp = Math.max(0, attempt - 1);
  // factor^exp overflows to Infinity for large exp; min() keeps it at the cap.
  return Math.min(p.capMs, p.baseMs * p.factor ** exp);
}

/**
 * Full-jitter backoff. spec §5.2.
 * Why full jitter: tasks that fail together fail for one reason; a
 * deterministic delay turns their synchronised failure into a synchronised
 * retry herd that re-breaks the recovering provider (SEM A.6.3).
 * Invariant: `attempt` is the number of the attempt that just failed, counted
 * at claim (so the first retry waits up to `baseMs`, fixing SEM A.6.4).
 */
export function backoffMs(attempt: number, p: RetryPolicy, random: Random): number {
  const ceiling = backoffCeilingMs(attempt, p);
  return Math.max(p.floorMs, Math.floor(ceiling * random()));
}

export type FailureKind = "error" | "non_retryable" | "timeout" | "unstorable_result" | "no_progress";

export type FailureDecision =
  | { kind: "retry"; delayMs: number }
  | { kind: "fail"; outcome: "failed" | "faulted" };

/**
 * What happens after attempt `attempt` failed. spec §5.2–§5.5.
 * Invariant: at most `maxAttempts` claims happen; faulted only for what the
 * engine detected (a result it cannot store, a phase without progress).
 */
export function decideFailure(
  attempt: number,
  kind: FailureKind,
  p: RetryPolicy,
  random: Random,
): FailureDecision {
  switch (kind) {
    case "unstorable_result":
    case "no_progress": // spec §12.8: a phase that committed nothing new would loop for ever
      return { kind: "fail", outcome: "faulted" };
    case "non_retryable":
      return { kind: "fail", outcome: "failed" };
    case "error":
    case "timeout":
      if (attempt >= p.maxAttempts) return { kind: "fail", outcome: "failed" };
      return { kind: "retry", delayMs: backoffMs(attempt, p, random) };
  }
}

/**
 * A running task whose lease expired: claim it again, or has every attempt
 * been used by holders that died? spec §5.4 (SEM F.2): a task that kills its
 * worker every time ends failed after maxAttempts claims, holding up nothing.
 */
export function decideReclaim(attempts: number, maxAttempts: number): "claim" | "fail" {
  return attempts >= maxAttempts ? "fail" : "claim";
}

/**
 * How a task whose holders used every attempt ends (spec §5.4, §7.2): `failed` with AttemptsExhausted
 * naming the last holder, or `aborted` when it carries an abort mark. The abort was asked for, and
 * §7.2 ends a marked task of a dead holder `aborted` without running code.
 */
export function deadHolderEnd(
  attempts: number,
  holder: string | null,
  marked: boolean,
): { outcome: "failed" | "aborted"; error: StoredError } {
  const last = `last holder ${holder ?? "unknown"}`;
  return marked
    ? {
        outcome: "aborted",
        error: {
          name: "Aborted",
          message: `abort requested; the holder of attempt ${attempts} stopped without settling (crash or kill); ${last}`,
        },
      }
    : {
        outcome: "failed",
        error: {
          name: "AttemptsExhausted",
          message: `gave up after ${attempts} attempts: each holder stopped without settling (crash or kill); ${last}`,
        },
      };
}
