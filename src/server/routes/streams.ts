/**
 * A task's durable output streams over HTTP (spec §16.8):
 * - GET /api/tasks/:id/streams — the task's streams (name, length, bytes, closed);
 * - GET /api/tasks/:id/streams/:name — Server-Sent Events: one `chunk` event per chunk, its event
 *   id the chunk's offset and its data the chunk's JSON, then one `end` event (`{ next }`: the
 *   offset a reader would resume at). `Last-Event-ID` resumes after that offset, as a browser's
 *   EventSource does by itself after a drop; `?from=N` starts at N; `?follow=false` ends at the
 *   committed end instead of following.
 *
 * Bounds: the server's cap of open streams (shared with /api/stream, 503 beyond); a reader ends
 * when its client goes away, when the server closes, or when the stream ends (spec §16.5).
 */
import type { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import type { Ratchet } from "../../engine/ratchet.js";
import { ClosedError, ValidationError } from "../../errors.js";
import { HttpError, toErrorResponse } from "../errors.js";
import { onlyKeys, parseName, parseTaskId, resumeFrom } from "../params.js";

export interface StreamRouteOptions {
  maxStreams: number;
  log: (msg: string, err: unknown) => void;
}

export function registerStreamRoutes(
  app: Hono,
  ratchet: Ratchet,
  o: StreamRouteOptions,
  live: Set<() => void>,
): void {
  app.get("/api/tasks/:id/streams", async (c) => {
    const id = parseTaskId(c.req.param("id"));
    onlyKeys(c.req.query(), [], "query");
    if (!(await ratchet.get(id))) throw new HttpError(404, "RATCHET_NOT_FOUND", `task ${id} not found`);
    return c.json({ streams: await ratchet.streams(id) });
  });

  app.get("/api/tasks/:id/streams/:name", async (c) => {
    const id = parseTaskId(c.req.param("id"));
    const name = parseName(c.req.param("name"), "stream name")!;
    const q = c.req.query();
    onlyKeys(q, ["from", "follow"], "query");
    if (q.follow !== undefined && q.follow !== "true" && q.follow !== "false")
      throw new ValidationError(`follow must be true or false (got "${q.follow.slice(0, 20)}")`);
    const from = resumeFrom(c.req.header("last-event-id"), q.from, "a chunk offset");
    if (!(await ratchet.get(id))) throw new HttpError(404, "RATCHET_NOT_FOUND", `task ${id} not found`);
    if (live.size >= o.maxStreams)
      throw new HttpError(503, "RATCHET_TOO_MANY_STREAMS", `at most ${o.maxStreams} streams may be open`);
    const stop = new AbortController();
    const end = () => stop.abort();
    live.add(end);
    const chunks = ratchet.readStream(id, name, { from, follow: q.follow !== "false", signal: stop.signal });
    return streamSSE(c, async (sse) => {
      sse.onAbort(end);
      let next = from;
      try {
        for await (const chunk of chunks) {
          await sse.writeSSE({ event: "chunk", id: String(chunk.offset), data: JSON.stringify(chunk.data) });
          next = chunk.offset + 1;
        }
        if (!stop.signal.aborted) await sse.writeSSE({ event: "end", data: JSON.stringify({ next }) });
      } catch (err) {
        if (!(err instanceof ClosedError)) {
          const { body } = toErrorResponse(err, o.log);
          await sse.writeSSE({ event: "error", data: JSON.stringify(body) });
        }
      } finally {
        live.delete(end);
      }
    });
  });
}
