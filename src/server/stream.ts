/**
 * GET /api/stream: Server-Sent Events.
 *
 * Modes of one stream:
 * - polling: every `intervalMs` it reads stats (one `stats` event) and each
 *   watched task (a `task` event when its status, outcome, attempts or
 *   progress differ from what this stream sent last; the first read sends
 *   every watched task, so a client starts from a baseline).
 * - failing: a read threw; an `error` event carries the code (driver text is
 *   logged, not sent) and polling goes on at the next interval.
 * - ended: the client went away (the response was cancelled), the server is
 *   closing, or the engine is closed. The loop leaves at its next wait and
 *   releases its slot.
 *
 * Bounds: `maxStreams` open streams (503 beyond), `maxWatch` ids per stream,
 * one interval between reads. A client that stops reading blocks its own
 * loop on the write (no buffering), never the server.
 */
import type { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import type { Ratchet } from "../engine/ratchet.js";
import { ClosedError } from "../errors.js";
import type { TaskId, TaskRecord } from "../store/store.js";
import { HttpError, toErrorResponse } from "./errors.js";
import { onlyKeys, parseIdList } from "./params.js";

export interface StreamOptions {
  intervalMs: number;
  maxStreams: number;
  maxWatch: number;
  log: (msg: string, err: unknown) => void;
}

/** What a `task` event carries: enough for a list row or a progress bar, never the input or result. */
export function taskView(t: TaskRecord) {
  return {
    id: t.id,
    name: t.name,
    queue: t.queue,
    status: t.status,
    outcome: t.outcome,
    attempts: t.attempts,
    progress: t.progress,
    progressNote: t.progressNote,
    error: t.error ? { name: t.error.name, message: t.error.message } : null,
    abortRequested: t.abortRequested,
    updatedAt: t.updatedAt,
    endedAt: t.endedAt,
  };
}

/** The fields whose change sends a `task` event. */
function fingerprint(t: TaskRecord | null): string {
  return t ? JSON.stringify([t.status, t.outcome, t.attempts, t.progress, t.progressNote]) : "missing";
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

/** Registers the route; `live` collects a stop function per open stream (the server ends them at close). */
export function registerStream(app: Hono, ratchet: Ratchet, o: StreamOptions, live: Set<() => void>): void {
  app.get("/api/stream", (c) => {
    const q = c.req.query();
    onlyKeys(q, ["watch"], "query");
    const watch = parseIdList(q.watch, "watch", o.maxWatch);
    if (live.size >= o.maxStreams)
      throw new HttpError(503, "RATCHET_TOO_MANY_STREAMS", `at most ${o.maxStreams} streams may be open`);
    const stop = new AbortController();
    const end = () => stop.abort();
    live.add(end);
    return streamSSE(c, async (stream) => {
      stream.onAbort(end);
      const sent = new Map<TaskId, string>();
      try {
        while (!stop.signal.aborted) {
          await poll(stream, ratchet, watch, sent, o, end);
          await pause(o.intervalMs, stop.signal);
        }
      } finally {
        live.delete(end);
      }
    });
  });
}

type Sse = Parameters<Parameters<typeof streamSSE>[1]>[0];

async function poll(
  stream: Sse,
  ratchet: Ratchet,
  watch: readonly TaskId[],
  sent: Map<TaskId, string>,
  o: StreamOptions,
  end: () => void,
): Promise<void> {
  try {
    const queues = await ratchet.stats();
    await stream.writeSSE({ event: "stats", data: JSON.stringify({ at: Date.now(), queues }) });
    for (const id of watch) {
      const t = await ratchet.get(id);
      const f = fingerprint(t);
      if (sent.get(id) === f) continue;
      sent.set(id, f);
      const data = t ? taskView(t) : { id, found: false };
      await stream.writeSSE({ event: "task", data: JSON.stringify(data) });
    }
  } catch (err) {
    if (err instanceof ClosedError) return end();
    const { body } = toErrorResponse(err, o.log);
    await stream.writeSSE({ event: "error", data: JSON.stringify(body) });
  }
}
