/**
 * The reader side of durable output streams (spec §16.5): `ratchet.readStream(taskId, name, { from })`.
 *
 * A reader pages through committed chunks from `from`, then (when following) waits for more: woken
 * at once by an append committed in this process, otherwise by its poll interval — an append in
 * another process is seen within `pollMs`. It ends when it has read every chunk of a closed stream
 * or of a task that ended, when `signal` aborts, or when the instance closes.
 *
 * Invariant: offsets come out in order from `from`, each once; a reader that resumes from the last
 * offset it saw plus one gets exactly the rest (spec §16.5).
 */
import { ClosedError, NotFoundError, ValidationError } from "../errors.js";
import type { Store, TaskId } from "../store/store.js";
import type { StreamInfo } from "../store/streams/ops.js";
import { checkName, describe } from "./definition.js";
import { retryStore } from "./store-retry.js";

/** One committed chunk: its offset (0, 1, 2 … per stream) and the value written. */
export interface StreamChunk {
  offset: number;
  data: unknown;
}

export interface ReadStreamOptions {
  /** The first offset to return. Default 0. */
  from?: number;
  /** Wait for chunks not committed yet until the stream closes or the task ends. Default true. */
  follow?: boolean;
  /** Ends the reader (it returns; no error). */
  signal?: AbortSignal;
  /** How often a follower looks for chunks appended by other processes. Default 100 ms. */
  pollMs?: number;
}

export const MAX_POLL_MS = 60_000;

/** Live readers of this process, woken by its committed appends. */
export class StreamWaiters {
  readonly #waiting = new Map<string, Set<() => void>>();

  /** An append of (task, name) committed here. */
  appended(taskId: number, name: string): void {
    const set = this.#waiting.get(key(taskId, name));
    if (!set) return;
    this.#waiting.delete(key(taskId, name));
    for (const wake of set) wake();
  }

  /** Resolves at the next append here, after `ms`, or when `signal` aborts. */
  wait(taskId: number, name: string, ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve) => {
      const k = key(taskId, name);
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        const set = this.#waiting.get(k);
        set?.delete(done);
        if (set?.size === 0) this.#waiting.delete(k);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener("abort", done, { once: true });
      const set = this.#waiting.get(k) ?? new Set();
      this.#waiting.set(k, set);
      set.add(done);
    });
  }
}

function key(taskId: number, name: string): string {
  return `${taskId}\u001f${name}`;
}

/** Checks readStream's arguments before anything is read (spec §16.5). */
export function checkRead(
  taskId: unknown,
  name: unknown,
  opts: ReadStreamOptions,
): { id: TaskId; name: string; from: number; follow: boolean; pollMs: number } {
  if (typeof taskId !== "number" || !Number.isSafeInteger(taskId) || taskId < 1)
    throw new ValidationError(`task id must be a positive integer (got ${describe(taskId)})`);
  const n = checkName(name, "stream name");
  if (opts === null || typeof opts !== "object")
    throw new ValidationError("readStream options must be an object");
  for (const k of Object.keys(opts))
    if (!["from", "follow", "signal", "pollMs"].includes(k))
      throw new ValidationError(`readStream: unknown option "${k}"`);
  const from = opts.from ?? 0;
  if (typeof from !== "number" || !Number.isSafeInteger(from) || from < 0)
    throw new ValidationError(`readStream from must be an integer ≥ 0 (got ${describe(from)})`);
  const follow = opts.follow ?? true;
  if (typeof follow !== "boolean") throw new ValidationError("readStream follow must be a boolean");
  const pollMs = opts.pollMs ?? 100;
  if (typeof pollMs !== "number" || !Number.isInteger(pollMs) || pollMs < 1 || pollMs > MAX_POLL_MS)
    throw new ValidationError(`readStream pollMs must be an integer in [1, ${MAX_POLL_MS}]`);
  return { id: taskId, name: n, from, follow, pollMs };
}

/** spec §16.5. `closed` tells whether the instance closed (a follower then stops). */
export async function* readChunks(
  store: Store,
  waiters: StreamWaiters,
  args: ReturnType<typeof checkRead>,
  signal: AbortSignal | undefined,
  closed: () => boolean,
): AsyncGenerator<StreamChunk, void, undefined> {
  let next = args.from;
  let first = true;
  for (;;) {
    if (signal?.aborted) return;
    if (closed()) throw new ClosedError();
    const r = await retryStore(() => store.readStream(args.id, args.name, next));
    if (first && !r.exists) throw new NotFoundError(`task ${args.id}`);
    first = false;
    for (const c of r.chunks) {
      yield c;
      next = c.offset + 1;
    }
    const length = r.info?.length ?? 0;
    if (next < length) continue; // a page of a long stream: read on at once
    if (!args.follow || r.info?.closed || r.ended) return;
    await waiters.wait(args.id, args.name, args.pollMs, signal);
  }
}

/** The info of every stream of a task (spec §16.5), for the API and the dashboard. */
export async function streamsOf(store: Store, taskId: unknown): Promise<StreamInfo[]> {
  if (typeof taskId !== "number" || !Number.isSafeInteger(taskId) || taskId < 1)
    throw new ValidationError(`task id must be a positive integer (got ${describe(taskId)})`);
  return retryStore(() => store.listStreams(taskId));
}
