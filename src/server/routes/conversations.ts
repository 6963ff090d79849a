/**
 * Conversations over HTTP (spec §17.11):
 * - GET  /api/conversations?after=&limit=&busy=       — conversations in id order (`next`: the cursor)
 * - GET  /api/conversations/:id                       — the conversation, its inbox and its state
 * - GET  /api/conversations/:id/entries?from=&to=&limit=
 * - GET  /api/conversations/:id/events?from=&follow=  — Server-Sent Events: one `entry` event per
 *   entry, its event id the entry's seq (so `Last-Event-ID` resumes after it), then `idle` once the
 *   conversation has no run and an empty inbox (`follow=false`: once the committed entries are sent)
 * - POST /api/conversations/:id/submissions {input, requestId?, whenBusy?} — 201 with the
 *   submission, 200 when a requestId found an earlier one; the conversation is created when missing
 * - GET  /api/submissions/:id                         — one submission
 * - POST /api/conversations/:id/abort {background?}   — withdraws queued inputs, aborts the run's
 *   tree and answers once the conversation is idle
 * - POST /api/conversations/:id/close                — closes it: later input refused, queued withdrawn
 * - POST /api/conversations/:id/reset {note?, requestId?} — a fresh context, at the next boundary
 *   when busy (spec §19.26); 201 new, 200 for a repeated requestId
 * - POST /api/conversations/:id/handoff {note, config?, requestId?} — a fresh context under another
 *   agent configuration (spec §19.27)
 * - GET  /api/tasks/:id/entries                       — the entries a task wrote
 * Submitting needs the run (`defineRun`) among the server's definitions; reading does not.
 */
import type { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { Conversations } from "../../agent/conversations.js";
import { handoff, reset } from "../../agent/reset.js";
import { watchEntries } from "../../agent/watch.js";
import type { Ratchet } from "../../engine/ratchet.js";
import { ClosedError, ValidationError } from "../../errors.js";
import { checkConversationId } from "../../store/conversations/validate.js";
import { HttpError, toErrorResponse } from "../errors.js";
import { onlyKeys, parseBoolean, parseIntParam, parseTaskId, readObject, resumeFrom } from "../params.js";

export interface ConversationRouteOptions {
  maxStreams: number;
  log: (msg: string, err: unknown) => void;
}

const WHEN_BUSY = ["follow-up", "steer", "reject"];
const MAX_ABORT_WAIT_MS = 120_000;

export function registerConversationRoutes(
  app: Hono,
  ratchet: Ratchet,
  o: ConversationRouteOptions,
  live: Set<() => void>,
): void {
  const ops = () => ratchet.store.conversations;
  let conversations: Conversations | undefined;
  const writer = () => {
    conversations ??= Conversations.of(ratchet);
    return conversations;
  };
  const conversationId = (text: string | undefined) => checkConversationId(text, "conversation id");

  app.get("/api/conversations", async (c) => {
    const q = c.req.query();
    onlyKeys(q, ["after", "limit", "busy"], "query");
    const limit = parseIntParam(q.limit, "limit", 1, 1_000) ?? 100;
    const list = await ops().listConversations({ after: q.after, limit, busy: parseBoolean(q.busy, "busy") });
    return c.json({ conversations: list, next: list.length === limit ? list[list.length - 1]!.id : null });
  });

  app.get("/api/conversations/:id", async (c) => {
    const id = conversationId(c.req.param("id"));
    onlyKeys(c.req.query(), [], "query");
    const conversation = await ops().getConversation(id);
    if (!conversation) throw new HttpError(404, "RATCHET_NOT_FOUND", `conversation "${id}" not found`);
    return c.json({
      conversation,
      inbox: await ops().inbox(id, 1_000),
      state: await ops().conversationState(id),
    });
  });

  app.get("/api/conversations/:id/entries", async (c) => {
    const id = conversationId(c.req.param("id"));
    const q = c.req.query();
    onlyKeys(q, ["from", "to", "limit"], "query");
    const range = {
      from: parseIntParam(q.from, "from", 0, Number.MAX_SAFE_INTEGER),
      to: parseIntParam(q.to, "to", 0, Number.MAX_SAFE_INTEGER),
      limit: parseIntParam(q.limit, "limit", 1, 10_000) ?? 1_000,
    };
    return c.json({ entries: await ops().entries(id, range) });
  });

  app.get("/api/tasks/:id/entries", async (c) => {
    const id = parseTaskId(c.req.param("id"));
    const q = c.req.query();
    onlyKeys(q, ["limit"], "query");
    return c.json({
      entries: await ops().entriesByTask(id, parseIntParam(q.limit, "limit", 1, 10_000) ?? 1_000),
    });
  });

  app.get("/api/submissions/:id", async (c) => {
    const id = parseTaskId(c.req.param("id"));
    const submission = await ops().submission(id);
    if (!submission) throw new HttpError(404, "RATCHET_NOT_FOUND", `submission ${id} not found`);
    return c.json({ submission });
  });

  app.post("/api/conversations/:id/submissions", async (c) => {
    const id = conversationId(c.req.param("id"));
    const body = await readObject(c.req);
    onlyKeys(body, ["input", "requestId", "whenBusy"], "submission");
    if (!("input" in body)) throw new ValidationError("submission: input is required");
    if (body.requestId !== undefined && typeof body.requestId !== "string")
      throw new ValidationError("submission: requestId must be a string");
    if (body.whenBusy !== undefined && !WHEN_BUSY.includes(body.whenBusy as string))
      throw new ValidationError(`submission: whenBusy must be one of ${WHEN_BUSY.join(", ")}`);
    const w = writer();
    await w.create(id);
    const s = await w.submit(id, body.input, {
      requestId: body.requestId as string | undefined,
      whenBusy: body.whenBusy as "follow-up" | undefined,
    });
    return c.json({ submission: s.record, created: s.created }, s.created ? 201 : 200);
  });

  app.post("/api/conversations/:id/abort", async (c) => {
    const id = conversationId(c.req.param("id"));
    const body = await readObject(c.req);
    onlyKeys(body, ["background", "timeoutMs"], "abort");
    if (body.background !== undefined && typeof body.background !== "boolean")
      throw new ValidationError("abort: background must be a boolean");
    const timeoutMs = body.timeoutMs ?? 30_000;
    if (
      typeof timeoutMs !== "number" ||
      !Number.isInteger(timeoutMs) ||
      timeoutMs < 0 ||
      timeoutMs > MAX_ABORT_WAIT_MS
    )
      throw new ValidationError(`abort: timeoutMs must be an integer in [0, ${MAX_ABORT_WAIT_MS}]`);
    if (!(await ops().getConversation(id)))
      throw new HttpError(404, "RATCHET_NOT_FOUND", `conversation "${id}" not found`);
    return c.json(await writer().abort(id, { background: body.background === true, timeoutMs }));
  });

  app.post("/api/conversations/:id/close", async (c) => {
    const id = conversationId(c.req.param("id"));
    const body = await readObject(c.req);
    onlyKeys(body, [], "close");
    return c.json({ closed: await ops().closeConversation(id) });
  });

  // spec §19.26–§19.27: a reset or handoff is a submission (idempotent by requestId).
  for (const control of ["reset", "handoff"] as const)
    app.post(`/api/conversations/:id/${control}`, async (c) => {
      const id = conversationId(c.req.param("id"));
      const body = await readObject(c.req);
      onlyKeys(body, control === "reset" ? ["note", "requestId"] : ["note", "config", "requestId"], control);
      if (body.requestId !== undefined && typeof body.requestId !== "string")
        throw new ValidationError(`${control}: requestId must be a string`);
      if (!(await ops().getConversation(id)))
        throw new HttpError(404, "RATCHET_NOT_FOUND", `conversation "${id}" not found`);
      const o = body as { note?: string; config?: never; requestId?: string };
      const s =
        control === "reset"
          ? await reset(writer(), id, o)
          : await handoff(writer(), id, { ...o, note: o.note as string });
      return c.json({ submission: s.record, created: s.created }, s.created ? 201 : 200);
    });

  app.get("/api/conversations/:id/events", async (c) => {
    const id = conversationId(c.req.param("id"));
    const q = c.req.query();
    onlyKeys(q, ["from", "follow"], "query");
    const follow = parseBoolean(q.follow, "follow") ?? true;
    const from = resumeFrom(c.req.header("last-event-id"), q.from, "an entry seq");
    if (!(await ops().getConversation(id)))
      throw new HttpError(404, "RATCHET_NOT_FOUND", `conversation "${id}" not found`);
    if (live.size >= o.maxStreams)
      throw new HttpError(503, "RATCHET_TOO_MANY_STREAMS", `at most ${o.maxStreams} streams may be open`);
    const stop = new AbortController();
    const end = () => stop.abort();
    live.add(end);
    return streamSSE(c, async (sse) => {
      sse.onAbort(end);
      let next = from;
      try {
        const entries = follow
          ? watchEntries(ops(), id, { from, signal: stop.signal })
          : (await ops().entries(id, { from, limit: 10_000 })).values();
        for await (const e of entries) {
          await sse.writeSSE({ event: "entry", id: String(e.seq), data: JSON.stringify(e) });
          next = e.seq + 1;
        }
        if (!stop.signal.aborted) await sse.writeSSE({ event: "idle", data: JSON.stringify({ next }) });
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
