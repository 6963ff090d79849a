/**
 * Batches settlements (completions, retries, failures) into one store
 * transaction per turn of the event loop. With SQLite each commit costs a WAL
 * append; settling the N invocations that finished in the same turn together
 * costs one. The batch is flushed on setImmediate, so latency is one turn.
 * Invariant: each settlement is fenced on its own (spec §3.7); a batch never
 * lets one stale holder's write through because another's is current.
 */
import type { Settlement, SettleResult, Store } from "../store/store.js";
import { retryStore } from "./store-retry.js";

export class Settler {
  #queue: { s: Settlement; resolve: (r: SettleResult) => void; reject: (e: unknown) => void }[] = [];
  #scheduled = false;

  constructor(
    private readonly store: Store,
    private readonly maxBatch = 500,
  ) {}

  settle(s: Settlement): Promise<SettleResult> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ s, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => void this.#flush());
      }
    });
  }

  async #flush(): Promise<void> {
    this.#scheduled = false;
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.maxBatch);
      try {
        const results = await retryStore(() => this.store.settle(batch.map((b) => b.s)));
        for (const [i, b] of batch.entries()) b.resolve(results[i]!);
      } catch (err) {
        for (const b of batch) b.reject(err);
      }
    }
  }
}
