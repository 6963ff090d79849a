/** A handle on one submission: its record, and a wait for its settlement (spec §17.5). */
import { TimeoutError, ValidationError } from "../errors.js";
import type { SubmissionRecord } from "../store/conversations/types.js";
import type { Conversations } from "./conversations.js";

export type Settled =
  | { status: "done"; answerSeq: number; submission: SubmissionRecord }
  | { status: "unanswered"; reason: string; submission: SubmissionRecord };

const MAX_WAIT_MS = 366 * 24 * 3600_000;

export class Submission {
  readonly id: number;
  readonly conversationId: string;
  /** The record as returned by submit (or when reacquired). */
  readonly record: SubmissionRecord;
  /** False when a repeated requestId returned the first submission (spec §17.5). */
  readonly created: boolean;
  readonly #c: Conversations;

  constructor(c: Conversations, record: SubmissionRecord, created: boolean) {
    this.#c = c;
    this.record = record;
    this.id = record.id;
    this.conversationId = record.conversationId;
    this.created = created;
  }

  /**
   * Resolves with `done` once the run that answered this submission did, or `unanswered` with a
   * reason (spec §17.6): `aborted` (withdrawn, or its run aborted), `run_failed`, `no_answer`,
   * `deleted`. A queued submission waits for the run ahead of it; one queued behind a failed run
   * waits for the next submission to place it (spec §17.8). Bounded by `timeoutMs` (default 5 min).
   * Invariant: waiting writes only the settlement of a run that already ended, never an outcome.
   */
  async wait(opts: { timeoutMs?: number } = {}): Promise<Settled> {
    const timeoutMs = opts.timeoutMs ?? 300_000;
    if (!Number.isInteger(timeoutMs) || timeoutMs < 0 || timeoutMs > MAX_WAIT_MS)
      throw new ValidationError(`wait timeoutMs must be an integer in [0, ${MAX_WAIT_MS}]`);
    const deadline = performance.now() + timeoutMs;
    const ops = this.#c.store.conversations;
    let idleDelay = 5;
    for (;;) {
      const s = await ops.submission(this.id);
      if (!s) return { status: "unanswered", reason: "deleted", submission: this.record };
      if (s.status === "done") return { status: "done", answerSeq: s.answerSeq!, submission: s };
      if (s.status === "unanswered")
        return { status: "unanswered", reason: s.reason ?? "unknown", submission: s };
      const left = Math.floor(deadline - performance.now());
      if (left <= 0)
        throw new TimeoutError(`submission ${this.id} is still ${s.status} after ${timeoutMs} ms`);
      const conv = await ops.getConversation(this.conversationId);
      if (!conv) return { status: "unanswered", reason: "deleted", submission: s };
      const run = s.status === "placed" ? s.runTaskId : conv.runTaskId;
      if (run !== null) {
        await this.#c.ratchet.waitFor(run, { timeoutMs: left });
        // The run ended: if it did so without its final boundary, its inputs settle now.
        await ops.settleEndedRun(this.conversationId);
        continue;
      }
      // Queued behind a run that failed: only a later submission places it.
      await new Promise((r) => setTimeout(r, Math.min(idleDelay, left)));
      idleDelay = Math.min(idleDelay * 2, 500);
    }
  }
}
