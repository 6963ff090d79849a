/**
 * The engine's own commits (spec F.10): a StoreError (connection lost, server
 * restarting) is retried with backoff. Every operation retried here is fenced
 * or idempotent, so repeating one whose commit did land changes nothing: a
 * repeated settlement is refused by its fence, a repeated step insert is a
 * no-op. Ratchet decisions (LeaseLostError, AbortedError, …) are never retried.
 */
import { StoreError } from "../errors.js";

export async function retryStore<T>(fn: () => Promise<T>, attempts = 8, baseMs = 50): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof StoreError) || i >= attempts) throw err;
      const ceiling = Math.min(5_000, baseMs * 2 ** (i - 1));
      await new Promise((r) => setTimeout(r, Math.floor(ceiling / 2 + (Math.random() * ceiling) / 2)));
    }
  }
}
