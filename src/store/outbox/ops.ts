/**
 * The outbox operations of a store (spec part 21): named, checked at the
 * boundary, each one program (facts.ts, destinations.ts) that both the SQLite
 * and the PostgreSQL store run in one transaction. A store exposes them as
 * `store.outbox`; the sender and the CLI use nothing else of the store's.
 * Other layers write facts by yielding `appendFacts` inside their own
 * programs (facts.ts), never through a separate call.
 */
import { ValidationError } from "../../errors.js";
import type { Program } from "../tree/program.js";
import * as d from "./destinations.js";
import { appendFacts, checkFacts, type FactInput } from "./facts.js";

export type { DestinationRow, DestinationState, FactRow, FailureWrite } from "./destinations.js";
export { appendFacts, checkFacts, type EncodedFact, type FactInput } from "./facts.js";

/** Bounds (spec §21.1). */
export const MAX_OUTBOX_READ = 1_000;
export const MAX_DESTINATION_CHARS = 100;
/** A stored error text (spec §21.10). */
export const MAX_ERROR_CHARS = 1_000;
const MAX_MS = 365 * 24 * 3_600_000;

const SEQ_RE = /^(0|[1-9][0-9]{0,17})$/;
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

export type RunProgram = <R>(p: () => Program<R>) => Promise<R>;

export function checkDestinationName(v: string): string {
  if (typeof v !== "string" || v.length > MAX_DESTINATION_CHARS || !NAME_RE.test(v))
    throw new ValidationError(
      `a destination name is 1–${MAX_DESTINATION_CHARS} characters of letters, digits, '.', '_' and '-', starting with a letter or digit (got ${JSON.stringify(String(v)).slice(0, 120)})`,
    );
  return v;
}

function seq(what: string, v: string): string {
  if (typeof v !== "string" || !SEQ_RE.test(v))
    throw new ValidationError(`${what} must be a sequence number (got ${JSON.stringify(v)})`);
  return v;
}

function count(what: string, n: number, max: number): number {
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw new ValidationError(`${what} must be an integer in 1–${max} (got ${n})`);
  return n;
}

function ms(what: string, v: number): number {
  if (!Number.isSafeInteger(v) || v < 0 || v > MAX_MS)
    throw new ValidationError(`${what} must be an integer of ms in 0–${MAX_MS}`);
  return v;
}

function holderName(v: string): string {
  if (typeof v !== "string" || v.length === 0 || v.length > 200 || v.includes("\0"))
    throw new ValidationError("a sender's holder name is 1–200 characters without NUL");
  return v;
}

/**
 * The outbox operations over a store's program runners (`read` may run
 * outside a write transaction).
 * Invariant: every refusal of bad input is a ValidationError thrown before
 * the program runs, so bad input writes nothing.
 */
export class OutboxOps {
  constructor(
    readonly run: RunProgram,
    private readonly read: RunProgram = run,
  ) {}

  /** Appends facts in a transaction of their own (spec §21.2); other layers yield `appendFacts` in theirs. */
  async append(facts: readonly FactInput[]): Promise<void> {
    checkFacts(facts);
    return this.run(() => appendFacts(facts));
  }

  /** Facts after `after` in seq order (spec §21.3). */
  async facts(after: string, limit: number): Promise<d.FactRow[]> {
    seq("after", after);
    count("limit", limit, MAX_OUTBOX_READ);
    return this.read(() => d.readFacts(after, limit));
  }

  /** The newest seq and the store's clock. */
  async head(): Promise<{ seq: string; now: number }> {
    return this.read(() => d.head());
  }

  async ensureDestination(name: string, from: "start" | "end"): Promise<d.DestinationRow> {
    checkDestinationName(name);
    if (from !== "start" && from !== "end")
      throw new ValidationError('a destination starts from "start" or "end"');
    return this.run(() => d.ensureDestination(name, from));
  }

  async lease(name: string, holder: string, leaseMs: number) {
    checkDestinationName(name);
    holderName(holder);
    ms("leaseMs", leaseMs);
    return this.run(() => d.leaseDestination(name, holder, leaseMs));
  }

  async advance(name: string, holder: string, from: string, to: string, facts: number): Promise<boolean> {
    checkDestinationName(name);
    holderName(holder);
    seq("from", from);
    seq("to", to);
    if (BigInt(to) < BigInt(from)) throw new ValidationError("a cursor never moves back");
    if (!Number.isSafeInteger(facts) || facts < 0) throw new ValidationError("facts must be a count");
    return this.run(() => d.advanceCursor(name, holder, from, to, facts));
  }

  async fail(name: string, holder: string, from: string, f: d.FailureWrite): Promise<boolean> {
    checkDestinationName(name);
    holderName(holder);
    seq("from", from);
    if (f.next.kind === "retry") ms("delayMs", f.next.delayMs);
    const error = String(f.error).slice(0, MAX_ERROR_CHARS);
    return this.run(() => d.recordFailure(name, holder, from, { ...f, error }));
  }

  async release(name: string, holder: string): Promise<void> {
    checkDestinationName(name);
    holderName(holder);
    return this.run(() => d.releaseDestination(name, holder));
  }

  /** spec §21.11: a dead or retrying destination is tried again at once. */
  async retry(name: string): Promise<d.DestinationRow | null> {
    checkDestinationName(name);
    return this.run(() => d.retryDestination(name));
  }

  async destinations(): Promise<d.DestinationRow[]> {
    return this.read(() => d.listDestinations(MAX_OUTBOX_READ));
  }

  /** spec §21.12: facts after `cursor` (counted up to `cap`) and the oldest one's instant. */
  async backlog(cursor: string, cap = 100_000): Promise<{ facts: number; oldestAt: number | null }> {
    seq("cursor", cursor);
    count("cap", cap, 10_000_000);
    return this.read(() => d.backlog(cursor, cap));
  }

  /** spec §21.13: at most `limit` delivered facts older than `retentionMs`. */
  async prune(retentionMs: number, limit: number): Promise<number> {
    ms("retentionMs", retentionMs);
    count("limit", limit, 10_000);
    return this.run(() => d.pruneFacts(retentionMs, limit));
  }

  async removeDestination(name: string): Promise<boolean> {
    checkDestinationName(name);
    return this.run(() => d.removeDestination(name));
  }
}
