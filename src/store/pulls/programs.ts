/**
 * Pull-request programs (spec §22.4–§22.6), each run in one transaction on
 * either store: link a pull request to an attempt (idempotent), read them,
 * and the watcher's claim and guarded writes. Facts go through the outbox's
 * `appendFacts`, in the transaction of the change they describe, last.
 */
import type { FoundPull } from "../../core/dispatch/links.js";
import { pullKey } from "../../core/dispatch/links.js";
import type { PullFact, PullObservation } from "../../core/dispatch/pulls.js";
import { isFinalPull } from "../../core/dispatch/pulls.js";
import { A } from "../dispatch/items.js";
import { appendFacts } from "../outbox/facts.js";
import { one, type Program, q } from "../tree/program.js";
import { L, type LinkSource, P, type PullLink, type PullRow, pullSubject, toLink, toPull } from "./rows.js";
import { releaseWait, releaseWaitsOf } from "./waits.js";

/** The links a pull-request row carries when read (spec §22.4). */
export const MAX_LINKS_SHOWN = 100;

function* linksOf(pullId: string): Program<PullLink[]> {
  const rows = yield* q(`SELECT * FROM ${L} WHERE pull_id = CAST(:id AS bigint) ORDER BY id LIMIT :limit`, {
    id: pullId,
    limit: MAX_LINKS_SHOWN,
  });
  return rows.map(toLink);
}

export type LinkResult = { readonly created: boolean; readonly pull: PullRow };

/**
 * Links a pull request to an attempt (spec §22.4): the pull request's row is
 * made once (due for a first look now), the link once per attempt. A new
 * link emits `pr.linked` and may end its item's wait (spec §22.7). Null when
 * the attempt does not exist.
 * Invariant: linking is idempotent: the same link again changes nothing and
 * emits nothing.
 */
export function* linkPull(attemptId: string, f: FoundPull, source: LinkSource): Program<LinkResult | null> {
  const a = yield* one<{ item_id: number }>(`SELECT item_id FROM ${A} WHERE id = CAST(:id AS bigint)`, {
    id: attemptId,
  });
  if (!a) return null;
  const key = pullKey(f);
  yield* q(
    `INSERT INTO ${P} (pull_key, host, owner, repo, number, url, final, version, failures, next_check_at, created_at, updated_at)
     VALUES (:key, :host, :owner, :repo, CAST(:number AS bigint), :url, 0, 0, 0, :now, :now, :now)
     ON CONFLICT (pull_key) DO NOTHING`,
    { key, host: f.host, owner: f.owner, repo: f.repo, number: f.number, url: f.url },
  );
  const p = (yield* one(`SELECT * FROM ${P} WHERE pull_key = :key`, { key }))!;
  const made = yield* q(
    `INSERT INTO ${L} (pull_id, attempt_id, item_id, source, created_at)
     VALUES (CAST(:pull AS bigint), CAST(:attempt AS bigint), CAST(:item AS bigint), :source, :now)
     ON CONFLICT (pull_id, attempt_id) DO NOTHING RETURNING id`,
    { pull: p.id, attempt: attemptId, item: a.item_id, source },
  );
  const pull = toPull(p, yield* linksOf(String(p.id)));
  if (made.length === 0) return { created: false, pull };
  const facts = yield* releaseWait(String(a.item_id));
  yield* appendFacts([
    {
      type: "pr.linked",
      subject: pullSubject(pull),
      data: { attempt: attemptId, item: String(a.item_id), url: pull.url, source },
    },
    ...facts,
  ]);
  return { created: true, pull };
}

export function* getPull(id: string): Program<PullRow | null> {
  const r = yield* one(`SELECT * FROM ${P} WHERE id = CAST(:id AS bigint)`, { id });
  return r ? toPull(r, yield* linksOf(id)) : null;
}

/** The item's pull request: the one most recently linked to any of its attempts (spec §22.7). */
export function* itemPull(itemId: string): Program<PullRow | null> {
  const r = yield* one(
    `SELECT p.* FROM ${L} l JOIN ${P} p ON p.id = l.pull_id WHERE l.item_id = CAST(:id AS bigint) ORDER BY l.id DESC LIMIT 1`,
    { id: itemId },
  );
  return r ? toPull(r, yield* linksOf(String(r.id))) : null;
}

export interface PullFilter {
  itemId?: string | null;
  attemptId?: string | null;
  after?: string | null;
  limit: number;
}

/** Linked pull requests, by id, optionally those of one item or attempt (spec §22.4). */
export function* listPulls(f: PullFilter): Program<PullRow[]> {
  const rows = yield* q(
    `SELECT * FROM ${P} WHERE id > CAST(:after AS bigint)
       AND (CAST(:item AS bigint) IS NULL OR id IN (SELECT pull_id FROM ${L} WHERE item_id = CAST(:item AS bigint)))
       AND (CAST(:attempt AS bigint) IS NULL OR id IN (SELECT pull_id FROM ${L} WHERE attempt_id = CAST(:attempt AS bigint)))
     ORDER BY id LIMIT :limit`,
    { after: f.after ?? "0", item: f.itemId ?? null, attempt: f.attemptId ?? null, limit: f.limit },
  );
  const out: PullRow[] = [];
  for (const r of rows) out.push(toPull(r, yield* linksOf(String(r.id))));
  return out;
}

/**
 * Claims up to `limit` pull requests that are due and not final, least
 * recently due first: each moves its next check `leaseMs` ahead and its
 * version up, so another watcher neither takes it meanwhile nor, if this one
 * stalls past the lease and another takes it, lets this one's write land.
 * spec §22.5. On PostgreSQL rows being claimed right now are skipped.
 */
export function* claimDuePulls(limit: number, leaseMs: number): Program<PullRow[]> {
  const rows = yield* q(
    `UPDATE ${P} SET next_check_at = :now + CAST(:lease AS bigint), version = version + 1
     WHERE id IN (SELECT id FROM ${P} WHERE final = 0 AND next_check_at <= :now
                  ORDER BY next_check_at, id LIMIT :limit @skip)
     RETURNING *`,
    { lease: leaseMs, limit },
  );
  return rows
    .map((r) => toPull(r))
    .sort((a, b) => a.nextCheckAt - b.nextCheckAt || Number(a.id) - Number(b.id));
}

export interface PullGuard {
  readonly id: string;
  readonly version: number;
}

export type WriteResult = { readonly kind: "written"; readonly pull: PullRow } | { readonly kind: "stale" };

/**
 * Writes what a watcher saw (spec §22.5, §22.6), if the pull request is still
 * at the version its claim gave it: the state, the next check `nextInMs`
 * from now (none once final), failures reset; then, when `facts` is not
 * empty (the state changed), the facts and the waits of its items.
 * Invariant: a stale write changes nothing and emits nothing, so two
 * watchers that saw the same change emit its facts once.
 */
export function* recordObservation(
  g: PullGuard,
  seen: PullObservation,
  facts: readonly PullFact[],
  nextInMs: number,
): Program<WriteResult> {
  const r = yield* one(
    `UPDATE ${P} SET state = :state, draft = :draft, head_sha = :sha, mergeable = :mergeable, checks = :checks,
       final = :final, failures = 0, last_error = NULL, checked_at = :now, updated_at = :now,
       next_check_at = :now + CAST(:next AS bigint), version = version + 1
     WHERE id = CAST(:id AS bigint) AND version = CAST(:version AS bigint) RETURNING *`,
    {
      id: g.id,
      version: g.version,
      state: seen.state,
      draft: seen.draft ? 1 : 0,
      sha: seen.headSha,
      mergeable: seen.mergeable === null ? null : seen.mergeable ? 1 : 0,
      checks: seen.checks,
      final: isFinalPull(seen.state) ? 1 : 0,
      next: nextInMs,
    },
  );
  if (!r) return { kind: "stale" };
  const pull = toPull(r);
  if (facts.length > 0) {
    const waits = yield* releaseWaitsOf(pull.id);
    const subject = pullSubject(pull);
    yield* appendFacts([
      ...facts.map((f) => ({ ...f, subject, data: { ...f.data, url: pull.url } })),
      ...waits,
    ]);
  }
  return { kind: "written", pull };
}

/** Records a failed look (spec §22.5): one more failure in a row, its error, the next check after the backoff. */
export function* recordFailure(g: PullGuard, error: string, nextInMs: number): Program<WriteResult> {
  const r = yield* one(
    `UPDATE ${P} SET failures = failures + 1, last_error = :error, checked_at = :now, updated_at = :now,
       next_check_at = :now + CAST(:next AS bigint), version = version + 1
     WHERE id = CAST(:id AS bigint) AND version = CAST(:version AS bigint) RETURNING *`,
    { id: g.id, version: g.version, error, next: nextInMs },
  );
  return r ? { kind: "written", pull: toPull(r) } : { kind: "stale" };
}
