/**
 * The pull-request operations of a store (spec §22.4–§22.6): named, checked
 * at the boundary, each one program (programs.ts) run in one transaction by
 * either store, through the dispatch operations' program runner:
 * `pullOps(store)`.
 */
import type { FoundPull } from "../../core/dispatch/links.js";
import { MAX_PULL_NUMBER, parsePullUrl } from "../../core/dispatch/links.js";
import type { PullFact, PullObservation } from "../../core/dispatch/pulls.js";
import { CHECKS_STATES, PULL_STATES } from "../../core/dispatch/pulls.js";
import { ValidationError } from "../../errors.js";
import type { DispatchCapable, RunProgram } from "../dispatch/ops.js";
import { id, limit } from "../dispatch/ops.js";
import * as p from "./programs.js";
import type { LinkSource, PullRow } from "./rows.js";

export type { LinkResult, PullFilter, PullGuard, WriteResult } from "./programs.js";
export type { LinkSource, PullLink, PullRow } from "./rows.js";

/** The longest error text kept with a pull request. */
export const MAX_PULL_ERROR_CHARS = 500;
/** The longest delay a watcher may set before a next check (a day). */
export const MAX_NEXT_CHECK_MS = 24 * 3600_000;

const SOURCES: readonly LinkSource[] = ["url", "trailer", "manual"];

function delay(what: string, v: number): number {
  if (!Number.isSafeInteger(v) || v < 0 || v > MAX_NEXT_CHECK_MS)
    throw new ValidationError(`${what} must be an integer of ms in 0–${MAX_NEXT_CHECK_MS}`);
  return v;
}

function guard(g: p.PullGuard): p.PullGuard {
  id("pull request id", g?.id);
  if (!Number.isSafeInteger(g.version) || g.version < 0)
    throw new ValidationError("a guard's version is an integer");
  return g;
}

/** A found pull request must be what findPullUrls returns: its URL re-parses to itself. */
function found(f: FoundPull): FoundPull {
  const again = typeof f?.url === "string" ? parsePullUrl(f.url, [f.host]) : null;
  if (
    !again ||
    again.url !== f.url ||
    again.number !== f.number ||
    !Number.isInteger(f.number) ||
    f.number > MAX_PULL_NUMBER
  )
    throw new ValidationError(
      "a pull request must be a parsed pull-request URL (findPullUrls, parsePullUrl)",
    );
  return again;
}

function observation(o: PullObservation): PullObservation {
  if (
    !PULL_STATES.includes(o?.state) ||
    !CHECKS_STATES.includes(o.checks) ||
    typeof o.draft !== "boolean" ||
    typeof o.headSha !== "string" ||
    o.headSha.length === 0 ||
    o.headSha.length > 100 ||
    (o.mergeable !== null && typeof o.mergeable !== "boolean")
  )
    throw new ValidationError(
      "an observation needs a state, checks, draft, a head sha (≤ 100 chars) and mergeable",
    );
  return o;
}

/**
 * The pull-request operations over a store's program runner.
 * Invariant: every refusal of bad input is a ValidationError thrown before
 * the program runs, so bad input writes nothing.
 */
export class PullOps {
  constructor(readonly run: RunProgram) {}

  /** spec §22.4: idempotent; null when the attempt does not exist. */
  async link(attemptId: string, pull: FoundPull, source: LinkSource): Promise<p.LinkResult | null> {
    id("attempt id", attemptId);
    const f = found(pull);
    if (!SOURCES.includes(source))
      throw new ValidationError(`a link's source is one of ${SOURCES.join(", ")}`);
    return this.run(() => p.linkPull(attemptId, f, source));
  }

  async get(pullId: string): Promise<PullRow | null> {
    return this.run(() => p.getPull(id("pull request id", pullId)));
  }

  /** spec §22.7: the pull request an item's wait looks at, or null. */
  async ofItem(itemId: string): Promise<PullRow | null> {
    return this.run(() => p.itemPull(id("item id", itemId)));
  }

  async list(f: p.PullFilter): Promise<PullRow[]> {
    limit(f.limit);
    if (f.itemId) id("item id", f.itemId);
    if (f.attemptId) id("attempt id", f.attemptId);
    if (f.after) id("after", f.after);
    return this.run(() => p.listPulls(f));
  }

  /** spec §22.5. */
  async claimDue(n: number, leaseMs: number): Promise<PullRow[]> {
    return this.run(() => p.claimDuePulls(limit(n), delay("leaseMs", leaseMs)));
  }

  /** spec §22.5–§22.6: guarded on the claim's version; `facts` from diffPull. */
  async record(g: p.PullGuard, seen: PullObservation, facts: readonly PullFact[], nextInMs: number) {
    guard(g);
    observation(seen);
    if (!Array.isArray(facts) || facts.length > 10)
      throw new ValidationError("at most 10 facts per observation");
    return this.run(() => p.recordObservation(g, seen, facts, delay("nextInMs", nextInMs)));
  }

  async recordFailure(g: p.PullGuard, error: string, nextInMs: number): Promise<p.WriteResult> {
    guard(g);
    const text = typeof error === "string" ? error.slice(0, MAX_PULL_ERROR_CHARS) : "error";
    return this.run(() => p.recordFailure(g, text, delay("nextInMs", nextInMs)));
  }
}

/** The pull-request operations of a store that carries the dispatch operations. */
export function pullOps(store: DispatchCapable): PullOps {
  return new PullOps(store.dispatch.run);
}
