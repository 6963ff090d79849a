/**
 * The outbox sender (spec §21.5–§21.13): delivers each destination's facts
 * to its sink, in seq order, in bounded batches, at least once.
 *
 * One pass (`runOnce`) visits every destination. For each, modes in order:
 * - lease: a conditional write (spec §21.7); held by another sender → skip.
 * - gate: `pickSendMove` on the row — dead → skip (dead-letter blocks the
 *   destination, spec §21.10); not due yet → remember the wake-up and skip.
 * - cut: read a window after the cursor, `planBatch` → idle (done), pass
 *   (advance over facts the filter does not take, then cut again) or send.
 * - deliver: the sink, under a timeout and the sender's stop signal.
 *   Accepted → advance the cursor (guarded; refused = lease lost, stop this
 *   destination) and cut again, at most `maxBatchesPerPass` times.
 *   Failed → `decideDeliveryFailure` → record retrying (with the delay) or dead.
 * `start` repeats passes until `stop`, sleeping until the next due
 * destination or `pollMs`; every `pruneEveryMs` it prunes delivered facts.
 * `stop` aborts deliveries in flight and gives the leases back.
 *
 * Invariant: a cursor moves only past facts its sink accepted or its filter
 * does not take, and only by the sender that holds the lease (spec §21.8).
 */
import { hostname } from "node:os";
import { setTimeout as delay } from "node:timers/promises";
import { type Clock, type Random, systemClock, systemRandom } from "../../core/clock.js";
import {
  type BatchBounds,
  DEFAULT_BATCH_BOUNDS,
  DEFAULT_DELIVERY_POLICY,
  type DeliveryPolicy,
  decideDeliveryFailure,
  type FactFilter,
  isFilterPattern,
  pickSendMove,
  planBatch,
} from "../../core/outbox.js";
import { ConfigError } from "../../errors.js";
import { checkDestinationName, type FactRow, type OutboxOps } from "../../store/outbox/ops.js";
import { type Batch, DeliveryError, type Sink } from "./types.js";

/** A destination as configured in code or in the dispatch config file (spec §21.5). */
export interface Destination {
  readonly name: string;
  readonly sink: Sink;
  /** Fact types it takes: exact names, `prefix.*`, or `*` (spec §21.5). */
  readonly types: FactFilter;
  /** Where a new destination's cursor starts: before every retained fact (default) or at the newest. */
  readonly from?: "start" | "end";
  readonly batch?: Partial<BatchBounds>;
  readonly policy?: Partial<DeliveryPolicy>;
  /** A delivery's time limit (default 10 s). */
  readonly timeoutMs?: number;
}

export interface SenderOptions {
  readonly store: { readonly outbox: OutboxOps };
  readonly destinations: readonly Destination[];
  /** This sender's name in leases (default host:pid:random). */
  readonly holder?: string;
  /** Lease per destination, renewed before each batch; must exceed every delivery timeout (default 60 s). */
  readonly leaseMs?: number;
  /** Idle wait between passes (default 1 s). */
  readonly pollMs?: number;
  /** Batches per destination per pass (default 10), so one busy destination does not starve the others. */
  readonly maxBatchesPerPass?: number;
  /** Delivered facts are pruned after this (default 7 days, spec §21.13); 0 turns the prune off. */
  readonly retentionMs?: number;
  readonly pruneEveryMs?: number;
  readonly random?: Random;
  /** For the waits between passes only; decisions use the store's clock. */
  readonly clock?: Clock;
  /** Called with what went wrong outside a delivery (a store error); the loop goes on. */
  readonly onError?: (e: unknown) => void;
  /** Test hook: runs after a sink accepted a batch and before the cursor moves. */
  readonly afterDeliver?: (batch: Batch) => Promise<void> | void;
}

/** What one pass did. */
export interface SendReport {
  facts: number;
  batches: number;
  failures: number;
  dead: string[];
  /** Destinations another sender holds. */
  held: string[];
  /** The earliest instant a waiting destination is due (store clock), if any. */
  nextAt: number | null;
}

interface Resolved {
  readonly d: Destination;
  readonly bounds: BatchBounds;
  readonly policy: DeliveryPolicy;
  readonly timeoutMs: number;
  readonly window: number;
}

const MAX_WINDOW = 1_000;

/** Wire bytes of one fact: its JSON and one separator (spec §21.9). */
export function factWireBytes(f: FactRow): number {
  return Buffer.byteLength(JSON.stringify(f)) + 1;
}

function resolve(d: Destination, leaseMs: number): Resolved {
  checkDestinationName(d.name);
  if (!Array.isArray(d.types) || d.types.length === 0 || !d.types.every(isFilterPattern))
    throw new ConfigError(`outbox destination ${d.name}: "types" must list fact types, "prefix.*" or "*"`);
  const bounds = { ...DEFAULT_BATCH_BOUNDS, ...d.batch };
  if (!Number.isInteger(bounds.maxFacts) || bounds.maxFacts < 1 || bounds.maxFacts > MAX_WINDOW)
    throw new ConfigError(`outbox destination ${d.name}: batch.maxFacts must be 1–${MAX_WINDOW}`);
  if (!Number.isInteger(bounds.maxBytes) || bounds.maxBytes < 1024 || bounds.maxBytes > 64 * 1024 * 1024)
    throw new ConfigError(`outbox destination ${d.name}: batch.maxBytes must be 1 KiB–64 MiB`);
  const policy = { ...DEFAULT_DELIVERY_POLICY, ...d.policy };
  if (!(policy.maxAttempts >= 1) || !(policy.maxAgeMs >= 0))
    throw new ConfigError(`outbox destination ${d.name}: policy.maxAttempts ≥ 1 and maxAgeMs ≥ 0`);
  const timeoutMs = d.timeoutMs ?? 10_000;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs + 1_000 > leaseMs)
    throw new ConfigError(
      `outbox destination ${d.name}: timeoutMs must be ≥ 1 and 1 s shorter than the lease`,
    );
  return { d, bounds, policy, timeoutMs, window: Math.min(MAX_WINDOW, Math.max(10, bounds.maxFacts * 2)) };
}

/** The text a failure leaves in the status: the sink's kind and message, bounded (spec §21.10). */
function errorText(sink: Sink, e: unknown): string {
  const m = e instanceof Error ? e.message : String(e);
  return `${sink.kind}: ${m}`.slice(0, 1_000);
}

export class OutboxSender {
  readonly holder: string;
  readonly #o: OutboxOps;
  readonly #dests: Resolved[];
  readonly #leaseMs: number;
  readonly #pollMs: number;
  readonly #maxBatches: number;
  readonly #retentionMs: number;
  readonly #pruneEveryMs: number;
  readonly #random: Random;
  readonly #clock: Clock;
  readonly #opts: SenderOptions;
  #stop = new AbortController();
  #loop: Promise<void> | null = null;
  #registered = false;
  #lastPrune = Number.NEGATIVE_INFINITY;

  constructor(o: SenderOptions) {
    this.#opts = o;
    this.#o = o.store.outbox;
    this.#leaseMs = o.leaseMs ?? 60_000;
    this.#dests = o.destinations.map((d) => resolve(d, this.#leaseMs));
    const names = new Set(this.#dests.map((r) => r.d.name));
    if (names.size !== this.#dests.length) throw new ConfigError("outbox destination names must be unique");
    this.holder = o.holder ?? `${hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 8)}`;
    this.#pollMs = o.pollMs ?? 1_000;
    this.#maxBatches = o.maxBatchesPerPass ?? 10;
    this.#retentionMs = o.retentionMs ?? 7 * 24 * 3_600_000;
    this.#pruneEveryMs = o.pruneEveryMs ?? 60_000;
    this.#random = o.random ?? systemRandom;
    this.#clock = o.clock ?? systemClock;
  }

  get destinations(): readonly Destination[] {
    return this.#dests.map((r) => r.d);
  }

  /** One pass over every destination (spec §21.7–§21.10). */
  async runOnce(): Promise<SendReport> {
    const report: SendReport = { facts: 0, batches: 0, failures: 0, dead: [], held: [], nextAt: null };
    if (!this.#registered) {
      for (const r of this.#dests) await this.#o.ensureDestination(r.d.name, r.d.from ?? "start");
      this.#registered = true;
    }
    for (const r of this.#dests) {
      if (this.#stop.signal.aborted) break;
      await this.#runDestination(r, report);
    }
    await this.#maybePrune();
    return report;
  }

  async #runDestination(r: Resolved, report: SendReport): Promise<void> {
    for (let i = 0; i < this.#maxBatches && !this.#stop.signal.aborted; i++) {
      const lease = await this.#o.lease(r.d.name, this.holder, this.#leaseMs);
      if (!lease) {
        report.held.push(r.d.name);
        return;
      }
      const { row, now } = lease;
      const move = pickSendMove(row, now);
      if (move.kind === "dead") {
        report.dead.push(r.d.name);
        return;
      }
      if (move.kind === "wait") {
        report.nextAt = report.nextAt === null ? move.until : Math.min(report.nextAt, move.until);
        return;
      }
      const window = await this.#o.facts(row.cursor, r.window);
      const plan = planBatch(window, r.d.types, r.bounds, factWireBytes);
      if (plan.kind === "idle") return;
      if (plan.kind === "pass") {
        if (!(await this.#o.advance(r.d.name, this.holder, row.cursor, plan.to, 0))) return;
        continue;
      }
      const first = plan.facts[0]!.seq;
      const batch: Batch = {
        destination: r.d.name,
        id: `${r.d.name}:${first}-${plan.to}`,
        facts: plan.facts,
      };
      const failed = await this.#deliver(r, batch);
      if (failed === null) {
        await this.#opts.afterDeliver?.(batch);
        if (!(await this.#o.advance(r.d.name, this.holder, row.cursor, plan.to, plan.facts.length))) return;
        report.facts += plan.facts.length;
        report.batches++;
        continue;
      }
      if (this.#stop.signal.aborted) return; // stopped mid-delivery: not the sink's failure
      report.failures++;
      const d = decideDeliveryFailure(row.failures + 1, row.since, now, failed, r.policy, this.#random);
      const next = d.kind === "retry" ? d : ({ kind: "dead", batch: batch.id } as const);
      const text = d.kind === "dead" ? `${failed.text} (dead-lettered: ${d.reason})` : failed.text;
      await this.#o.fail(r.d.name, this.holder, row.cursor, { next, error: text });
      if (d.kind === "dead") report.dead.push(r.d.name);
      else
        report.nextAt = report.nextAt === null ? now + d.delayMs : Math.min(report.nextAt, now + d.delayMs);
      return;
    }
  }

  /** Delivers one batch; null when the sink accepted it, else how it failed. */
  async #deliver(
    r: Resolved,
    batch: Batch,
  ): Promise<{ retryable: boolean; retryAfterMs: number | undefined; text: string } | null> {
    const signal = AbortSignal.any([this.#stop.signal, AbortSignal.timeout(r.timeoutMs)]);
    try {
      await r.d.sink.deliver(batch, signal);
      return null;
    } catch (e) {
      const de = e instanceof DeliveryError ? e : null;
      const timedOut = signal.aborted && !this.#stop.signal.aborted;
      const text =
        timedOut && !de ? `${r.d.sink.kind}: timed out after ${r.timeoutMs} ms` : errorText(r.d.sink, e);
      return { retryable: de ? de.retryable : true, retryAfterMs: de?.retryAfterMs, text };
    }
  }

  async #maybePrune(): Promise<void> {
    if (this.#retentionMs <= 0) return;
    const t = this.#clock.now();
    if (t - this.#lastPrune < this.#pruneEveryMs) return;
    this.#lastPrune = t;
    // spec §21.13: bounded batches, a few per pass at most.
    for (let i = 0; i < 10 && (await this.#o.prune(this.#retentionMs, 1_000)) === 1_000; i++);
  }

  /** Runs passes until `stop` (spec §21.7). Errors of the store are reported and the loop goes on. */
  start(): void {
    if (this.#loop) return;
    this.#loop = (async () => {
      while (!this.#stop.signal.aborted) {
        let wait = this.#pollMs;
        try {
          const rep = await this.runOnce();
          if (rep.batches > 0) wait = 0;
          else if (rep.nextAt !== null) {
            const { now } = await this.#o.head();
            wait = Math.max(0, Math.min(this.#pollMs, rep.nextAt - now));
          }
        } catch (e) {
          this.#opts.onError?.(e);
        }
        // An abort (stop) ends the wait early; it is not an error here.
        if (wait > 0) await delay(wait, undefined, { signal: this.#stop.signal }).catch(() => {});
      }
    })();
  }

  /** Stops the loop, aborts deliveries in flight, gives the leases back (spec §21.7). */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#loop?.catch(() => {});
    this.#loop = null;
    for (const r of this.#dests) await this.#o.release(r.d.name, this.holder).catch(() => {});
    for (const r of this.#dests) await r.d.sink.close?.().catch(() => {});
  }
}
