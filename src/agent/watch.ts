/**
 * A conversation's entries as they are committed (spec §17.11): the CLI's `watch` and the HTTP
 * events route read the same sequence. Polls the store with a bounded backoff; reads only.
 */

import { NotFoundError } from "../errors.js";
import type { ConversationOps, EntryRecord } from "../store/conversations/types.js";

export interface WatchOptions {
  /** First seq to return (default 0). */
  from?: number;
  /** Stop once the conversation is idle (no run in progress, empty inbox). Default true. */
  untilIdle?: boolean;
  signal?: AbortSignal;
  /** Give up after this long (default 10 min). */
  timeoutMs?: number;
  /** Longest pause between two reads of the store (default 250 ms). */
  pollMs?: number;
}

/**
 * The entries from `from` on, then the ones committed later, in seq order without gap or repeat,
 * until the conversation is idle (with `untilIdle`), `signal` aborts or `timeoutMs` pass.
 * Seam: the run's live output streams (spec §16) are to be interleaved here, by its task id.
 * Invariant: a consumer that resumes at the last seq it saw plus one misses nothing.
 */
export async function* watchEntries(
  ops: ConversationOps,
  id: string,
  o: WatchOptions = {},
): AsyncGenerator<EntryRecord> {
  const deadline = Date.now() + (o.timeoutMs ?? 600_000);
  const maxDelay = o.pollMs ?? 250;
  let next = o.from ?? 0;
  let delay = Math.min(20, maxDelay);
  while (!o.signal?.aborted && Date.now() < deadline) {
    const page = await ops.entries(id, { from: next, limit: 1_000 });
    for (const e of page) yield e;
    if (page.length > 0) {
      next = page[page.length - 1]!.seq + 1;
      delay = Math.min(20, maxDelay);
      continue;
    }
    const c = await ops.getConversation(id);
    if (!c) throw new NotFoundError(`conversation "${id}"`);
    if (o.untilIdle !== false && c.runTaskId === null && (await ops.inbox(id, 1)).length === 0) {
      // Idle now; what the last run committed before it went idle may have landed after the page.
      yield* await ops.entries(id, { from: next, limit: 1_000 });
      return;
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, maxDelay);
  }
}
