/**
 * The dispatch operations of a store (spec §20.18–§20.21): named, checked
 * at the boundary, and each one program (items.ts, attempts.ts, seats.ts)
 * that both the SQLite and the PostgreSQL store run in one transaction.
 * A store exposes them as `store.dispatch`; the dispatch layer uses nothing
 * else of the store's.
 */
import type { FactInput } from "../../core/outbox.js";
import { ValidationError } from "../../errors.js";
import { checkFacts } from "../outbox/facts.js";
import type { Program } from "../tree/program.js";
import * as att from "./attempts.js";
import * as items from "./items.js";
import type { AttemptEvent, AttemptRow, ItemRow, SeatRow } from "./rows.js";
import * as seat from "./seats.js";
import * as stray from "./strays.js";

export type {
  AttemptFilter,
  AttemptPatch,
  Guard,
  ItemRoute,
  KeepWrite,
  MoveResult,
  Settlement,
} from "./attempts.js";
export type { ItemFilter, StartResult, StartSpec } from "./items.js";
export type { AttemptEvent, AttemptRow, ItemRow, SeatRow } from "./rows.js";

/** Bounds (spec §20.18). */
export const MAX_DISPATCH_LIST = 1_000;
export const MAX_ITEM_INPUT_BYTES = 1024 * 1024;
export const MAX_NAME_CHARS = 100;

export type RunProgram = <R>(p: () => Program<R>) => Promise<R>;

const ID_RE = /^[1-9][0-9]{0,17}$/;

/** A positive integer id, or ValidationError (shared with the pull-request operations). */
export function id(what: string, v: string): string {
  if (typeof v !== "string" || !ID_RE.test(v))
    throw new ValidationError(`${what} must be a positive integer id (got ${JSON.stringify(v)})`);
  return v;
}

export function limit(n: number): number {
  if (!Number.isInteger(n) || n < 1 || n > MAX_DISPATCH_LIST)
    throw new ValidationError(`limit must be an integer in 1–${MAX_DISPATCH_LIST} (got ${n})`);
  return n;
}

function name(what: string, v: string): string {
  if (typeof v !== "string" || v.length === 0 || v.length > MAX_NAME_CHARS || v.includes("\0"))
    throw new ValidationError(`${what} must be 1–${MAX_NAME_CHARS} characters without NUL`);
  return v;
}

function ms(what: string, v: number): number {
  if (!Number.isSafeInteger(v) || v < 0)
    throw new ValidationError(`${what} must be a non-negative integer of ms`);
  return v;
}

/**
 * The dispatch operations over a store's program runner.
 * Invariant: every refusal of bad input is a ValidationError thrown before
 * the program runs, so bad input writes nothing.
 */
export class DispatchOps {
  constructor(readonly run: RunProgram) {}

  async addItem(pipeline: string, step: string, input: string): Promise<ItemRow> {
    name("pipeline", pipeline);
    name("step", step);
    if (typeof input !== "string" || Buffer.byteLength(input) > MAX_ITEM_INPUT_BYTES)
      throw new ValidationError(`an item's input is JSON text of at most ${MAX_ITEM_INPUT_BYTES} bytes`);
    return this.run(() => items.addItem(pipeline, step, input));
  }

  async getItem(itemId: string): Promise<ItemRow | null> {
    return this.run(() => items.getItem(id("item id", itemId)));
  }

  async listItems(f: items.ItemFilter): Promise<ItemRow[]> {
    limit(f.limit);
    if (f.after) id("after", f.after);
    return this.run(() => items.listItems(f));
  }

  async closeItem(itemId: string): Promise<{ item: ItemRow; closing: string[] } | null> {
    return this.run(() => items.closeItem(id("item id", itemId)));
  }

  /** spec §20.30: an open item at `from` moves to `to`; null if it is not open at `from` any more. */
  async moveItem(itemId: string, from: string, to: string): Promise<ItemRow | null> {
    id("item id", itemId);
    name("step", from);
    name("step", to);
    return this.run(() => items.moveItem(itemId, from, to));
  }

  async archiveItem(itemId: string): Promise<ItemRow | null> {
    return this.run(() => items.archiveItem(id("item id", itemId)));
  }

  async startAttempt(s: items.StartSpec): Promise<items.StartResult> {
    id("item id", s.itemId);
    name("phase", s.phase);
    name("worker", s.worker);
    name("holder", s.holder);
    ms("leaseMs", s.leaseMs);
    return this.run(() => items.startAttempt(s));
  }

  async leaseAttempts(holder: string, leaseMs: number, n: number): Promise<AttemptRow[]> {
    return this.run(() => att.leaseAttempts(name("holder", holder), ms("leaseMs", leaseMs), limit(n)));
  }

  async releaseAttempts(holder: string, ids: readonly string[]): Promise<number> {
    for (const x of ids) id("attempt id", x);
    if (ids.length > MAX_DISPATCH_LIST) throw new ValidationError(`at most ${MAX_DISPATCH_LIST} ids`);
    return this.run(() => att.releaseAttempts(name("holder", holder), ids));
  }

  /** `facts` (spec §21.4, e.g. notices) commit with the move, and not at all if it is stale. */
  async moveAttempt(
    g: att.Guard,
    patch: att.AttemptPatch,
    detail: unknown,
    facts: readonly FactInput[] = [],
  ): Promise<att.MoveResult> {
    id("attempt id", g.id);
    checkFacts(facts);
    return this.run(() => att.moveAttempt(g, patch, detail, facts));
  }

  async settleAttempt(
    g: att.Guard,
    s: att.Settlement,
    route: att.ItemRoute | null,
    keep: att.KeepWrite | null,
    detail: unknown,
    facts: readonly FactInput[] = [],
  ): Promise<att.MoveResult & { kept?: boolean }> {
    id("attempt id", g.id);
    checkFacts(facts);
    return this.run(() => att.settleAttempt(g, s, route, keep, detail, facts));
  }

  async wakeAttempt(g: att.Guard, defaultSeats: number | null, overCap: boolean) {
    id("attempt id", g.id);
    return this.run(() => seat.wakeAttempt(g, defaultSeats, overCap));
  }

  /** spec §20.24: `closeout` is checked JSON text (`parseCloseout`'s shape), at most 256 KiB. */
  async recordCloseout(attemptId: string, closeout: string): Promise<AttemptRow | null> {
    if (typeof closeout !== "string" || Buffer.byteLength(closeout) > 256 * 1024)
      throw new ValidationError("a close-out is JSON text of at most 256 KiB");
    return this.run(() => att.recordCloseout(id("attempt id", attemptId), closeout));
  }

  /** spec §20.26: `since` bounds the search for forgotten strays whose session was never found. */
  async strays(n: number, since = 0): Promise<AttemptRow[]> {
    ms("since", since);
    return this.run(() => stray.strays(limit(n), since));
  }

  async bindStray(attemptId: string, session: string): Promise<boolean> {
    return this.run(() => stray.bindStray(id("attempt id", attemptId), name("session", session)));
  }

  async strayStopped(attemptId: string, seen: string): Promise<boolean> {
    return this.run(() => stray.strayStopped(id("attempt id", attemptId), name("seen", seen)));
  }

  /** spec §20.6: `by` is who asked (`operator`, `item-message`). */
  async requestWake(attemptId: string, by: "operator" | "item-message"): Promise<AttemptRow | null> {
    return this.run(() => stray.requestWake(id("attempt id", attemptId), name("by", by)));
  }

  async getAttempt(attemptId: string): Promise<AttemptRow | null> {
    return this.run(() => att.getAttempt(id("attempt id", attemptId)));
  }

  async listAttempts(f: att.AttemptFilter): Promise<AttemptRow[]> {
    limit(f.limit);
    if (f.itemId) id("item id", f.itemId);
    if (f.after) id("after", f.after);
    return this.run(() => att.listAttempts(f));
  }

  async events(attemptId: string, after: number, n: number): Promise<AttemptEvent[]> {
    return this.run(() => att.attemptEvents(id("attempt id", attemptId), ms("after", after), limit(n)));
  }

  async noteEvent(attemptId: string, kind: string, detail: unknown): Promise<void> {
    return this.run(() => att.noteEvent(id("attempt id", attemptId), name("kind", kind), detail));
  }

  async setSeatLimit(worker: string, n: number | null): Promise<void> {
    if (n !== null && (!Number.isInteger(n) || n < 0 || n > 1_000_000))
      throw new ValidationError("a seat limit is an integer in 0–1,000,000, or null");
    return this.run(() => seat.setSeatLimit(name("worker", worker), n));
  }

  async seats(): Promise<SeatRow[]> {
    return this.run(() => seat.seats());
  }

  async noteCapacityRefusal(worker: string, delayFor: (refusals: number) => number): Promise<number> {
    return this.run(() => seat.noteCapacityRefusal(name("worker", worker), delayFor));
  }

  async clearCapacityRefusals(worker: string): Promise<void> {
    return this.run(() => seat.clearCapacityRefusals(name("worker", worker)));
  }

  async keptSessions(n: number) {
    return this.run(() => seat.keptSessions(limit(n)));
  }

  async sessionsToForget(cutoff: number, n: number): Promise<AttemptRow[]> {
    return this.run(() => seat.sessionsToForget(ms("cutoff", cutoff), limit(n)));
  }

  async markForgotten(attemptId: string, kept: Parameters<typeof seat.markForgotten>[1]): Promise<boolean> {
    return this.run(() => seat.markForgotten(id("attempt id", attemptId), kept));
  }

  async casKept(
    itemId: string,
    expect: Parameters<typeof att.casKept>[1],
    value: Parameters<typeof att.casKept>[2],
  ) {
    return this.run(() => att.casKept(id("item id", itemId), expect, value));
  }
}

/** A store that carries the dispatch operations (SqliteStore, PostgresStore, or a custom one). */
export interface DispatchCapable {
  readonly dispatch: DispatchOps;
  now(): Promise<number>;
}
