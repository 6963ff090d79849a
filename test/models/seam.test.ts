/** The provider seam, the faux provider, error classification and the catalog (spec §18.1–§18.4). */
import { describe, expect, it } from "vitest";
import { ModelError } from "../../src/errors.js";
import { ModelCatalog } from "../../src/models/catalog.js";
import { parseRetryAfter, toModelError } from "../../src/models/classify.js";
import { fauxModel } from "../../src/models/faux.js";
import { type ModelEvent, type ModelPrompt, streamModel } from "../../src/models/stream.js";

const PROMPT: ModelPrompt = [{ role: "user", content: [{ type: "text", text: "hello there!" }] }];

async function events(it: AsyncIterable<ModelEvent>): Promise<ModelEvent[]> {
  const out: ModelEvent[] = [];
  for await (const e of it) out.push(e);
  return out;
}

async function failure(it: AsyncIterable<ModelEvent>): Promise<unknown> {
  try {
    await events(it);
  } catch (e) {
    return e;
  }
  throw new Error("expected the stream to fail");
}

describe("the provider seam and faux (spec §18.1, §18.3)", () => {
  it("§18.3 faux streams its script's text in chunks, then tool calls, then one finish with usage", async () => {
    const m = fauxModel({
      scripts: [
        {
          text: "abcdefghij",
          chunkChars: 4,
          toolCalls: [{ name: "get", input: { q: 1 } }],
          usage: { cached: 1 },
        },
      ],
    });
    const got = await events(streamModel(m, PROMPT));
    expect(got).toEqual([
      { type: "text", delta: "abcd" },
      { type: "text", delta: "efgh" },
      { type: "text", delta: "ij" },
      { type: "tool-call", id: "call_0", name: "get", input: '{"q":1}' },
      {
        type: "finish",
        reason: "tool-calls",
        usage: { input: 3, output: 3, cached: 1, reasoning: 0 },
        route: null,
      },
    ]);
    expect(m.calls).toBe(1);
  });

  it("§18.3 the same scripts give the same events; the last script repeats", async () => {
    const make = () => fauxModel({ scripts: [{ text: "one" }, { text: "two" }] });
    const a = make();
    const b = make();
    for (let i = 0; i < 3; i++)
      expect(await events(streamModel(a, PROMPT))).toEqual(await events(streamModel(b, PROMPT)));
    expect((await events(streamModel(a, PROMPT)))[0]).toEqual({ type: "text", delta: "two" });
  });

  it("§18.2 a 429 with retry-after is RATE_LIMITED and retryable; 5xx UNAVAILABLE; 400 REJECTED, not retryable", async () => {
    const m = fauxModel({
      scripts: [
        { error: { status: 429, retryAfterSeconds: 7 } },
        { error: { status: 503 } },
        { error: { status: 529 } },
        { error: { status: 400, message: "bad prompt" } },
      ],
    });
    const e429 = (await failure(streamModel(m, PROMPT))) as ModelError;
    expect(e429).toBeInstanceOf(ModelError);
    expect([e429.code, e429.retryable, e429.retryAfterMs, e429.status]).toEqual([
      "RATCHET_MODEL_RATE_LIMITED",
      true,
      7000,
      429,
    ]);
    const e503 = (await failure(streamModel(m, PROMPT))) as ModelError;
    expect([e503.code, e503.retryable]).toEqual(["RATCHET_MODEL_UNAVAILABLE", true]);
    const e529 = (await failure(streamModel(m, PROMPT))) as ModelError;
    expect(e529.code).toBe("RATCHET_MODEL_UNAVAILABLE");
    const e400 = (await failure(streamModel(m, PROMPT))) as ModelError;
    expect([e400.code, e400.retryable]).toEqual(["RATCHET_MODEL_REJECTED", false]);
  });

  it("§18.1 an error part mid-stream ends the request with a typed error after the text before it", async () => {
    const m = fauxModel({
      scripts: [{ text: "abcdefgh", chunkChars: 2, error: { status: 502, afterChunks: 2 } }],
    });
    const seen: ModelEvent[] = [];
    let err: unknown;
    try {
      for await (const e of streamModel(m, PROMPT)) seen.push(e);
    } catch (e) {
      err = e;
    }
    expect(seen).toEqual([
      { type: "text", delta: "ab" },
      { type: "text", delta: "cd" },
    ]);
    expect((err as ModelError).code).toBe("RATCHET_MODEL_UNAVAILABLE");
  });

  it("§18.1 a stalled stream fails with TIMEOUT after the idle timeout and cancels the request", async () => {
    const m = fauxModel({ scripts: [{ text: "ab", stall: true }] });
    const err = (await failure(streamModel(m, PROMPT, { idleTimeoutMs: 30 }))) as ModelError;
    expect(err.code).toBe("RATCHET_MODEL_TIMEOUT");
    expect(err.message).toContain("idle");
  });

  it("§18.1 the overall timeout bounds a stream that keeps sending", async () => {
    const m = fauxModel({ scripts: [{ text: "x".repeat(10_000), chunkChars: 1, tokensPerSecond: 1000 }] });
    const err = (await failure(streamModel(m, PROMPT, { timeoutMs: 40, idleTimeoutMs: 1000 }))) as ModelError;
    expect(err.code).toBe("RATCHET_MODEL_TIMEOUT");
    expect(err.message).toContain("overall");
  });

  it("§18.1 the caller's abort cancels the request and rethrows the abort's reason", async () => {
    const m = fauxModel({ scripts: [{ text: "ab", stall: true }] });
    const ac = new AbortController();
    const reason = new Error("stop now");
    const it = streamModel(m, PROMPT, { signal: ac.signal });
    const first = await it.next();
    expect(first.value).toEqual({ type: "text", delta: "ab" });
    const rest = it.next();
    ac.abort(reason);
    await expect(rest).rejects.toBe(reason);
  });

  it("§18.3 faux latency waits before the first part, and an abort cuts it short", async () => {
    const m = fauxModel({ scripts: [{ text: "late", latencyMs: 60_000 }] });
    const ac = new AbortController();
    const reason = new Error("no time");
    const pending = events(streamModel(m, PROMPT, { signal: ac.signal }));
    await expect.poll(() => m.calls).toBe(1);
    ac.abort(reason);
    await expect(pending).rejects.toBe(reason);
  });

  it("§18.1 a stream that ends without a finish is a PROTOCOL error; bad timeouts are refused", async () => {
    const m = fauxModel({ scripts: [{ text: "a" }] });
    m.doStream = async () => ({ stream: new ReadableStream({ start: (c) => c.close() }) });
    expect(((await failure(streamModel(m, PROMPT))) as ModelError).code).toBe("RATCHET_MODEL_PROTOCOL");
    await expect(events(streamModel(m, PROMPT, { idleTimeoutMs: 0 }))).rejects.toMatchObject({
      code: "RATCHET_INVALID_INPUT",
    });
  });
});

describe("classification (spec §18.2)", () => {
  it("§18.2 retry-after in seconds, ms and HTTP dates, bounded; network failures are CONNECTION", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(parseRetryAfter({ "Retry-After": "3" }, now)).toBe(3000);
    expect(parseRetryAfter({ "retry-after-ms": "250" }, now)).toBe(250);
    expect(parseRetryAfter({ "retry-after": "Thu, 01 Jan 2026 00:00:10 GMT" }, now)).toBe(10_000);
    expect(parseRetryAfter({ "retry-after": "9999999" }, now)).toBe(24 * 3600_000);
    expect(parseRetryAfter({ "retry-after": "soon" }, now)).toBeNull();
    const net = toModelError(
      Object.assign(new TypeError("fetch failed"), { cause: { code: "ECONNRESET" } }),
      "p",
    );
    expect([net.code, net.retryable]).toEqual(["RATCHET_MODEL_CONNECTION", true]);
    expect(toModelError({ statusCode: 404, message: "no such model" }, "p").code).toBe(
      "RATCHET_MODEL_REJECTED",
    );
    expect(toModelError({ statusCode: 408 }, "p").code).toBe("RATCHET_MODEL_TIMEOUT");
    expect(
      toModelError(Object.assign(new Error("x"), { name: "AI_InvalidPromptError" }), "p").retryable,
    ).toBe(false);
  });
});

describe("the catalog (spec §18.4)", () => {
  it("§18.4 cost from usage and prices per million; overrides replace the fields they name", () => {
    const c = new ModelCatalog([
      {
        provider: "p",
        model: "m",
        contextWindow: 1000,
        maxOutput: 100,
        prices: { input: 2, output: 8, cached: 1 },
      },
    ]);
    expect(c.cost("p", "m", { input: 1_000_000, cached: 400_000, output: 500_000, reasoning: 0 })).toEqual({
      usd: 0.6 * 2 + 0.4 * 1 + 0.5 * 8,
      known: true,
    });
    expect(c.cost("p", "unknown", { input: 5, output: 5, cached: 0, reasoning: 0 })).toEqual({
      usd: 0,
      known: false,
    });
    const d = c.with([{ provider: "p", model: "m", prices: { input: 3, output: 8 } }]);
    expect(d.get("p", "m")).toMatchObject({
      contextWindow: 1000,
      prices: { input: 3, output: 8, cached: 1 },
    });
    expect(c.get("openai", "gpt-4o-mini")?.contextWindow).toBe(128_000);
    expect(() => new ModelCatalog([{ provider: "p", model: "n", prices: { input: -1, output: 0 } }])).toThrow(
      /catalog/,
    );
  });
});
