/**
 * A forge in memory (spec §22.3): `ForgeModel` holds repositories, pull
 * requests, commits and checks, scripted by a test; `FakeForge` answers the
 * Forge port from it, and the GitHub mock server (testing/github-mock.ts)
 * serves the same model over GitHub's REST shapes, so one contract suite
 * holds both to the same answers. Failures are scripted too (`failNext`):
 * rate limits, an unavailable host, a refused token.
 */
import type { Clock } from "../../core/clock.js";
import { systemClock } from "../../core/clock.js";
import { type CheckRun, type StatusState, summarizeChecks } from "../../core/dispatch/pulls.js";
import {
  type Forge,
  ForgeError,
  MAX_PULL_COMMITS,
  type PullCommit,
  type PullNumberRef,
  type PullStatus,
  type RepoRef,
} from "./forge.js";

export interface ModelPull {
  number: number;
  state: "open" | "closed";
  merged: boolean;
  draft: boolean;
  headSha: string;
  headRef: string;
  mergeable: boolean | null;
  commits: PullCommit[];
}

/** A failure the next call meets: an HTTP status, with a rate limit's headers when it is one. */
export interface ScriptedFailure {
  readonly status: 401 | 403 | 429 | 500 | 502 | 503;
  /** `retry-after`, seconds. */
  readonly retryAfterSeconds?: number;
  /** `x-ratelimit-reset` (a 403 with `x-ratelimit-remaining: 0`), as an instant in ms. */
  readonly resetAt?: number;
}

const key = (owner: string, repo: string) => `${owner}/${repo}`.toLowerCase();

export class ForgeModel {
  readonly #pulls = new Map<string, Map<number, ModelPull>>();
  readonly #checks = new Map<string, { statuses: StatusState[]; runs: CheckRun[] }>();
  readonly #failures: ScriptedFailure[] = [];
  /** Calls answered (failures included), for tests that count requests. */
  calls = 0;

  constructor(
    readonly host = "github.com",
    readonly clock: Clock = systemClock,
  ) {}

  addPull(repo: RepoRef, p: Partial<ModelPull> & { number: number }): ModelPull {
    const pull: ModelPull = {
      state: "open",
      merged: false,
      draft: false,
      headSha: `sha-${p.number}-1`,
      headRef: `branch-${p.number}`,
      mergeable: null,
      commits: [],
      ...p,
    };
    const k = key(repo.owner, repo.repo);
    if (!this.#pulls.has(k)) this.#pulls.set(k, new Map());
    this.#pulls.get(k)!.set(p.number, pull);
    return pull;
  }

  getPull(ref: PullNumberRef): ModelPull | undefined {
    return this.#pulls.get(key(ref.owner, ref.repo))?.get(ref.number);
  }

  /** Changes a pull request (merging sets `state: closed, merged: true`). */
  update(ref: PullNumberRef, patch: Partial<ModelPull>): void {
    const p = this.getPull(ref);
    if (!p) throw new Error(`no pull ${ref.owner}/${ref.repo}#${ref.number}`);
    Object.assign(p, patch);
  }

  merge(ref: PullNumberRef): void {
    this.update(ref, { state: "closed", merged: true, mergeable: null });
  }

  setChecks(sha: string, statuses: StatusState[], runs: CheckRun[] = []): void {
    this.#checks.set(sha, { statuses, runs });
  }

  checksOf(sha: string): { statuses: StatusState[]; runs: CheckRun[] } {
    return this.#checks.get(sha) ?? { statuses: [], runs: [] };
  }

  pullsOf(repo: RepoRef): ModelPull[] {
    return [...(this.#pulls.get(key(repo.owner, repo.repo))?.values() ?? [])];
  }

  failNext(...f: ScriptedFailure[]): void {
    this.#failures.push(...f);
  }

  /** Counts a call and returns the failure it meets, if one is scripted. */
  takeCall(): ScriptedFailure | undefined {
    this.calls++;
    return this.#failures.shift();
  }

  statusOf(p: ModelPull): PullStatus {
    const c = this.checksOf(p.headSha);
    return {
      state: p.merged ? "merged" : p.state,
      draft: p.draft,
      headSha: p.headSha,
      headRef: p.headRef,
      mergeable: p.mergeable,
      checks: summarizeChecks(c.statuses, c.runs),
      url: `https://${this.host}/OWNER/REPO/pull/${p.number}`,
    };
  }
}

/** The error a scripted failure means, as GitHubForge maps the same HTTP answer. */
export function failureError(f: ScriptedFailure, now: number): ForgeError {
  if (
    f.status === 429 ||
    (f.status === 403 && (f.resetAt !== undefined || f.retryAfterSeconds !== undefined))
  ) {
    const ms =
      f.retryAfterSeconds !== undefined
        ? f.retryAfterSeconds * 1000
        : Math.max(0, Math.ceil(f.resetAt! / 1000) * 1000 - now);
    return new ForgeError("rate_limited", `rate limited (HTTP ${f.status})`, f.status, ms);
  }
  if (f.status === 401 || f.status === 403)
    return new ForgeError("auth", `refused (HTTP ${f.status})`, f.status);
  return new ForgeError("unavailable", `unavailable (HTTP ${f.status})`, f.status);
}

/** The Forge port over a ForgeModel, with no network. */
export class FakeForge implements Forge {
  readonly host: string;
  constructor(readonly model: ForgeModel) {
    this.host = model.host.toLowerCase();
  }

  #call(): void {
    const f = this.model.takeCall();
    if (f) throw failureError(f, this.model.clock.now());
  }

  async pull(ref: PullNumberRef): Promise<PullStatus | null> {
    this.#call();
    const p = this.model.getPull(ref);
    if (!p) return null;
    const s = this.model.statusOf(p);
    return { ...s, url: `https://${this.host}/${ref.owner}/${ref.repo}/pull/${p.number}` };
  }

  async commits(ref: PullNumberRef, limit: number): Promise<PullCommit[]> {
    this.#call();
    const p = this.model.getPull(ref);
    return p ? p.commits.slice(0, Math.min(limit, MAX_PULL_COMMITS)).map((c) => ({ ...c })) : [];
  }

  async pullsByHead(repo: RepoRef, branch: string): Promise<number[]> {
    this.#call();
    return this.model
      .pullsOf(repo)
      .filter((p) => p.state === "open" && p.headRef === branch)
      .map((p) => p.number)
      .sort((a, b) => b - a);
  }
}
