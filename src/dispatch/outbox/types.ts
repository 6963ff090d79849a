/**
 * The outbox's contract (spec part 21): what a fact is, what a sink does with
 * a batch of them, and the notifier port for human-facing notices. The store
 * writes facts in the transaction of the change they describe; a sender reads
 * them per destination, in order, and hands bounded batches to that
 * destination's sink. Sinks and notifiers implement these types; nothing here
 * reads or writes the store (a fact's shape is the store's row, FactRow).
 */
import type { FactRow } from "../../store/outbox/destinations.js";

/**
 * One fact, as a sink receives it (spec §21.1): `id` is stable across
 * redeliveries and senders (receivers deduplicate on it, at-least-once);
 * facts reach a destination in ascending `seq`; `type` is a dotted kind
 * (`attempt.moved`, `item.moved`, `pr.state`, `task.completed`,
 * `notice.attention`); `subject` what it is about (`attempt:12`); `at` the
 * emitting transaction's clock; `data` its JSON payload.
 */
export type Fact = FactRow;

/** A batch for one destination: facts in ascending `seq`, bounded by count and wire bytes. */
export interface Batch {
  readonly destination: string;
  /** Stable for the same facts: `<destination>:<first seq>-<last seq>`. */
  readonly id: string;
  readonly facts: readonly Fact[];
}

/**
 * Why a delivery failed. `retryable: false` dead-letters the batch at once
 * (e.g. a 4xx other than 408/409/425/429); `retryAfterMs` is the receiver's
 * own wish (e.g. `Retry-After`), which the sender honours within its bounds.
 */
export class DeliveryError extends Error {
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;
  constructor(message: string, opts: { retryable: boolean; retryAfterMs?: number; cause?: unknown }) {
    super(message, { cause: opts.cause });
    this.name = "DeliveryError";
    this.retryable = opts.retryable;
    this.retryAfterMs = opts.retryAfterMs;
  }
}

/**
 * Where a destination's facts go. `deliver` resolves when the whole batch was
 * accepted and rejects (preferably with a DeliveryError) otherwise; any other
 * error counts as retryable. It must give up when `signal` aborts.
 */
export interface Sink {
  /** e.g. `webhook`, `file`, `stdout`; shown in status, never a secret. */
  readonly kind: string;
  deliver(batch: Batch, signal: AbortSignal): Promise<void>;
  close?(): Promise<void>;
}

export const NOTICE_KINDS = ["attention", "usage-limit", "stalled"] as const;
export type NoticeKind = (typeof NOTICE_KINDS)[number];

/** A human-facing message (an attempt needs attention, a usage limit was hit, work stalled). */
export interface Notice {
  /** The id of the fact that carried it. */
  readonly id: string;
  readonly kind: NoticeKind;
  readonly subject: string;
  /** One line, at most 200 characters. */
  readonly title: string;
  /** Plain text, at most 4 KiB. */
  readonly body: string;
  readonly at: number;
  readonly data?: unknown;
}

/** The notifier port. Implementations: a null notifier and a webhook notifier. */
export interface Notifier {
  readonly kind: string;
  notify(notice: Notice, signal: AbortSignal): Promise<void>;
}
