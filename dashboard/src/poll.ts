/**
 * Polling for the views that read state the live stream does not carry (conversations, dispatch,
 * providers): `fn` now and every `ms` until the view unmounts; a failure shows, the next round
 * tries again. Rounds never overlap: the next is scheduled when one ends.
 */
import { useEffect, useState } from "preact/hooks";

export const POLL_MS = 1_000;

export function usePoll(fn: () => Promise<void>, deps: unknown[], ms = POLL_MS): string | null {
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let stop = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const round = async () => {
      try {
        await fn();
        setError(null);
      } catch (e) {
        setError((e as Error).message);
      }
      if (!stop) timer = setTimeout(round, ms);
    };
    void round();
    return () => {
      stop = true;
      clearTimeout(timer);
    };
  }, deps);
  return error;
}
