/**
 * The OpenAPI 3.1 document served at /openapi.json, written by hand next to
 * the routes it describes. test/server/openapi.test.ts checks that every
 * route the server registers is documented here and nothing else is.
 */
import { OUTCOMES, STATUSES } from "../core/model.js";
import { HTTP_STATUS } from "./errors.js";
import { CONVERSATION_PATHS } from "./openapi-conversations.js";
import { DISPATCH_PATHS } from "./openapi-dispatch.js";
import { anyObject, errors, json, ok, query } from "./openapi-kit.js";
import { MAX_HTTP_TICK_CONCURRENCY, MAX_HTTP_TICK_MS } from "./routes/operations.js";
import { DEFAULT_PAGE, MAX_ERROR_SCAN, MAX_PAGE } from "./routes/tasks.js";

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const idParam = { name: "id", in: "path", required: true, schema: { type: "integer", minimum: 1 } };
const nameParam = (name: string, description: string) => ({
  name,
  in: "path",
  required: true,
  description,
  schema: { type: "string", minLength: 1, maxLength: 200 },
});
const body = (schema: object, required = true) => ({ required, ...json(schema) });
const limitParam = (def: number, max: number) =>
  query("limit", { type: "integer", minimum: 1, maximum: max, default: def }, "Most items to return.");

const entry = {
  type: "object",
  additionalProperties: false,
  required: ["task"],
  properties: {
    task: { type: "string", description: "A registered task name." },
    input: { description: "Task input (JSON, at most 1 MiB), validated by the task's schema." },
    queue: { type: "string" },
    priority: { type: "integer" },
    runAfter: {
      oneOf: [{ type: "integer" }, { type: "string", format: "date-time" }],
      description: "Earliest start: epoch ms or ISO 8601.",
    },
    delayMs: { type: "number", minimum: 0 },
    dedupe: { type: "string" },
    job: { type: "string" },
    scope: { type: "string" },
    needs: { type: "array", items: { oneOf: [{ type: "integer" }, { type: "string" }] }, maxItems: 1000 },
    throttle: anyObject,
    debounce: anyObject,
  },
};
const batchEntry = { ...entry, properties: { ...entry.properties, key: { type: "string" } } };

export const OPENAPI = {
  openapi: "3.1.0",
  info: {
    title: "Ratchet HTTP API",
    version: "1",
    description:
      "See and steer the tasks of one Ratchet store. Errors are { error: { code, message } }. Requests that change something need Content-Type: application/json. See docs/http.md.",
  },
  security: [{ bearer: [] }],
  components: {
    securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
    schemas: {
      Error: {
        type: "object",
        required: ["error"],
        properties: {
          error: {
            type: "object",
            required: ["code", "message"],
            properties: {
              code: { type: "string", examples: Object.keys(HTTP_STATUS) },
              message: { type: "string" },
            },
          },
        },
      },
      Task: {
        type: "object",
        description: "A task record (TaskRecord in src/store/store.ts); times are epoch ms.",
        required: ["id", "name", "queue", "status", "outcome", "attempts"],
        properties: {
          id: { type: "integer" },
          name: { type: "string" },
          queue: { type: "string" },
          status: { enum: [...STATUSES] },
          outcome: { enum: [...OUTCOMES, null] },
          attempts: { type: "integer" },
          progress: { type: ["number", "null"] },
          progressNote: { type: ["string", "null"] },
          error: { oneOf: [{ type: "null" }, anyObject] },
        },
        additionalProperties: true,
      },
      QueueStats: {
        type: "object",
        properties: { queue: { type: "string" }, byStatus: anyObject, byOutcome: anyObject },
      },
      Entry: entry,
      BatchEntry: batchEntry,
    },
    responses: Object.fromEntries(
      [400, 401, 403, 404, 409, 413, 415, 422, 503].map((s) => [
        `E${s}`,
        { description: `Error (HTTP ${s})`, ...json(ref("Error")) },
      ]),
    ),
  },
  paths: {
    ...CONVERSATION_PATHS,
    ...DISPATCH_PATHS,
    "/api/tasks": {
      get: {
        summary: "List tasks, newest first, one page at a time",
        parameters: [
          query("queue", { type: "string" }, "Only this queue."),
          query("status", { enum: [...STATUSES] }, "Only this status."),
          query("outcome", { enum: [...OUTCOMES] }, "Only this outcome."),
          query("name", { type: "string" }, "Only this task name."),
          query("job", { type: "string" }, "Only this job."),
          query(
            "error",
            { type: "string", maxLength: 200 },
            `Only tasks whose error contains this text (case-insensitive). Reads at most ${MAX_ERROR_SCAN} tasks per request; a page may then be short, even empty, with a nextCursor.`,
          ),
          limitParam(DEFAULT_PAGE, MAX_PAGE),
          query("cursor", { type: "string" }, "nextCursor of the previous page."),
        ],
        responses: {
          ...ok("A page", {
            type: "object",
            required: ["tasks", "nextCursor"],
            properties: {
              tasks: { type: "array", items: ref("Task") },
              nextCursor: { type: ["string", "null"] },
              scanned: { type: "integer" },
            },
          }),
          ...errors(400, 401, 403),
        },
      },
      post: {
        summary: "Enqueue one task (validated like ratchet.enqueue; bad input writes nothing)",
        requestBody: body(ref("Entry")),
        responses: {
          ...ok(
            "Enqueued (or the id of the task a dedupe/throttle key found)",
            { type: "object", properties: { id: { type: "integer" } } },
            "201",
          ),
          ...errors(400, 401, 403, 409, 413, 415, 422),
        },
      },
    },
    "/api/tasks/batch": {
      post: {
        summary: "Enqueue several tasks in one transaction (ratchet.enqueueMany)",
        requestBody: body({
          type: "object",
          required: ["entries"],
          properties: { entries: { type: "array", items: ref("BatchEntry"), maxItems: 10_000 } },
        }),
        responses: {
          ...ok(
            "Enqueued, ids in entry order",
            { type: "object", properties: { ids: { type: "array", items: { type: "integer" } } } },
            "201",
          ),
          ...errors(400, 401, 403, 409, 413, 415, 422),
        },
      },
    },
    "/api/tasks/{id}": {
      get: {
        summary: "One task with its needs, steps and events (attempts, failures, retries)",
        parameters: [idParam],
        responses: {
          ...ok("The task", {
            type: "object",
            properties: {
              task: ref("Task"),
              needs: { type: "array", items: { type: "integer" } },
              steps: { type: "array", items: anyObject },
              events: { type: "array", items: anyObject },
            },
          }),
          ...errors(400, 401, 403, 404),
        },
      },
    },
    "/api/tasks/{id}/tree": {
      get: {
        summary: "The task and everything it owns, as a tree",
        parameters: [idParam, limitParam(1000, 10_000)],
        responses: { ...ok("{ task, children, truncated }", anyObject), ...errors(400, 401, 403, 404) },
      },
    },
    "/api/tasks/{id}/explain": {
      get: {
        summary: "Why the task is where it is (ratchet.explain)",
        parameters: [idParam],
        responses: {
          ...ok("{ id, name, queue, status, reason, text, at }", anyObject),
          ...errors(400, 401, 403, 404),
        },
      },
    },
    "/api/usage": {
      get: {
        summary:
          "Model usage and cost from the usage ledger: totals, and per provider and model (spec §18.8, §18.9)",
        parameters: [
          query("conversation", { type: "string" }, "Only this conversation."),
          query("task", { type: "integer", minimum: 1 }, "Only this task."),
          query("provider", { type: "string" }, "Only this provider."),
          query("model", { type: "string" }, "Only this model."),
          query("since", { type: "integer", minimum: 0 }, "Only rows created at or after (epoch ms)."),
        ],
        responses: {
          ...ok(
            "{ totals: { responses, failed, input, output, cached, reasoning, cost }, byModel: [...] }",
            anyObject,
          ),
          ...errors(400, 401, 403),
        },
      },
    },
    "/api/providers": {
      get: {
        summary:
          "Circuit breakers per provider+model, shared by every worker: closed, open, half_open (spec §18.6)",
        responses: {
          ...ok(
            "{ breakers: [{ key, state, failures, windowStart, openedAt, probeUntil, updatedAt }] }",
            anyObject,
          ),
          ...errors(401, 403),
        },
      },
    },
    "/api/tasks/{id}/streams": {
      get: {
        summary: "The task's durable output streams: name, length, bytes, closed (spec §16)",
        parameters: [idParam],
        responses: {
          ...ok("{ streams: [{ taskId, name, length, bytes, closed, createdAt, updatedAt }] }", anyObject),
          ...errors(400, 401, 403, 404),
        },
      },
    },
    "/api/tasks/{id}/streams/{name}": {
      get: {
        summary:
          "Server-Sent Events of one stream: `chunk` per chunk (event id = offset, data = the chunk's JSON), then `end` ({ next }); `Last-Event-ID` resumes after that offset (spec §16.8)",
        parameters: [
          idParam,
          nameParam("name", "The stream's name"),
          query(
            "from",
            { type: "integer", minimum: 0 },
            "First offset to send (default 0; Last-Event-ID wins).",
          ),
          query("follow", { type: "string", enum: ["true", "false"] }, "false: end at the committed end."),
        ],
        responses: {
          "200": {
            description: "An event stream",
            content: { "text/event-stream": { schema: { type: "string" } } },
          },
          ...errors(400, 401, 403, 404, 503),
        },
      },
    },
    "/api/tasks/{id}/retry": {
      post: {
        summary: "Run a failed, aborted, faulted or orphaned task again",
        parameters: [idParam],
        responses: {
          ...ok("The task after retry", { type: "object", properties: { task: ref("Task") } }),
          ...errors(400, 401, 403, 404, 409, 415),
        },
      },
    },
    "/api/tasks/{id}/abort": {
      post: {
        summary: "Abort a task and what it owns",
        parameters: [idParam],
        responses: {
          ...ok("{ state: aborted | marked | orphaned | terminal, outcome? }", anyObject),
          ...errors(400, 401, 403, 404, 415),
        },
      },
    },
    "/api/scopes/{scope}/abort": {
      post: {
        summary: "Abort every live task of a scope",
        parameters: [nameParam("scope", "The scope")],
        requestBody: body(
          { type: "object", properties: { background: { type: "boolean", default: false } } },
          false,
        ),
        responses: {
          ...ok("How many tasks were marked", {
            type: "object",
            properties: { scope: { type: "string" }, marked: { type: "integer" } },
          }),
          ...errors(400, 401, 403, 415),
        },
      },
    },
    "/api/signals/{name}": {
      post: {
        summary: "Send a named signal (wakes ctx.waitForEvent(name); the first per name is kept)",
        parameters: [nameParam("name", "The event name")],
        requestBody: body(
          { type: "object", properties: { payload: { description: "Any JSON, at most 1 MiB" } } },
          false,
        ),
        responses: {
          ...ok("{ first, woken }", {
            type: "object",
            properties: { first: { type: "boolean" }, woken: { type: "integer" } },
          }),
          ...errors(400, 401, 403, 413, 415),
        },
      },
    },
    "/api/jobs/{job}": {
      get: {
        summary: "A job's tasks by status and outcome, and whether it settled",
        parameters: [nameParam("job", "The job name")],
        responses: { ...ok("Job status", anyObject), ...errors(400, 401, 403) },
      },
    },
    "/api/stats": {
      get: {
        summary: "Tasks per queue by status and outcome",
        responses: {
          ...ok("Stats", {
            type: "object",
            properties: { queues: { type: "array", items: ref("QueueStats") } },
          }),
          ...errors(401, 403),
        },
      },
    },
    "/api/inspect": {
      get: {
        summary: "Why each live task is where it is (ratchet.inspect)",
        parameters: [limitParam(200, 10_000)],
        responses: { ...ok("{ tasks, truncated, scheduling, … }", anyObject), ...errors(400, 401, 403) },
      },
    },
    "/api/schedules": {
      get: {
        summary: "Schedules with their next and last tick",
        responses: { ...ok("{ schedules }", anyObject), ...errors(401, 403) },
      },
    },
    "/api/tick": {
      post: {
        summary:
          "Run what fits in budgetMs with this server's task definitions, then answer with the tick's report (spec §8.3, §8.12): the HTTP driver for cron and serverless platforms",
        requestBody: body({
          type: "object",
          additionalProperties: false,
          required: ["budgetMs"],
          properties: {
            budgetMs: {
              type: "integer",
              minimum: 0,
              maximum: MAX_HTTP_TICK_MS,
              description: "Time to spend; keep it under the platform's kill limit.",
            },
            concurrency: { type: "integer", minimum: 1, maximum: MAX_HTTP_TICK_CONCURRENCY, default: 6 },
          },
        }),
        responses: {
          ...ok("The tick report", {
            type: "object",
            required: ["ran", "done", "failed", "retried", "skipped", "ms", "budgetLeft"],
            properties: Object.fromEntries(
              ["ran", "done", "failed", "retried", "skipped", "ms", "budgetLeft"].map((k) => [
                k,
                { type: "integer" },
              ]),
            ),
          }),
          ...errors(400, 401, 403, 413, 415, 503),
        },
      },
    },
    "/api/concurrency": {
      get: {
        summary: "Run-time concurrency limits, and the limits in this process's code",
        responses: { ...ok("{ overrides, code }", anyObject), ...errors(401, 403) },
      },
    },
    "/api/concurrency/{group}": {
      put: {
        summary: "Set (or with limit null, clear) a group's run-time concurrency limit, or one key's",
        parameters: [nameParam("group", "The concurrency group")],
        requestBody: body({
          type: "object",
          required: ["limit"],
          properties: {
            limit: { type: ["integer", "null"], minimum: 0, maximum: 1_000_000 },
            key: { type: "string" },
          },
        }),
        responses: {
          ...ok("Tasks woken", { type: "object", properties: { woken: { type: "integer" } } }),
          ...errors(400, 401, 403, 415),
        },
      },
    },
    "/api/stream": {
      get: {
        summary:
          "Server-Sent Events: `stats` every interval; `task` when a watched task changes; `error` when a read failed",
        parameters: [query("watch", { type: "string" }, "Comma-separated task ids (at most 100).")],
        responses: {
          "200": {
            description: "An event stream",
            content: { "text/event-stream": { schema: { type: "string" } } },
          },
          ...errors(400, 401, 403, 503),
        },
      },
    },
    "/metrics": {
      get: {
        summary: "Prometheus text format",
        responses: {
          "200": { description: "Metrics", content: { "text/plain": { schema: { type: "string" } } } },
          ...errors(401, 403),
        },
      },
    },
    "/openapi.json": {
      get: {
        summary: "This document (no token needed)",
        security: [],
        responses: { ...ok("OpenAPI 3.1", anyObject) },
      },
    },
    "/": {
      get: {
        summary: "The dashboard page (no token needed; the page asks for it and sends it to /api)",
        security: [],
        responses: {
          "200": { description: "index.html", content: { "text/html": { schema: { type: "string" } } } },
          ...errors(403, 404),
        },
      },
    },
    "/assets/{path}": {
      get: {
        summary: "A file of the built dashboard (no token needed)",
        security: [],
        parameters: [
          {
            name: "path",
            in: "path",
            required: true,
            schema: { type: "string", pattern: "^[A-Za-z0-9_-][A-Za-z0-9._/-]*$" },
          },
        ],
        responses: {
          "200": { description: "The file, with its content type" },
          ...errors(403, 404),
        },
      },
    },
  },
} as const;
