/**
 * A layer's step commit that the engine group-commits (spec §4.2, §18.10): `ctx.step(name, fn,
 * { commitWith })`. The layer names a store operation (`write`) that commits several steps, each
 * fenced on its own, with the layer's own rows and the invocation's still-buffered stream batches
 * in one transaction; the engine hands it those batches (rather than flushing them in a transaction
 * of their own first), batches the writes of concurrent invocations that name the same `write` into
 * one call, retries store errors (every item is fenced and keyed, spec F.10) and reads the answer.
 * So a layer above the engine needs neither the engine's batcher nor its retry.
 *
 * Invariant: a stream batch handed over is the writer's one batch in flight (spec §16.4): its
 * offsets are the writer's, and the writer learns the commit's answer for it before the step
 * returns; the step is written only if every batch was (spec §16.2).
 */
import { InvalidStateError } from "../errors.js";
import type { SettleResult, StepWrite, Store } from "../store/store.js";
import type { StepStreamsResult, StreamAppend } from "../store/streams/ops.js";
import { Batcher } from "./batcher.js";
import { retryStore } from "./store-retry.js";
import type { HandedBatch, InvocationStreams } from "./stream.js";

/** A step's write as a layer's group commit gets it. */
export interface LayerStepWrite<X> extends StepWrite {
  /** The invocation's buffered stream batches, under the step's fence (spec §18.10). */
  streams: readonly StreamAppend[];
  /** The layer's own rows for this step (its `rows()`). */
  rows: X;
}

/** ctx.step's `commitWith` option. */
export interface StepCommitWith<X> {
  /**
   * Commits the items (each fenced on its own) in one transaction, results in item order: each
   * item's stream batches first, then its step row and the layer's rows unless a batch was refused.
   * A repeat of an item whose commit landed must change nothing (it is retried on store errors).
   * Steps whose `write` is the same function share transactions: make it once, not per call.
   */
  write: (items: readonly LayerStepWrite<X>[], store: Store) => Promise<StepStreamsResult[]>;
  /** The layer's rows for step `w` (its fence, its stored name); called once fn ran, never on a replay. */
  rows: (w: StepWrite) => X;
}

type Write = StepCommitWith<unknown>["write"];

/** The group commits of one instance, one batcher per layer `write` (held as long as the function is). */
export class StepCommits {
  readonly #groups = new WeakMap<Write, Batcher<LayerStepWrite<unknown>, StepStreamsResult>>();

  constructor(readonly store: Store) {}

  submit(write: Write, item: LayerStepWrite<unknown>): Promise<StepStreamsResult> {
    let b = this.#groups.get(write);
    if (!b) {
      const store = this.store;
      b = new Batcher((items) => retryStore(() => write(items, store)));
      this.#groups.set(write, b);
    }
    return b.submit(item);
  }
}

/**
 * spec §18.10: commits step `w` through `c`, carrying the invocation's buffered chunks. Answers as a
 * step commit does; a refused batch throws its writer's error (as the boundary flush would).
 */
export async function commitStepWith(
  commits: StepCommits,
  c: StepCommitWith<unknown>,
  w: StepWrite,
  streams: InvocationStreams | undefined,
): Promise<SettleResult> {
  const rows = c.rows(w);
  const handed: HandedBatch[] = streams ? await streams.handOver() : [];
  let res: StepStreamsResult;
  try {
    res = await commits.submit(c.write, { ...w, streams: handed.map((h) => h.item), rows });
  } catch (e) {
    const err = e instanceof Error ? e : new Error(String(e));
    await Promise.all(handed.map((h) => h.settle(err)));
    throw e;
  }
  // A write that answered for fewer batches than it was given is a bug; its writer refuses on.
  await Promise.all(handed.map((h, i) => h.settle(res.streams[i] ?? "conflict")));
  if (res.step === "stream_failed") {
    for (const h of handed) if (h.writer.error) throw h.writer.error;
    throw new InvalidStateError(`step "${w.name}": a stream batch was refused`);
  }
  return res.step;
}
