/** The OpenAPI description of the conversation routes (routes/conversations.ts, spec §17.11). */
import { anyObject, errors, eventStream, json, ok, query } from "./openapi-kit.js";

const convParam = {
  name: "id",
  in: "path",
  required: true,
  description: "Conversation id: 1–200 printable ASCII characters without spaces",
  schema: { type: "string", minLength: 1, maxLength: 200 },
};
const intParam = { name: "id", in: "path", required: true, schema: { type: "integer", minimum: 1 } };
const seq = (name: string, description: string) => query(name, { type: "integer", minimum: 0 }, description);
const limit = (def: number, max: number) =>
  query("limit", { type: "integer", minimum: 1, maximum: max, default: def }, "Most items to return.");

/** What a reset or handoff answers (spec §19.29): the submission, as a submission does. */
const controlResponses = {
  ...ok("{ submission, created: true }", anyObject, "201"),
  ...ok("{ submission, created: false }: the requestId's first submission"),
  ...errors(400, 401, 403, 404, 415),
};

export const CONVERSATION_PATHS = {
  "/api/conversations": {
    get: {
      summary: "Conversations in id order; `next` is the `after` of the next page (spec §17.2)",
      parameters: [
        query("after", { type: "string" }, "Only conversations whose id sorts after this."),
        query(
          "busy",
          { type: "string", enum: ["true", "false"] },
          "Only those with (without) a run in progress.",
        ),
        limit(100, 1_000),
      ],
      responses: { ...ok("{ conversations, next }"), ...errors(400, 401, 403) },
    },
  },
  "/api/conversations/{id}": {
    get: {
      summary: "A conversation with its inbox (queued submissions) and state",
      parameters: [convParam],
      responses: { ...ok("{ conversation, inbox, state }"), ...errors(400, 401, 403, 404) },
    },
  },
  "/api/conversations/{id}/entries": {
    get: {
      summary: "Entries [from, to) in seq order",
      parameters: [
        convParam,
        seq("from", "First seq (default 0)."),
        seq("to", "End seq, exclusive."),
        limit(1_000, 10_000),
      ],
      responses: { ...ok("{ entries }"), ...errors(400, 401, 403) },
    },
  },
  "/api/conversations/{id}/events": {
    get: {
      summary:
        "Server-Sent Events: `entry` per entry (event id = seq), then `idle` ({ next }) once no run is in progress and the inbox is empty; `Last-Event-ID` resumes after that seq",
      parameters: [
        convParam,
        seq("from", "First seq (default 0; Last-Event-ID wins)."),
        query(
          "follow",
          { type: "string", enum: ["true", "false"] },
          "false: end after the committed entries.",
        ),
      ],
      responses: { ...eventStream, ...errors(400, 401, 403, 404, 503) },
    },
  },
  "/api/conversations/{id}/submissions": {
    post: {
      summary:
        "Submit input (spec §17.5): placed with a new run when idle, else queued (follow-up, steer) or refused (reject: 409 RATCHET_CONVERSATION_BUSY); the conversation is created when missing",
      parameters: [convParam],
      requestBody: {
        required: true,
        ...json({
          type: "object",
          required: ["input"],
          properties: {
            input: { description: "Any JSON value: the user entry's data" },
            requestId: { type: "string", description: "Idempotency key per conversation" },
            whenBusy: { enum: ["follow-up", "steer", "reject"] },
          },
        }),
      },
      responses: {
        ...ok("{ submission, created: true }", anyObject, "201"),
        ...ok("{ submission, created: false }: the requestId's first submission"),
        ...errors(400, 401, 403, 404, 409, 413, 415),
      },
    },
  },
  "/api/conversations/{id}/abort": {
    post: {
      summary: "Withdraw queued inputs, abort the run's task tree, answer once idle (spec §17.8)",
      parameters: [convParam],
      requestBody: {
        required: false,
        ...json({
          type: "object",
          properties: {
            background: { type: "boolean" },
            timeoutMs: { type: "integer", minimum: 0, maximum: 120_000 },
          },
        }),
      },
      responses: { ...ok("{ withdrawn, marked }"), ...errors(400, 401, 403, 404, 415) },
    },
  },
  "/api/conversations/{id}/close": {
    post: {
      summary: "Close it: later submissions are refused, queued inputs end unanswered (closed) (spec §17.8)",
      parameters: [convParam],
      responses: {
        ...ok("{ closed }: false when it was closed already"),
        ...errors(400, 401, 403, 404, 415),
      },
    },
  },
  "/api/conversations/{id}/reset": {
    post: {
      summary: "Start a fresh context, at once when idle, else at the run's next boundary (spec §19.26)",
      parameters: [convParam],
      requestBody: {
        required: false,
        ...json({
          type: "object",
          properties: { note: { type: "string", maxLength: 100_000 }, requestId: { type: "string" } },
        }),
      },
      responses: controlResponses,
    },
  },
  "/api/conversations/{id}/handoff": {
    post: {
      summary:
        "Hand off to another agent configuration with a fresh context that starts with the note (spec §19.27)",
      parameters: [convParam],
      requestBody: {
        required: true,
        ...json({
          type: "object",
          required: ["note"],
          properties: {
            note: { type: "string", minLength: 1, maxLength: 100_000 },
            config: anyObject,
            requestId: { type: "string" },
          },
        }),
      },
      responses: controlResponses,
    },
  },
  "/api/submissions/{id}": {
    get: {
      summary: "One submission: queued, placed, done (answerSeq) or unanswered (reason)",
      parameters: [intParam],
      responses: { ...ok("{ submission }"), ...errors(400, 401, 403, 404) },
    },
  },
  "/api/tasks/{id}/entries": {
    get: {
      summary: "The conversation entries a task wrote",
      parameters: [intParam, limit(1_000, 10_000)],
      responses: { ...ok("{ entries }"), ...errors(400, 401, 403) },
    },
  },
};
