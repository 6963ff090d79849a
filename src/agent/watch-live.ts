/**
 * A conversation's entries and its runs' live output together (spec §17.11, §16.5): what
 * `ratchet watch` prints. Entries come from watchEntries; beside them, every durable stream of the
 * running run's task tree (the run, its turns, its tool calls) is followed from its start, and its
 * chunks are interleaved as they are committed.
 *
 * Modes:
 * - following: entries and chunks arrive; each pass (every `pollMs`) looks at the run's subtree
 *   for tasks and streams not followed yet and starts a follower for each;
 * - draining: the entries ended (the conversation is idle, the signal aborted or the time ran
 *   out): the followers read what is committed and stop (a stream of an ended task ends by itself).
 *
 * Bounds: at most MAX_FOLLOWED streams at once (the rest are skipped, and a `skipped` event says
 * so); a subtree of at most 500 tasks is looked at.
 */
import type { Ratchet } from "../engine/ratchet.js";
import type { EntryRecord } from "../store/conversations/types.js";
import { type WatchOptions, watchEntries } from "./watch.js";

export type WatchEvent =
  | { kind: "entry"; entry: EntryRecord }
  | { kind: "chunk"; taskId: number; stream: string; offset: number; data: unknown }
  | { kind: "skipped"; taskId: number; stream: string };

export const MAX_FOLLOWED = 64;

/** Entries and live stream chunks, interleaved in commit order per source (spec §16.5, §17.11). */
export async function* watchConversation(
  ratchet: Ratchet,
  id: string,
  o: WatchOptions = {},
): AsyncGenerator<WatchEvent> {
  const queue: WatchEvent[] = [];
  let wake: (() => void) | undefined;
  const push = (e: WatchEvent) => {
    queue.push(e);
    wake?.();
  };
  const stop = new AbortController();
  o.signal?.addEventListener("abort", () => stop.abort(), { once: true });
  const followed = new Set<string>();
  const followers: Promise<void>[] = [];
  let entriesDone = false;
  let failure: unknown;

  const follow = (taskId: number, stream: string) => {
    const key = `${taskId}\u001f${stream}`;
    if (followed.has(key)) return;
    followed.add(key);
    if (followed.size > MAX_FOLLOWED) return push({ kind: "skipped", taskId, stream });
    followers.push(
      (async () => {
        for await (const c of ratchet.readStream(taskId, stream, { signal: stop.signal, pollMs: 50 }))
          push({ kind: "chunk", taskId, stream, offset: c.offset, data: c.data });
      })().catch((e) => {
        if (!stop.signal.aborted) failure ??= e;
      }),
    );
  };

  // The runs seen: the one in progress, and each that wrote an entry (a run may end between passes).
  const runs = new Set<number>();
  const discover = async () => {
    const c = await ratchet.store.conversations.getConversation(id);
    if (c?.runTaskId) runs.add(c.runTaskId);
    for (const run of runs)
      for (const t of await ratchet.store.subtree(run, 500))
        for (const s of await ratchet.streams(t.id)) follow(t.id, s.name);
  };

  const entries = (async () => {
    for await (const entry of watchEntries(ratchet.store.conversations, id, { ...o, signal: stop.signal })) {
      // Streams first: a run's output is committed before the entry that ends its turn.
      if (entry.taskId !== null && entry.kind !== "user") {
        runs.add(entry.taskId);
        await discover().catch(() => {});
      }
      push({ kind: "entry", entry });
    }
  })()
    .catch((e) => {
      failure ??= e;
    })
    .finally(() => {
      entriesDone = true;
      wake?.();
    });

  const pollMs = o.pollMs ?? 250;
  const scan = setInterval(() => void discover().catch(() => {}), pollMs);
  try {
    await discover().catch(() => {});
    for (;;) {
      while (queue.length > 0) yield queue.shift()!;
      if (failure) throw failure;
      if (entriesDone) break;
      await new Promise<void>((r) => {
        wake = r;
        setTimeout(r, pollMs);
      });
      wake = undefined;
    }
    await entries;
    // The streams a run opened after the last pass, before it went idle.
    await discover().catch(() => {});
    // Draining: the run is over; each follower reads to its stream's end (its task ended) or stops.
    const drained = Promise.all(followers);
    const late = setTimeout(() => stop.abort(), 2_000);
    while (true) {
      const done = await Promise.race([
        drained.then(() => true),
        new Promise<false>((r) => setTimeout(() => r(false), 20)),
      ]);
      while (queue.length > 0) yield queue.shift()!;
      if (done) break;
    }
    clearTimeout(late);
    if (failure) throw failure;
  } finally {
    clearInterval(scan);
    stop.abort();
  }
}
