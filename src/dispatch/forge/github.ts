/**
 * The GitHub forge (spec §22.3), through `@octokit/rest`: github.com, or a
 * GitHub Enterprise host with its `apiUrl` (`https://HOST/api/v3`). The
 * endpoints it uses:
 * - `GET /repos/{owner}/{repo}/pulls/{n}` — state, merged, draft, head, mergeable;
 * - `GET /repos/{owner}/{repo}/commits/{sha}/status` — the combined status;
 * - `GET /repos/{owner}/{repo}/commits/{sha}/check-runs` — check runs (paged);
 * - `GET /repos/{owner}/{repo}/pulls/{n}/commits` — commits (paged, ≤ 250);
 * - `GET /repos/{owner}/{repo}/pulls?head=owner:branch&state=open` — by head branch.
 * Paged lists follow the `Link` header, at most a bounded number of pages.
 * GETs are conditional (`If-None-Match`; a 304 costs no rate limit, see
 * github-cache.ts). Every request has a timeout. Octokit's own logging is silenced (it could
 * print request details); errors are rebuilt from the status and the call's
 * name alone, so a token never reaches a message, a `cause` or a log line.
 */
import { Octokit } from "@octokit/rest";
import type { Clock } from "../../core/clock.js";
import { systemClock } from "../../core/clock.js";
import { type CheckRun, type StatusState, summarizeChecks } from "../../core/dispatch/pulls.js";
import { ConfigError } from "../../errors.js";
import {
  type Forge,
  ForgeError,
  MAX_PULL_COMMITS,
  type PullCommit,
  type PullNumberRef,
  type PullStatus,
  type RepoRef,
} from "./forge.js";
import { DEFAULT_CACHE_ENTRIES, MAX_CACHE_ENTRIES, useConditionalRequests } from "./github-cache.js";

export interface GitHubForgeOptions {
  /** The host pull-request URLs name (default `github.com`). */
  host?: string;
  /** The REST API's base URL (default `https://api.github.com`, or `https://HOST/api/v3` for another host). */
  apiUrl?: string;
  /** A token (from the environment, e.g. GITHUB_TOKEN); never stored, logged or returned. */
  token?: string;
  /** Each request's timeout (default 10 s). */
  timeoutMs?: number;
  /** Answers kept for conditional requests (default 1,000; 0 turns them off; at most 100,000). */
  cacheEntries?: number;
  clock?: Clock;
}

const MAX_CHECK_RUN_PAGES = 5;
const SILENT = { debug() {}, info() {}, warn() {}, error() {} };

function header(h: Record<string, unknown> | undefined, name: string): string | null {
  const v = h?.[name];
  return typeof v === "string" ? v : typeof v === "number" ? String(v) : null;
}

/** Maps an HTTP failure to a ForgeError (spec §22.3); a 404 is handled by the caller. */
export function forgeErrorOf(what: string, e: unknown, now: number): ForgeError {
  const status =
    typeof (e as { status?: unknown })?.status === "number" ? (e as { status: number }).status : null;
  const headers = (e as { response?: { headers?: Record<string, unknown> } })?.response?.headers;
  if (status === null) {
    const aborted = (e as Error)?.name === "AbortError" || (e as Error)?.name === "TimeoutError";
    return new ForgeError("unavailable", `${what}: ${aborted ? "timed out" : "no answer"}`);
  }
  const retryAfter = header(headers, "retry-after");
  const remaining = header(headers, "x-ratelimit-remaining");
  const reset = header(headers, "x-ratelimit-reset");
  if (status === 429 || (status === 403 && (retryAfter !== null || remaining === "0"))) {
    let ms: number | null = null;
    if (retryAfter !== null && /^\d{1,9}$/.test(retryAfter)) ms = Number(retryAfter) * 1000;
    else if (reset !== null && /^\d{1,12}$/.test(reset)) ms = Math.max(0, Number(reset) * 1000 - now);
    return new ForgeError("rate_limited", `${what}: rate limited (HTTP ${status})`, status, ms);
  }
  if (status === 401 || status === 403)
    return new ForgeError("auth", `${what}: refused (HTTP ${status})`, status);
  if (status >= 500) return new ForgeError("unavailable", `${what}: unavailable (HTTP ${status})`, status);
  return new ForgeError("protocol", `${what}: unexpected HTTP ${status}`, status);
}

export class GitHubForge implements Forge {
  readonly host: string;
  readonly #octokit: Octokit;
  readonly #timeoutMs: number;
  readonly #clock: Clock;
  readonly #cache: { hits: () => number };

  constructor(o: GitHubForgeOptions = {}) {
    this.host = (o.host ?? "github.com").toLowerCase();
    const baseUrl =
      o.apiUrl ?? (this.host === "github.com" ? "https://api.github.com" : `https://${this.host}/api/v3`);
    this.#timeoutMs = o.timeoutMs ?? 10_000;
    this.#clock = o.clock ?? systemClock;
    const entries = o.cacheEntries ?? DEFAULT_CACHE_ENTRIES;
    if (!Number.isInteger(entries) || entries < 0 || entries > MAX_CACHE_ENTRIES)
      throw new ConfigError(`cacheEntries must be an integer in [0, ${MAX_CACHE_ENTRIES}]`);
    this.#octokit = new Octokit({ auth: o.token, baseUrl, log: SILENT, userAgent: "ratchet-dispatch" });
    this.#cache = useConditionalRequests(this.#octokit, entries);
  }

  /** Requests the forge answered `304 Not Modified` (from this adapter's cache; no rate limit spent). */
  get notModified(): number {
    return this.#cache.hits();
  }

  /** Never shows the token (spec §22.10). */
  toJSON(): { host: string } {
    return { host: this.host };
  }

  #signal(outer?: AbortSignal): AbortSignal {
    const t = AbortSignal.timeout(this.#timeoutMs);
    return outer ? AbortSignal.any([outer, t]) : t;
  }

  async #call<T>(what: string, fn: () => Promise<T>, notFound: T): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      if ((e as { status?: number })?.status === 404) return notFound;
      throw forgeErrorOf(what, e, this.#clock.now());
    }
  }

  async pull(ref: PullNumberRef, signal?: AbortSignal): Promise<PullStatus | null> {
    const r = await this.#call(
      "get pull request",
      async () =>
        (
          await this.#octokit.rest.pulls.get({
            owner: ref.owner,
            repo: ref.repo,
            pull_number: ref.number,
            request: { signal: this.#signal(signal) },
          })
        ).data,
      null,
    );
    if (r === null) return null;
    if (typeof r.head?.sha !== "string" || (r.state !== "open" && r.state !== "closed"))
      throw new ForgeError("protocol", "get pull request: the answer has no state or head");
    const checks = await this.#checks(ref, r.head.sha, signal);
    return {
      state: r.merged || r.merged_at ? "merged" : r.state,
      draft: r.draft === true,
      headSha: r.head.sha,
      headRef: String(r.head.ref ?? ""),
      mergeable: typeof r.mergeable === "boolean" ? r.mergeable : null,
      checks,
      url: `https://${this.host}/${ref.owner}/${ref.repo}/pull/${ref.number}`,
    };
  }

  /** The combined status and the check runs of the head commit, summarised (spec §22.3). */
  async #checks(repo: RepoRef, sha: string, signal?: AbortSignal) {
    const base = { owner: repo.owner, repo: repo.repo, ref: sha };
    const combined = await this.#call(
      "get combined status",
      async () =>
        (
          await this.#octokit.rest.repos.getCombinedStatusForRef({
            ...base,
            request: { signal: this.#signal(signal) },
          })
        ).data,
      null,
    );
    // GitHub reports `pending` for a commit no status was ever set on; only listed statuses count.
    const statuses = (combined?.statuses ?? []).map((s) => s.state as StatusState);
    const runs: CheckRun[] = [];
    let pages = 0;
    const it = this.#octokit.paginate.iterator(this.#octokit.rest.checks.listForRef, {
      ...base,
      per_page: 100,
      request: { signal: this.#signal(signal) },
    });
    await this.#call(
      "list check runs",
      async () => {
        for await (const page of it) {
          for (const r of page.data)
            runs.push({ status: r.status as CheckRun["status"], conclusion: r.conclusion ?? null });
          if (++pages >= MAX_CHECK_RUN_PAGES) break;
        }
      },
      undefined,
    );
    return summarizeChecks(statuses, runs);
  }

  async commits(ref: PullNumberRef, limit: number, signal?: AbortSignal): Promise<PullCommit[]> {
    const max = Math.max(0, Math.min(limit, MAX_PULL_COMMITS));
    const out: PullCommit[] = [];
    if (max === 0) return out;
    const it = this.#octokit.paginate.iterator(this.#octokit.rest.pulls.listCommits, {
      owner: ref.owner,
      repo: ref.repo,
      pull_number: ref.number,
      per_page: Math.min(100, max),
      request: { signal: this.#signal(signal) },
    });
    await this.#call(
      "list pull request commits",
      async () => {
        for await (const page of it) {
          for (const c of page.data) {
            out.push({ sha: c.sha, message: String(c.commit?.message ?? "") });
            if (out.length >= max) return;
          }
        }
      },
      undefined,
    );
    return out;
  }

  async pullsByHead(repo: RepoRef, branch: string, signal?: AbortSignal): Promise<number[]> {
    const r = await this.#call(
      "list pull requests by head",
      async () =>
        (
          await this.#octokit.rest.pulls.list({
            owner: repo.owner,
            repo: repo.repo,
            head: `${repo.owner}:${branch}`,
            state: "open",
            per_page: 100,
            request: { signal: this.#signal(signal) },
          })
        ).data,
      [],
    );
    return r.map((p) => p.number).sort((a, b) => b - a);
  }
}
