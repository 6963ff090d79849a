/**
 * The pull-request watcher (spec §22.5–§22.6). Each pass claims up to
 * `batch` linked pull requests that are due and not final, looks at each on
 * its forge (at most `concurrency` at once), and writes what it saw guarded
 * on the claim: a change with its facts (`diffPull`), the next check after
 * the interval, or, on a forge error, the failure and the next check after
 * the backoff (`nextCheckDelayMs`, never before a rate limit's reset). A
 * pull request whose head moved has its commits read, and the attempts
 * their `Ratchet-Attempt` trailers name are linked to it.
 *
 * Several watchers may share a store: a claim moves the pull request's next
 * check ahead by `leaseMs` and bumps its version, so another watcher does not
 * take it meanwhile, and a watcher that stalled past its lease writes nothing
 * (its guard is stale) — a change's facts are emitted once.
 *
 * Modes of `run()`: running (a pass, then a wait of `intervalMs` or until
 * `stop()`), stopping (the pass in progress finishes), stopped. A host that
 * rate-limited a call is paused until its reset: its pull requests are put
 * off to then without a call.
 */
import { type Clock, type Random, systemClock, systemRandom } from "../../core/clock.js";
import { attemptTrailers, MAX_TRAILER_IDS } from "../../core/dispatch/links.js";
import {
  DEFAULT_WATCH_POLICY,
  diffPull,
  isFinalPull,
  nextCheckDelayMs,
  type WatchPolicy,
} from "../../core/dispatch/pulls.js";
import { ConfigError } from "../../errors.js";
import type { DispatchCapable } from "../../store/dispatch/ops.js";
import { MAX_NEXT_CHECK_MS, type PullOps, type PullRow, pullOps } from "../../store/pulls/ops.js";
import { type Forge, ForgeError, MAX_PULL_COMMITS } from "./forge.js";

export interface PullWatcherOptions {
  store: DispatchCapable;
  forges: readonly Forge[];
  policy?: Partial<WatchPolicy>;
  /** Pull requests claimed per pass (default 50, at most 1,000). */
  batch?: number;
  /** Forge calls in flight at once (default 4, at most 32). */
  concurrency?: number;
  /** How long a claim keeps a pull request from other watchers (default 60 s). */
  leaseMs?: number;
  /** The wait between passes in `run()` (default 10 s). */
  intervalMs?: number;
  /** Read commits for trailers when a head moves (default true). */
  linkTrailers?: boolean;
  clock?: Clock;
  random?: Random;
}

export type Look =
  | { readonly kind: "changed" | "unchanged"; readonly pull: string; readonly facts: readonly string[] }
  | { readonly kind: "failed"; readonly pull: string; readonly error: string; readonly retryInMs: number }
  | { readonly kind: "stale"; readonly pull: string };

export interface WatchReport {
  readonly looks: Look[];
  /** Attempts linked through trailers this pass: `attempt → pull id`. */
  readonly linked: { attempt: string; pull: string }[];
  readonly errors: string[];
}

function bounded(what: string, v: number | undefined, dflt: number, min: number, max: number): number {
  const n = v ?? dflt;
  if (!Number.isInteger(n) || n < min || n > max)
    throw new ConfigError(`${what} must be an integer in ${min}–${max}`);
  return n;
}

export class PullWatcher {
  readonly ops: PullOps;
  readonly policy: WatchPolicy;
  readonly #forges = new Map<string, Forge>();
  readonly #pausedUntil = new Map<string, number>();
  readonly #batch: number;
  readonly #concurrency: number;
  readonly #leaseMs: number;
  readonly #intervalMs: number;
  readonly #trailers: boolean;
  readonly #clock: Clock;
  readonly #random: Random;
  #stopping = false;
  #wake: (() => void) | null = null;

  constructor(o: PullWatcherOptions) {
    this.ops = pullOps(o.store);
    for (const f of o.forges) {
      if (this.#forges.has(f.host)) throw new ConfigError(`two forges for host "${f.host}"`);
      this.#forges.set(f.host, f);
    }
    const p = { ...DEFAULT_WATCH_POLICY, ...o.policy };
    bounded("policy.intervalMs", p.intervalMs, 0, 1_000, MAX_NEXT_CHECK_MS);
    bounded("policy.maxBackoffMs", p.maxBackoffMs, 0, p.intervalMs, MAX_NEXT_CHECK_MS);
    this.policy = Object.freeze(p);
    this.#batch = bounded("batch", o.batch, 50, 1, 1_000);
    this.#concurrency = bounded("concurrency", o.concurrency, 4, 1, 32);
    this.#leaseMs = bounded("leaseMs", o.leaseMs, 60_000, 1_000, MAX_NEXT_CHECK_MS);
    this.#intervalMs = bounded("intervalMs", o.intervalMs, 10_000, 10, 3_600_000);
    this.#trailers = o.linkTrailers ?? true;
    this.#clock = o.clock ?? systemClock;
    this.#random = o.random ?? systemRandom;
  }

  /** One pass (see the class comment). One pull request's trouble is in `errors`, not thrown. */
  async pass(): Promise<WatchReport> {
    const report: WatchReport = { looks: [], linked: [], errors: [] };
    const claimed = await this.ops.claimDue(this.#batch, this.#leaseMs);
    let next = 0;
    const worker = async () => {
      while (next < claimed.length) {
        const row = claimed[next++]!;
        try {
          report.looks.push(await this.#look(row, report));
        } catch (e) {
          report.errors.push(`pull request ${row.id}: ${(e as Error).message}`);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.#concurrency, claimed.length) }, worker));
    return report;
  }

  async #look(row: PullRow, report: WatchReport): Promise<Look> {
    const forge = this.#forges.get(row.host);
    if (!forge)
      return this.#failed(row, new ForgeError("protocol", `no forge is configured for ${row.host}`));
    const paused = (this.#pausedUntil.get(row.host) ?? 0) - this.#clock.now();
    if (paused > 0)
      return this.#failed(row, new ForgeError("rate_limited", `${row.host} is rate limited`, null, paused));
    let seen: Awaited<ReturnType<Forge["pull"]>>;
    try {
      seen = await forge.pull(row);
    } catch (e) {
      return this.#failed(row, e);
    }
    if (seen === null)
      return this.#failed(row, new ForgeError("protocol", "the forge has no such pull request"));
    const d = diffPull(row, seen);
    const facts = d.kind === "changed" ? d.facts : [];
    const nextIn = isFinalPull(seen.state) ? 0 : nextCheckDelayMs(0, this.policy, this.#random);
    const w = await this.ops.record(row, seen, facts, nextIn);
    if (w.kind === "stale") return { kind: "stale", pull: row.id };
    if (this.#trailers && row.headSha !== seen.headSha) await this.#linkTrailers(forge, row, report);
    return { kind: d.kind, pull: row.id, facts: facts.map((f) => f.type) };
  }

  /** spec §22.2: the attempts a pull request's commits name in trailers are linked to it. */
  async #linkTrailers(forge: Forge, row: PullRow, report: WatchReport): Promise<void> {
    try {
      const ids = new Set<string>();
      for (const c of await forge.commits(row, MAX_PULL_COMMITS))
        for (const id of attemptTrailers(c.message)) if (ids.size < MAX_TRAILER_IDS) ids.add(id);
      for (const id of ids) {
        const r = await this.ops.link(id, row, "trailer");
        if (r?.created) report.linked.push({ attempt: id, pull: row.id });
      }
    } catch (e) {
      // The state was written; the trailers are read again when the head next moves.
      report.errors.push(`pull request ${row.id} trailers: ${(e as Error).message}`);
    }
  }

  async #failed(row: PullRow, e: unknown): Promise<Look> {
    const fe = e instanceof ForgeError ? e : new ForgeError("unavailable", "the forge call failed");
    if (fe.kind === "rate_limited" && fe.retryAfterMs !== null)
      this.#pausedUntil.set(row.host, this.#clock.now() + fe.retryAfterMs);
    const retryInMs = Math.min(
      MAX_NEXT_CHECK_MS,
      nextCheckDelayMs(row.failures + 1, this.policy, this.#random, fe.retryAfterMs),
    );
    const w = await this.ops.recordFailure(row, fe.message, retryInMs);
    return w.kind === "stale"
      ? { kind: "stale", pull: row.id }
      : { kind: "failed", pull: row.id, error: fe.message, retryInMs };
  }

  /** Passes until `stop()` (see the class comment); `onPass` sees each report. */
  async run(o: { onPass?: (r: WatchReport) => void } = {}): Promise<void> {
    while (!this.#stopping) {
      try {
        o.onPass?.(await this.pass());
      } catch (e) {
        o.onPass?.({ looks: [], linked: [], errors: [(e as Error).message] });
      }
      if (this.#stopping) break;
      await new Promise<void>((ok) => {
        const t = setTimeout(ok, this.#intervalMs);
        this.#wake = () => {
          clearTimeout(t);
          ok();
        };
      });
      this.#wake = null;
    }
  }

  stop(): void {
    this.#stopping = true;
    this.#wake?.();
  }
}
