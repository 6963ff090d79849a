/**
 * Notices (spec §21.16): human-facing messages carried by `notice.*` facts,
 * handed to a notifier. A notifier is fed by a destination like any other
 * (`noticeSink`), so notices inherit the outbox's order, retries, backoff and
 * dead-letter; a notifier sees a notice at least once, its id the fact's id.
 */
import { type Clock, systemClock } from "../../core/clock.js";
import { postSigned, type SignedTarget, signedTarget } from "./http.js";
import {
  type Batch,
  type Fact,
  NOTICE_KINDS,
  type Notice,
  type NoticeKind,
  type Notifier,
  type Sink,
} from "./types.js";

const MAX_TITLE = 200;
const MAX_BODY = 4 * 1024;

/** The notice a `notice.<kind>` fact carries, or null for any other fact. */
export function noticeOf(f: Fact): Notice | null {
  const kind = f.type.startsWith("notice.") ? f.type.slice("notice.".length) : "";
  if (!(NOTICE_KINDS as readonly string[]).includes(kind)) return null;
  const data = (typeof f.data === "object" && f.data !== null ? f.data : {}) as Record<string, unknown>;
  const title = typeof data.title === "string" ? data.title : `${kind}: ${f.subject}`;
  const lines = Object.entries(data)
    .filter(([k]) => k !== "title")
    .map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`);
  return {
    id: f.id,
    kind: kind as NoticeKind,
    subject: f.subject,
    title: title.slice(0, MAX_TITLE),
    body: lines.join("\n").slice(0, MAX_BODY),
    at: f.at,
    data: f.data,
  };
}

/** A sink that hands each notice of a batch to `notifier`, in order; other facts are ignored. */
export function noticeSink(notifier: Notifier): Sink {
  return {
    kind: `notices:${notifier.kind}`,
    async deliver(batch: Batch, signal: AbortSignal) {
      for (const f of batch.facts) {
        const n = noticeOf(f);
        if (n) await notifier.notify(n, signal);
      }
    },
  };
}

/** Drops every notice (the default when none is configured). */
export const nullNotifier: Notifier = Object.freeze({ kind: "null", notify: async () => {} });

/**
 * POSTs each notice as one Standard Webhooks message (`webhook-id` = the
 * notice's id, type `ratchet.notice.<kind>`), signed like the webhook sink
 * (spec §21.14, §21.16).
 */
export class WebhookNotifier implements Notifier {
  readonly kind = "webhook";
  readonly #t: SignedTarget;
  readonly #clock: Clock;
  constructor(o: { url: string; secrets: readonly string[]; clock?: Clock }) {
    this.#t = signedTarget("webhook notifier", o.url, o.secrets);
    this.#clock = o.clock ?? systemClock;
  }
  async notify(n: Notice, signal: AbortSignal): Promise<void> {
    const at = new Date(this.#clock.now());
    const body = JSON.stringify({ type: `ratchet.notice.${n.kind}`, timestamp: at.toISOString(), data: n });
    await postSigned(this.#t, n.id, body, this.#clock, signal);
  }
  toJSON() {
    return { kind: this.kind, target: this.#t.shown };
  }
}
