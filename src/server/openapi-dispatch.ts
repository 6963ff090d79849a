/** The OpenAPI description of the dispatch routes (routes/dispatch.ts, spec §20.27). */
import { anyObject, errors, json, ok, query } from "./openapi-kit.js";

const id = (what: string) => ({
  name: "id",
  in: "path",
  required: true,
  description: `${what} id`,
  schema: { type: "string", pattern: "^[1-9][0-9]{0,17}$" },
});
const limit = query(
  "limit",
  { type: "integer", minimum: 1, maximum: 1_000, default: 100 },
  "Most rows to return.",
);
const after = query("after", { type: "string" }, "Only rows with ids after this one.");
const empty = { required: false, ...json({ type: "object", additionalProperties: false }) };

export const DISPATCH_PATHS = {
  "/api/dispatch/items": {
    get: {
      summary: "Dispatch items in id order (spec §20.18)",
      parameters: [
        query(
          "state",
          { type: "string", enum: ["open", "running", "done", "closed", "archived"] },
          "Only this state.",
        ),
        query("pipeline", { type: "string" }, "Only this pipeline."),
        after,
        limit,
      ],
      responses: { ...ok("{ items }"), ...errors(400, 401) },
    },
    post: {
      summary: "Add an item, open at the given step (spec §20.19)",
      requestBody: {
        required: true,
        ...json({
          type: "object",
          required: ["pipeline", "step"],
          additionalProperties: false,
          properties: { pipeline: { type: "string" }, step: { type: "string" }, input: {} },
        }),
      },
      responses: { ...ok("{ item }", anyObject, "201"), ...errors(400, 401, 413) },
    },
  },
  "/api/dispatch/items/{id}": {
    get: {
      summary: "An item and its attempts",
      parameters: [id("Item")],
      responses: {
        ...ok(
          "{ item, attempts, stuck } — stuck: null, or why an open item's step is not in its pipeline (spec §20.30)",
        ),
        ...errors(400, 401, 404),
      },
    },
  },
  "/api/dispatch/items/{id}/move": {
    post: {
      summary:
        "Move an open item to a step its pipeline has in the server's configuration, guarded on the step it was read at (spec §20.30)",
      parameters: [id("Item")],
      requestBody: {
        required: true,
        ...json({
          type: "object",
          required: ["step"],
          additionalProperties: false,
          properties: { step: { type: "string" } },
        }),
      },
      responses: { ...ok("{ item }"), ...errors(400, 401, 404) },
    },
  },
  "/api/dispatch/items/{id}/close": {
    post: {
      summary: "Close an open or running item; its live attempts close for item-closed (spec §20.19)",
      parameters: [id("Item")],
      requestBody: empty,
      responses: { ...ok("{ item, closing }"), ...errors(400, 401, 404) },
    },
  },
  "/api/dispatch/attempts": {
    get: {
      summary: "Dispatch attempts in id order",
      parameters: [
        query("item", { type: "string" }, "Only this item's attempts."),
        query("state", { type: "string" }, "Only this state."),
        query("live", { type: "string", enum: ["true", "false"] }, "Only live attempts."),
        after,
        limit,
      ],
      responses: { ...ok("{ attempts }"), ...errors(400, 401) },
    },
  },
  "/api/dispatch/attempts/{id}": {
    get: {
      summary: "An attempt and its timeline (readings, decisions, moves), oldest first",
      parameters: [
        id("Attempt"),
        query("after", { type: "integer", minimum: 0 }, "Only events after this id."),
      ],
      responses: { ...ok("{ attempt, events }"), ...errors(400, 401, 404) },
    },
  },
  "/api/dispatch/attempts/{id}/why": {
    get: {
      summary:
        "Why an attempt is where it is, and the instant of the next threshold that would move it, with the server's dispatch configuration (spec §20.28)",
      parameters: [id("Attempt")],
      responses: {
        "200": {
          description: "{ attempt, reason, sentence }",
          ...json({
            type: "object",
            required: ["attempt", "reason", "sentence"],
            properties: {
              attempt: { type: "string" },
              reason: {
                type: "object",
                required: ["kind"],
                properties: {
                  kind: {
                    type: "string",
                    enum: ["ended", "spawning", "running", "sleeping", "waking", "closing"],
                  },
                },
                additionalProperties: true,
              },
              sentence: { type: "string" },
            },
          }),
        },
        ...errors(400, 401, 404),
      },
    },
  },
  "/api/dispatch/attempts/{id}/closeout": {
    post: {
      summary: "Report a live attempt's close-out; it closes (closed-out) and settles by it (spec §20.24)",
      parameters: [id("Attempt")],
      requestBody: {
        required: true,
        ...json({
          type: "object",
          required: ["outcome"],
          additionalProperties: false,
          properties: {
            outcome: { type: "string", enum: ["succeeded", "failed"] },
            summary: { type: "string" },
            data: {},
          },
        }),
      },
      responses: { ...ok("{ attempt }"), ...errors(400, 401, 404) },
    },
  },
  "/api/dispatch/attempts/{id}/wake": {
    post: {
      summary: "Ask a sleeping attempt to wake; the runner takes a seat for it (spec §20.26)",
      parameters: [id("Attempt")],
      requestBody: empty,
      responses: { ...ok("{ attempt }"), ...errors(400, 401, 404) },
    },
  },
  "/api/dispatch/seats": {
    get: {
      summary: "Seats per worker kind: limit, held, capacity backoff (spec §20.21)",
      responses: { ...ok("{ seats }"), ...errors(401) },
    },
  },
  "/api/dispatch/prs": {
    get: {
      summary: "Linked pull requests with their last known state, checks and links (spec §22.9)",
      parameters: [
        query("item", { type: "string" }, "Only those linked to this item's attempts."),
        query("attempt", { type: "string" }, "Only those linked to this attempt."),
        after,
        limit,
      ],
      responses: { ...ok("{ prs }"), ...errors(400, 401) },
    },
  },
  "/api/dispatch/prs/{id}": {
    get: {
      summary: "One linked pull request (spec §22.9)",
      parameters: [id("Pull request")],
      responses: { ...ok("{ pr }"), ...errors(400, 401, 404) },
    },
  },
  "/api/outbox": {
    get: {
      summary:
        "Each outbox destination: state (ok, retrying, dead), cursor, lag in facts and seconds, failures, last error (spec §21.12)",
      responses: { ...ok("{ now, destinations }"), ...errors(401) },
    },
  },
  "/api/dispatch/board": {
    get: {
      summary: "A pipeline's items that are not archived, by step, each with its live attempt",
      parameters: [query("pipeline", { type: "string" }, "Only this pipeline.")],
      responses: { ...ok("{ pipeline, steps }"), ...errors(400, 401) },
    },
  },
};
