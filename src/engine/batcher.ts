/**
 * Group commit: items submitted during one turn of the event loop are written
 * by one store call (one transaction), flushed on setImmediate, so latency is
 * one turn. Used for settlements (completions, retries, failures) and for step
 * results. With SQLite each commit costs a WAL append; with PostgreSQL an fsync
 * (~0.55 ms on the test box), which capped a step per commit at ~1.8k steps/s.
 * Invariant: each item is fenced on its own in the store (spec §3.7); a batch
 * never lets one stale holder's write through because another's is current.
 *
 * `lanes` > 1 lets that many writes be in flight at once (spec §8.9): a second opens while one is
 * being written only once half a batch waits, so a trickle still goes out in one write at a time.
 * For a store whose writes run on connections of their own; both stores take one now (see
 * PostgresStore.settleLanes for what two cost and gave on PostgreSQL).
 */
/**
 * Hears a batched item's result, or the error of its whole batch, with the context it was sent
 * with: the settlement of every task passes its invocation and one function shared by all of them,
 * where a closure per task was garbage (see send).
 */
export type Done<R, C> = (ctx: C, err: unknown, result?: R) => void;

export class Batcher<T, R> {
  /**
   * What waits for the next write, as three parallel arrays rather than an entry object per item
   * (one allocation less per settled task).
   */
  #items: T[] = [];
  #dones: Done<R, unknown>[] = [];
  #ctxs: unknown[] = [];
  #scheduled = false;
  /** Writes in flight: what arrives while they are goes into the next one, together. */
  #writing = 0;
  /** What must wait for a second write to open while one is in flight (see send). */
  readonly #half: number;

  constructor(
    private readonly write: (items: T[]) => Promise<R[]>,
    readonly maxBatch = 500,
    readonly lanes = 1,
  ) {
    if (!Number.isInteger(maxBatch) || maxBatch < 1)
      throw new RangeError("maxBatch must be a positive integer");
    if (!Number.isInteger(lanes) || lanes < 1 || lanes > 8)
      throw new RangeError("lanes must be an integer in [1, 8]");
    this.#half = maxBatch / 2;
  }

  submit(item: T): Promise<R> {
    return new Promise((resolve, reject) => this.send(item, settlePromise<R>, { resolve, reject }));
  }

  /**
   * submit with a callback instead of a promise, for the settlement of every task: the promise,
   * its two resolvers and the caller's reaction were ~400 bytes of garbage per task. `done` hears
   * `ctx` back, so one function serves every item.
   */
  send<C>(item: T, done: Done<R, C>, ctx: C): void {
    // Every load and comparison of the test below runs on every call: its second lane's half was
    // reached by no call while one write at a time was in flight, so V8 optimized it without type
    // feedback and threw the code away the first time a second write could open (`--trace-deopt`
    // on a fresh PostgreSQL worker: settle and the two functions it is inlined into, each compiled
    // again). With the same care in driver.ts, a W2 worker of the peers harness has no deopts of
    // Ratchet's code mid-drain (three runs; 2–5 before; the first empty claim at the end of a
    // drain still deoptimizes fill once: its `[]` is another kind of array). What it saves
    // is below the machine's noise: ten pairs of cold drains (`node dist/bench/drain.js --store pg
    // --cold --tasks 20000 --pairs 10 --base …`) 17.4 → 17.1 µs of worker CPU per task; five pairs
    // of the harness's W2 c16, 32,467 → 32,048 jobs/s and 18.0 → 18.5 µs.
    const waiting = this.#items.push(item);
    this.#dones.push(done as Done<R, unknown>);
    this.#ctxs.push(ctx);
    if (this.#scheduled) return;
    const idle = this.#writing === 0;
    const laneFree = this.#writing < this.lanes;
    const enough = waiting >= this.#half;
    if (idle || (laneFree && enough)) {
      this.#scheduled = true;
      setImmediate(() => void this.#flush());
    }
  }

  /** Writes in flight now (at most `lanes`). */
  get writing(): number {
    return this.#writing;
  }

  async #flush(): Promise<void> {
    this.#scheduled = false;
    this.#writing++;
    while (this.#items.length > 0) {
      const batch = this.#items.splice(0, this.maxBatch);
      const dones = this.#dones.splice(0, this.maxBatch);
      const ctxs = this.#ctxs.splice(0, this.maxBatch);
      let results: R[] | undefined;
      let failure: unknown;
      try {
        results = await this.write(batch);
      } catch (err) {
        failure = err ?? new Error("batch write failed");
      }
      for (let i = 0; i < batch.length; i++) {
        try {
          if (results) dones[i]!(ctxs[i], undefined, results[i]!);
          else dones[i]!(ctxs[i], failure);
        } catch (err) {
          // A callback that throws is a bug: surface it as an uncaught error (as a throwing promise
          // reaction would), without leaving this batcher stuck or the rest of the batch unanswered.
          process.nextTick(rethrow, err);
        }
      }
    }
    this.#writing--;
  }
}

function settlePromise<R>(
  p: { resolve: (r: R) => void; reject: (e: unknown) => void },
  err: unknown,
  result?: R,
): void {
  if (err === undefined) p.resolve(result!);
  else p.reject(err);
}

function rethrow(err: unknown): never {
  throw err;
}
