/**
 * Pull-request rules (spec §22.4–§22.8), pure: the checks summary, what a
 * watcher's observation changed and which facts it emits, when a pull
 * request is looked at next, and whether an item waiting on its pull request
 * moves on. Time is a parameter; nothing here does I/O.
 */
import type { Random } from "../clock.js";

export const PULL_STATES = ["open", "merged", "closed"] as const;
export type PullState = (typeof PULL_STATES)[number];
export const CHECKS_STATES = ["none", "pending", "success", "failure"] as const;
export type ChecksState = (typeof CHECKS_STATES)[number];

/** What a forge says about a pull request now (spec §22.3). */
export interface PullObservation {
  readonly state: PullState;
  readonly draft: boolean;
  readonly headSha: string;
  /** null while the forge has not computed it. */
  readonly mergeable: boolean | null;
  readonly checks: ChecksState;
}

/** A commit status as the combined-status endpoint lists it. */
export type StatusState = "pending" | "success" | "failure" | "error";
/** A check run: its status and, once completed, its conclusion. */
export interface CheckRun {
  readonly status: "queued" | "in_progress" | "completed" | "waiting" | "requested" | "pending";
  readonly conclusion: string | null;
}

const GOOD_CONCLUSIONS = new Set(["success", "neutral", "skipped"]);

/**
 * One summary of a commit's statuses and check runs (spec §22.3): `failure`
 * if any status is failure or error or any completed run concluded other
 * than success, neutral or skipped; else `pending` if any status is pending
 * or any run is not completed; else `success` if there was at least one;
 * else `none` (nothing reports on the commit).
 * Invariant: one failing check makes the summary `failure` whatever the rest say.
 */
export function summarizeChecks(statuses: readonly StatusState[], runs: readonly CheckRun[]): ChecksState {
  if (statuses.some((s) => s === "failure" || s === "error")) return "failure";
  if (runs.some((r) => r.status === "completed" && !GOOD_CONCLUSIONS.has(r.conclusion ?? "")))
    return "failure";
  if (statuses.some((s) => s === "pending") || runs.some((r) => r.status !== "completed")) return "pending";
  return statuses.length + runs.length > 0 ? "success" : "none";
}

/** A pull request is final once merged or closed: the watcher stops looking at it (spec §22.5). */
export function isFinalPull(state: PullState | null): boolean {
  return state === "merged" || state === "closed";
}

export interface PullFact {
  readonly type: "pr.state" | "pr.merged" | "pr.closed" | "pr.checks";
  readonly data: Record<string, unknown>;
}

/** What the store knows of a pull request (null fields: never observed). */
export interface KnownPull {
  readonly state: PullState | null;
  readonly draft: boolean | null;
  readonly headSha: string | null;
  readonly mergeable: boolean | null;
  readonly checks: ChecksState | null;
}

export type PullChange =
  | { readonly kind: "unchanged" }
  | { readonly kind: "changed"; readonly facts: readonly PullFact[] };

/**
 * What an observation changed (spec §22.6). `pr.state` when the state, the
 * draft flag, the head commit or mergeability changed (with the old and the
 * new values); `pr.merged` or `pr.closed` when the state became that; and
 * `pr.checks` when the checks summary changed. Nothing when all are equal.
 * Invariant: the same observation of the same known state emits nothing, so
 * a watcher that polls an unchanged pull request writes no fact.
 */
export function diffPull(known: KnownPull, seen: PullObservation): PullChange {
  const facts: PullFact[] = [];
  const stateMoved =
    known.state !== seen.state ||
    known.draft !== seen.draft ||
    known.headSha !== seen.headSha ||
    known.mergeable !== seen.mergeable;
  if (stateMoved)
    facts.push({
      type: "pr.state",
      data: {
        from: known.state,
        to: seen.state,
        draft: seen.draft,
        headSha: seen.headSha,
        mergeable: seen.mergeable,
        checks: seen.checks,
      },
    });
  if (known.state !== seen.state && seen.state === "merged")
    facts.push({ type: "pr.merged", data: { headSha: seen.headSha } });
  if (known.state !== seen.state && seen.state === "closed")
    facts.push({ type: "pr.closed", data: { headSha: seen.headSha } });
  if (known.checks !== seen.checks)
    facts.push({ type: "pr.checks", data: { from: known.checks, to: seen.checks, headSha: seen.headSha } });
  return facts.length === 0 ? { kind: "unchanged" } : { kind: "changed", facts };
}

/** How often a watcher looks at a pull request, and how it backs off (spec §22.5). */
export interface WatchPolicy {
  /** The interval between two looks at a healthy, not-final pull request. */
  readonly intervalMs: number;
  /** The ceiling of the backoff after forge errors. */
  readonly maxBackoffMs: number;
}

export const DEFAULT_WATCH_POLICY: WatchPolicy = Object.freeze({
  intervalMs: 60_000,
  maxBackoffMs: 30 * 60_000,
});

/**
 * The delay before the next look after the `failures`-th forge error in a
 * row (spec §22.5): a full-jitter draw in [interval, min(max, interval ·
 * 2^failures)), and never before the forge's own `retryAfterMs` (a rate
 * limit's reset). With no failure it is the interval.
 * Invariant: at least the interval and at least the forge's wish, and at
 * most max(maxBackoffMs, retryAfterMs).
 */
export function nextCheckDelayMs(
  failures: number,
  p: WatchPolicy,
  random: Random,
  retryAfterMs: number | null = null,
): number {
  let delay = p.intervalMs;
  if (failures > 0) {
    const ceiling = Math.min(p.maxBackoffMs, p.intervalMs * 2 ** Math.min(failures, 30));
    delay = Math.max(p.intervalMs, Math.floor(p.intervalMs + (ceiling - p.intervalMs) * random()));
  }
  return Math.max(delay, retryAfterMs ?? 0);
}

/** What an edge may wait for (spec §22.7). */
export const PR_WAITS = ["pr-merged", "pr-closed", "pr-checks-success"] as const;
export type PrWait = (typeof PR_WAITS)[number];

/** An item's wait: what for, and for an `end` edge the state it ends in once the wait is over. */
export interface ItemPrWait {
  readonly for: PrWait;
  readonly end?: "done" | "closed";
}

export type PrWaitDecision =
  | { readonly kind: "wait"; readonly why: "no-pull" | "not-yet" }
  | { readonly kind: "release" }
  | { readonly kind: "close"; readonly why: "closed-unmerged" };

/**
 * Whether an item waiting on its pull request moves on (spec §22.7). The
 * item's pull request is the one most recently linked to any of its
 * attempts. With none linked the item waits (a link may still come: a later
 * output, a trailer, `ratchet pr link`). `pr-merged` is met by a merged pull
 * request; `pr-closed` by a merged or closed one; `pr-checks-success` by
 * checks `success` on an open or merged one. A pull request closed unmerged
 * ends a wait for `pr-merged` or `pr-checks-success`: the item is closed.
 * Invariant: a waiting item never moves on without its pull request's state
 * seen by a watcher (or linked already in that state).
 */
export function decidePrWait(wait: ItemPrWait, pull: KnownPull | null): PrWaitDecision {
  if (pull === null) return { kind: "wait", why: "no-pull" };
  if (wait.for === "pr-closed")
    return isFinalPull(pull.state) ? { kind: "release" } : { kind: "wait", why: "not-yet" };
  if (pull.state === "closed") return { kind: "close", why: "closed-unmerged" };
  if (wait.for === "pr-merged")
    return pull.state === "merged" ? { kind: "release" } : { kind: "wait", why: "not-yet" };
  return pull.checks === "success" ? { kind: "release" } : { kind: "wait", why: "not-yet" };
}

const WAIT_WORDS: Readonly<Record<PrWait, string>> = {
  "pr-merged": "to be merged",
  "pr-closed": "to be merged or closed",
  "pr-checks-success": "to pass its checks",
};

/**
 * A sentence for `why` (spec §22.7, §22.8): what an item waits for, and what
 * its pull request is known to be now. Null when the item waits for nothing.
 */
export function explainPrWait(
  wait: ItemPrWait | null,
  pull: (KnownPull & { readonly url: string }) | null,
): string | null {
  if (wait === null) return null;
  const then = wait.end ? `, then it ends ${wait.end}` : "";
  if (pull === null)
    return `it waits for its pull request ${WAIT_WORDS[wait.for]}${then}, and none is linked yet (ratchet pr link ATTEMPT URL)`;
  const known =
    pull.state === null ? "not looked at yet" : `${pull.state}, checks ${pull.checks ?? "unknown"}`;
  return `it waits for ${pull.url} ${WAIT_WORDS[wait.for]}${then}; it is ${known}`;
}
