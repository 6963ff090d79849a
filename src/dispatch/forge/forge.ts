/**
 * The forge port (spec §22.3): what the pull-request watcher asks of a code
 * host. One adapter per host: `GitHubForge` (github.com or a GitHub
 * Enterprise host, through `@octokit/rest`), `FakeForge` for tests. Every
 * adapter passes the forge contract suite (`registerForgeContract`).
 *
 * Errors are values a caller can act on: a ForgeError says whether it was a
 * rate limit (with when to come back), the host being unavailable, a refused
 * token, or an answer that made no sense. A pull request the forge does not
 * know is `null`, not an error. No adapter ever puts its token in an error,
 * a log line or a return value.
 */
import type { ChecksState, PullObservation } from "../../core/dispatch/pulls.js";
import { RatchetError } from "../../errors.js";

export interface RepoRef {
  readonly owner: string;
  readonly repo: string;
}

export interface PullNumberRef extends RepoRef {
  readonly number: number;
}

/** A pull request's state with its URL, as the forge reports it now. */
export interface PullStatus extends PullObservation {
  readonly url: string;
  readonly headRef: string;
}

export interface PullCommit {
  readonly sha: string;
  readonly message: string;
}

/** The most commits read from one pull request (GitHub lists at most 250). */
export const MAX_PULL_COMMITS = 250;

export interface Forge {
  /** The host whose pull requests this adapter answers for, lower case (`github.com`, `ghe.example.com`). */
  readonly host: string;
  /** The pull request's state and checks summary; null when the forge has no such pull request. */
  pull(ref: PullNumberRef, signal?: AbortSignal): Promise<PullStatus | null>;
  /** The pull request's commits, oldest first, at most `limit` (≤ MAX_PULL_COMMITS); [] when it is unknown. */
  commits(ref: PullNumberRef, limit: number, signal?: AbortSignal): Promise<PullCommit[]>;
  /** Open pull requests whose head is `branch` in the repository, newest first (optional). */
  pullsByHead?(repo: RepoRef, branch: string, signal?: AbortSignal): Promise<number[]>;
}

export type ForgeErrorKind = "rate_limited" | "unavailable" | "auth" | "protocol";

/**
 * A forge call that failed (spec §22.3). `retryAfterMs` is the forge's own
 * wish (a rate limit's `retry-after`, or its `x-ratelimit-reset` less now),
 * which the watcher honours.
 * Invariant: the message names the call and the status, never a token.
 */
export class ForgeError extends RatchetError {
  constructor(
    readonly kind: ForgeErrorKind,
    message: string,
    readonly status: number | null = null,
    readonly retryAfterMs: number | null = null,
  ) {
    super("RATCHET_FORGE", message);
  }
}

/** Replaces every occurrence of each secret in `text` (for anything built from a forge's answer). */
export function redact(text: string, secrets: readonly (string | undefined)[]): string {
  let out = text;
  for (const s of secrets) if (s && s.length >= 4) out = out.split(s).join("[redacted]");
  return out;
}

export type { ChecksState };
