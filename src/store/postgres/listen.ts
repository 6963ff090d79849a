/** Wake-ups (spec §13): LISTEN on the schema's channel, reconnecting in the background. */
import pg from "pg";
import type { PgCore } from "./core.js";
import { types } from "./core.js";

/**
 * LISTEN for wake-ups (enqueue of due work, dependents released, retries).
 * The listener reconnects with backoff and calls onWake after each
 * reconnect, since notifications sent while disconnected are lost (the
 * worker's poll is the fallback either way).
 */
export async function subscribe(core: PgCore, onWake: () => void): Promise<() => Promise<void>> {
  let stopped = false;
  let current: pg.Client | undefined;
  let delay = 100;
  // One loop owns the connection: it connects, LISTENs, and on loss starts over.
  // It runs in the background, so a worker starts (and polls) while the server is down.
  const loop = async (): Promise<void> => {
    while (!stopped) {
      const cl = new pg.Client({ ...(core.pool.options as pg.ClientConfig), types: types as never });
      cl.on("error", () => {});
      const ended = new Promise<void>((resolve) => cl.once("end", () => resolve()));
      try {
        await cl.connect();
        await cl.query(`LISTEN "${core.channel}"`);
      } catch {
        await cl.end().catch(() => {});
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 5_000);
        continue;
      }
      if (stopped) {
        await cl.end().catch(() => {});
        return;
      }
      current = cl;
      delay = 100;
      cl.on("notification", () => onWake());
      // Notifications sent while we were not listening are lost: poll once now.
      onWake();
      await ended;
      current = undefined;
      if (!stopped) onWake();
    }
  };
  void loop();
  const handle = {
    stop: async () => {
      stopped = true;
      core.listeners.delete(handle);
      await current?.end().catch(() => {});
    },
  };
  core.listeners.add(handle);
  return handle.stop;
}
