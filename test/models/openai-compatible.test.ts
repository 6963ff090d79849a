/**
 * The OpenAI-compatible provider against a local mock server speaking the Chat Completions wire
 * protocol (node:http on 127.0.0.1, port 0): streaming with usage, tool calls, malformed chunks,
 * stalls, disconnects mid-stream, 429 + retry-after, 5xx and 400 (spec §18.2, §18.3).
 */
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ModelError } from "../../src/errors.js";
import { openAICompatible } from "../../src/models/openai-compatible.js";
import { type ModelEvent, type ModelPrompt, streamModel } from "../../src/models/stream.js";

type Handler = (req: IncomingMessage, res: ServerResponse, body: Record<string, unknown>) => void;

let server: Server;
let base = "";
let handler: Handler = () => {};
const bodies: Record<string, unknown>[] = [];

const sse = (res: ServerResponse, items: unknown[]) => {
  res.writeHead(200, { "content-type": "text/event-stream" });
  for (const i of items) res.write(`data: ${typeof i === "string" ? i : JSON.stringify(i)}\n\n`);
};
const delta = (content: string) => ({ choices: [{ index: 0, delta: { content } }] });
const finish = (reason: string) => ({ choices: [{ index: 0, delta: {}, finish_reason: reason }] });
const usage = {
  choices: [],
  usage: {
    prompt_tokens: 12,
    completion_tokens: 5,
    prompt_tokens_details: { cached_tokens: 4 },
    completion_tokens_details: { reasoning_tokens: 2 },
  },
};

beforeAll(async () => {
  server = createServer((req, res) => {
    let text = "";
    req.on("data", (c) => {
      text += c;
    });
    req.on("end", () => {
      const body = JSON.parse(text || "{}") as Record<string, unknown>;
      bodies.push(body);
      handler(req, res, body);
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const PROMPT: ModelPrompt = [
  { role: "system", content: "be brief" },
  { role: "user", content: [{ type: "text", text: "hi" }] },
];

function model() {
  return openAICompatible({ baseURL: base, modelId: "m1", apiKey: "k" });
}

async function run(
  opts: { idleTimeoutMs?: number } = {},
): Promise<{ events: ModelEvent[]; error: ModelError | null }> {
  const events: ModelEvent[] = [];
  try {
    for await (const e of streamModel(model(), PROMPT, opts)) events.push(e);
    return { events, error: null };
  } catch (e) {
    return { events, error: e as ModelError };
  }
}

describe("OpenAI-compatible provider over a mock server (spec §18.3)", () => {
  it("§18.3 streams text deltas and a finish with usage (cached, reasoning) from the usage chunk", async () => {
    handler = (req, res) => {
      expect(req.headers.authorization).toBe("Bearer k");
      sse(res, [delta("Hel"), delta("lo"), finish("stop"), usage, "[DONE]"]);
      res.end();
    };
    const { events, error } = await run();
    expect(error).toBeNull();
    expect(events).toEqual([
      { type: "text", delta: "Hel" },
      { type: "text", delta: "lo" },
      {
        type: "finish",
        reason: "stop",
        usage: { input: 12, output: 5, cached: 4, reasoning: 2 },
        route: null,
      },
    ]);
    const body = bodies.at(-1)!;
    expect(body).toMatchObject({ model: "m1", stream: true, stream_options: { include_usage: true } });
    expect(body.messages).toEqual([
      { role: "system", content: "be brief" },
      { role: "user", content: "hi" },
    ]);
  });

  it("§18.7 the provider session identity is sent as prompt_cache_key", async () => {
    handler = (_req, res) => {
      sse(res, [delta("x"), finish("stop"), "[DONE]"]);
      res.end();
    };
    const call = { providerOptions: { ratchet: { sessionId: "conv-9" } } };
    for await (const _ of streamModel(model(), PROMPT, { call })) {
      // drain
    }
    expect(bodies.at(-1)).toMatchObject({ prompt_cache_key: "conv-9" });
  });

  it("§18.3 tool calls assembled from argument deltas, after the text", async () => {
    handler = (_req, res) => {
      sse(res, [
        {
          choices: [
            {
              index: 0,
              delta: { tool_calls: [{ index: 0, id: "c1", function: { name: "get", arguments: '{"a"' } }] },
            },
          ],
        },
        { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: ":1}" } }] } }] },
        finish("tool_calls"),
        "[DONE]",
      ]);
      res.end();
    };
    const { events } = await run();
    expect(events[0]).toEqual({ type: "tool-call", id: "c1", name: "get", input: '{"a":1}' });
    expect(events[1]).toMatchObject({ type: "finish", reason: "tool-calls" });
  });

  it("§18.2 a malformed data line is a PROTOCOL error (retryable) after the deltas before it", async () => {
    handler = (_req, res) => {
      sse(res, [delta("ok"), "{not json"]);
      res.end();
    };
    const { events, error } = await run();
    expect(events).toEqual([{ type: "text", delta: "ok" }]);
    expect([error?.code, error?.retryable]).toEqual(["RATCHET_MODEL_PROTOCOL", true]);
  });

  it("§18.2 a stall fires the idle timeout, which aborts the request", async () => {
    let closed = false;
    handler = (req, res) => {
      sse(res, [delta("wait")]);
      req.socket.on("close", () => {
        closed = true;
      });
    };
    const { events, error } = await run({ idleTimeoutMs: 50 });
    expect(events).toEqual([{ type: "text", delta: "wait" }]);
    expect(error?.code).toBe("RATCHET_MODEL_TIMEOUT");
    await expect.poll(() => closed).toBe(true);
  });

  it("§18.2 a disconnect mid-stream is a CONNECTION error", async () => {
    handler = (_req, res) => {
      sse(res, [delta("part")]);
      setImmediate(() => res.socket?.destroy());
    };
    const { events, error } = await run();
    expect(events).toEqual([{ type: "text", delta: "part" }]);
    expect([error?.code, error?.retryable]).toEqual(["RATCHET_MODEL_CONNECTION", true]);
  });

  it("§18.2 a body that ends cleanly before [DONE] and any finish_reason is a CONNECTION error", async () => {
    handler = (_req, res) => {
      sse(res, [delta("cut")]);
      res.end();
    };
    expect((await run()).error?.code).toBe("RATCHET_MODEL_CONNECTION");
  });

  it("§18.2 429 with retry-after, 5xx and 400 before the stream are typed by status", async () => {
    const answers: [number, Record<string, string>][] = [
      [429, { "retry-after": "2" }],
      [500, {}],
      [400, {}],
    ];
    handler = (_req, res) => {
      const [status, headers] = answers.shift()!;
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify({ error: { message: `status ${status}` } }));
    };
    const r429 = (await run()).error!;
    expect([r429.code, r429.retryAfterMs, r429.retryable]).toEqual([
      "RATCHET_MODEL_RATE_LIMITED",
      2000,
      true,
    ]);
    const r500 = (await run()).error!;
    expect([r500.code, r500.retryable]).toEqual(["RATCHET_MODEL_UNAVAILABLE", true]);
    const r400 = (await run()).error!;
    expect([r400.code, r400.retryable, r400.status]).toEqual(["RATCHET_MODEL_REJECTED", false, 400]);
    expect(r400.message).toContain("status 400");
  });

  it("§18.2 an error object inside the stream fails the request with its status", async () => {
    handler = (_req, res) => {
      sse(res, [delta("a"), { error: { message: "overloaded", status: 529 } }]);
      res.end();
    };
    expect((await run()).error?.code).toBe("RATCHET_MODEL_UNAVAILABLE");
  });

  it("§18.2 a refused connection is a CONNECTION error", async () => {
    const dead = openAICompatible({ baseURL: "http://127.0.0.1:1/v1", modelId: "m" });
    let err: ModelError | undefined;
    try {
      for await (const _ of streamModel(dead, PROMPT)) {
        // nothing arrives
      }
    } catch (e) {
      err = e as ModelError;
    }
    expect(err?.code).toBe("RATCHET_MODEL_CONNECTION");
  });
});
