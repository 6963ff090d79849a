/**
 * The sinks Ratchet ships (spec §21.14, §21.15): an HTTP webhook signed per
 * Standard Webhooks, a file of JSON lines, and stdout. Others implement
 * `Sink` (types.ts).
 */
import { type FileHandle, open } from "node:fs/promises";
import { type Clock, systemClock } from "../../core/clock.js";
import { postSigned, type SignedTarget, signedTarget } from "./http.js";
import { type Batch, DeliveryError, type Sink } from "./types.js";

/** The webhook body's `type` (spec §21.14). */
export const BATCH_TYPE = "ratchet.outbox.batch";

/** A batch's webhook body: the Standard Webhooks payload shape `{type, timestamp, data}`. */
export function batchBody(batch: Batch, at: Date): string {
  return JSON.stringify({
    type: BATCH_TYPE,
    timestamp: at.toISOString(),
    data: { destination: batch.destination, batch: batch.id, facts: batch.facts },
  });
}

export interface WebhookSinkOptions {
  readonly url: string;
  /** Standard Webhooks secrets (`whsec_…`); during a rotation, the new and the old one: each signs. */
  readonly secrets: readonly string[];
  /** For the webhook timestamp; the receiver checks it against its own clock (default: the system's). */
  readonly clock?: Clock;
}

/**
 * POSTs each batch as one signed request (`webhook-id` = the batch id, the
 * same on every redelivery of the same facts). spec §21.14.
 * Invariant: the secrets never leave the signers: `kind`, `target` and every
 * error name the URL without credentials or query.
 */
export class WebhookSink implements Sink {
  readonly kind = "webhook";
  readonly #t: SignedTarget;
  readonly #clock: Clock;
  constructor(o: WebhookSinkOptions) {
    this.#t = signedTarget("webhook sink", o.url, o.secrets);
    this.#clock = o.clock ?? systemClock;
  }
  /** The URL as it may be shown. */
  get target(): string {
    return this.#t.shown;
  }
  async deliver(batch: Batch, signal: AbortSignal): Promise<void> {
    const body = batchBody(batch, new Date(this.#clock.now()));
    await postSigned(this.#t, batch.id, body, this.#clock, signal);
  }
  toJSON() {
    return { kind: this.kind, target: this.#t.shown };
  }
}

/**
 * Appends each fact as one JSON line and syncs the file before it resolves,
 * so the cursor moves only past facts on disk (spec §21.15). A crash between
 * the sync and the cursor's move appends the batch again on redelivery.
 */
export class FileSink implements Sink {
  readonly kind = "file";
  readonly path: string;
  #fh: FileHandle | null = null;
  constructor(o: { path: string }) {
    this.path = o.path;
  }
  async deliver(batch: Batch, signal: AbortSignal): Promise<void> {
    if (signal.aborted) throw new DeliveryError("file: stopped", { retryable: true });
    try {
      this.#fh ??= await open(this.path, "a");
      await this.#fh.write(linesOf(batch));
      await this.#fh.datasync();
    } catch (e) {
      await this.close();
      throw new DeliveryError(`file ${this.path}: ${(e as Error).message}`, { retryable: true, cause: e });
    }
  }
  async close(): Promise<void> {
    const fh = this.#fh;
    this.#fh = null;
    await fh?.close().catch(() => {});
  }
}

function linesOf(batch: Batch): string {
  return batch.facts.map((f) => `${JSON.stringify(f)}\n`).join("");
}

/** Writes each fact as one JSON line to a stream (stdout by default), waiting for the write (spec §21.15). */
export class StdoutSink implements Sink {
  readonly kind = "stdout";
  readonly #out: NodeJS.WritableStream;
  constructor(o: { stream?: NodeJS.WritableStream } = {}) {
    this.#out = o.stream ?? process.stdout;
  }
  deliver(batch: Batch, _signal?: AbortSignal): Promise<void> {
    return new Promise((res, rej) => {
      this.#out.write(linesOf(batch), (e) =>
        e ? rej(new DeliveryError(`stdout: ${e.message}`, { retryable: true })) : res(),
      );
    });
  }
}
