/** A minimal Server-Sent Events reader over fetch, for tests: bounded waits, no sleeps. */
export interface SseEvent {
  event: string;
  data: unknown;
  /** The event's `id:` field, if it had one. */
  id?: string;
}

export interface SseReader {
  status: number;
  /** The next event matching `pred`; throws after timeoutMs. */
  next(pred?: (e: SseEvent) => boolean, timeoutMs?: number): Promise<SseEvent>;
  close(): Promise<void>;
}

const MAX_QUEUED = 10_000;

export async function openSse(url: string, headers: Record<string, string> = {}): Promise<SseReader> {
  const ctl = new AbortController();
  const res = await fetch(url, { headers, signal: ctl.signal });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const queue: SseEvent[] = [];
  const pull = async (deadline: number): Promise<void> => {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error("timed out waiting for an SSE event");
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("timed out waiting for an SSE event")), left);
    });
    try {
      const { done, value } = await Promise.race([reader.read(), timeout]);
      if (done) throw new Error("the SSE stream ended");
      buffer += decoder.decode(value, { stream: true });
    } finally {
      clearTimeout(timer);
    }
    for (let i = buffer.indexOf("\n\n"); i !== -1; i = buffer.indexOf("\n\n")) {
      const block = buffer.slice(0, i);
      buffer = buffer.slice(i + 2);
      let event = "message";
      let id: string | undefined;
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
        else if (line.startsWith("id: ")) id = line.slice(4);
      }
      queue.push({ event, data: JSON.parse(data.join("\n")), ...(id === undefined ? {} : { id }) });
    }
  };
  return {
    status: res.status,
    async next(pred = () => true, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const i = queue.findIndex(pred);
        if (i !== -1) return queue.splice(i, 1)[0]!;
        // Unmatched events stay for a later next(); stats are only kept while few, so memory stays bounded.
        if (queue.length > MAX_QUEUED) queue.splice(0, queue.length - MAX_QUEUED);
        await pull(deadline);
      }
    },
    async close() {
      ctl.abort();
      await reader.cancel().catch(() => {});
    },
  };
}
