/** Pull-request rows as the store returns them (spec §22.4), and their mapping from SQL rows. */
import type { ChecksState, KnownPull, PullState } from "../../core/dispatch/pulls.js";

export const P = "{s}.ratchet_dispatch_pulls";
export const L = "{s}.ratchet_dispatch_pull_links";

export type LinkSource = "url" | "trailer" | "manual";

export interface PullLink {
  readonly attemptId: string;
  readonly itemId: string;
  readonly source: LinkSource;
  readonly createdAt: number;
}

export interface PullRow extends KnownPull {
  readonly id: string;
  readonly host: string;
  readonly owner: string;
  readonly repo: string;
  readonly number: number;
  readonly url: string;
  readonly state: PullState | null;
  readonly checks: ChecksState | null;
  /** Merged or closed: the watcher looks no more. */
  readonly final: boolean;
  /** The compare-and-set guard of every watcher write. */
  readonly version: number;
  /** Forge errors in a row. */
  readonly failures: number;
  readonly lastError: string | null;
  readonly checkedAt: number | null;
  readonly nextCheckAt: number;
  readonly createdAt: number;
  readonly updatedAt: number;
  /** The attempts it is linked to, oldest link first (at most 100). */
  readonly links: readonly PullLink[];
}

const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));
const bool = (v: unknown): boolean | null => (v === null || v === undefined ? null : Number(v) === 1);

export function toPull(r: Record<string, unknown>, links: readonly PullLink[] = []): PullRow {
  return {
    id: String(r.id),
    host: r.host as string,
    owner: r.owner as string,
    repo: r.repo as string,
    number: Number(r.number),
    url: r.url as string,
    state: (r.state as PullState | null) ?? null,
    draft: bool(r.draft),
    headSha: (r.head_sha as string | null) ?? null,
    mergeable: bool(r.mergeable),
    checks: (r.checks as ChecksState | null) ?? null,
    final: Number(r.final) === 1,
    version: Number(r.version),
    failures: Number(r.failures),
    lastError: (r.last_error as string | null) ?? null,
    checkedAt: num(r.checked_at),
    nextCheckAt: Number(r.next_check_at),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
    links,
  };
}

export function toLink(r: Record<string, unknown>): PullLink {
  return {
    attemptId: String(r.attempt_id),
    itemId: String(r.item_id),
    source: r.source as LinkSource,
    createdAt: Number(r.created_at),
  };
}

/** The subject of a pull request's facts (spec §22.6): `pr:host/owner/repo#n`. */
export function pullSubject(p: { host: string; owner: string; repo: string; number: number }): string {
  return `pr:${p.host}/${p.owner}/${p.repo}#${p.number}`;
}
