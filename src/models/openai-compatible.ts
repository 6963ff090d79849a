/**
 * An OpenAI-compatible Chat Completions provider (spec §18.3): POST {baseURL}/chat/completions with
 * `stream: true` and `stream_options.include_usage`, read as server-sent events, as LanguageModelV4
 * parts. Ours rather than `@ai-sdk/openai-compatible`: that package (3.x) needs Node ≥ 22 at run
 * time and brings @ai-sdk/provider-utils and a zod peer; this one is one file on fetch, and its
 * failures carry the codes the router decides on (spec §18.2).
 *
 * Wire failures, each a typed error: an HTTP status before the stream (429 with Retry-After, 5xx,
 * 4xx: an error shaped like APICallError, classified by toModelError); a data line that is not JSON,
 * or an event over MAX_EVENT_BYTES → PROTOCOL; an `error` object in the stream → its status or
 * UNAVAILABLE; a body that ends before `[DONE]` and before a finish_reason, or a socket reset →
 * CONNECTION. Stalls are the seam's idle timeout (stream.ts), which aborts the fetch.
 *
 * Invariant: parts come in stream order; at most one finish, after every text delta and tool call
 * (spec §18.1).
 */
import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4Prompt,
  LanguageModelV4StreamPart,
} from "@ai-sdk/provider";
import { ModelError, ValidationError } from "../errors.js";
import { readableOf, sessionOf } from "./stream.js";

export interface OpenAICompatibleOptions {
  /** e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1 */
  baseURL: string;
  modelId: string;
  apiKey?: string;
  /** The provider's name in usage and breakers. Default "openai-compatible". */
  provider?: string;
  headers?: Record<string, string>;
  fetch?: typeof fetch;
}

/** Longest SSE event accepted. */
export const MAX_EVENT_BYTES = 1024 * 1024;
/** Longest error body kept. */
const MAX_ERROR_BODY = 16 * 1024;

/** Shaped like the AI SDK's APICallError, so toModelError reads its status and headers. */
export class HttpStatusError extends Error {
  constructor(
    readonly statusCode: number,
    readonly responseHeaders: Record<string, string>,
    readonly responseBody: string,
  ) {
    super(`HTTP ${statusCode}: ${responseBody.slice(0, 300)}`);
    this.name = "HttpStatusError";
  }
}

type Msg = Record<string, unknown>;

/** The V4 prompt as Chat Completions messages (text, tool calls and tool results). */
export function toMessages(prompt: LanguageModelV4Prompt): Msg[] {
  const out: Msg[] = [];
  for (const m of prompt) {
    if (m.role === "system") out.push({ role: "system", content: m.content });
    else if (m.role === "user")
      out.push({ role: "user", content: m.content.map((p) => (p.type === "text" ? p.text : "")).join("") });
    else if (m.role === "assistant") {
      const text = m.content.map((p) => (p.type === "text" ? p.text : "")).join("");
      const calls = m.content.flatMap((p) =>
        p.type === "tool-call"
          ? [
              {
                id: p.toolCallId,
                type: "function",
                function: { name: p.toolName, arguments: JSON.stringify(p.input) },
              },
            ]
          : [],
      );
      out.push({ role: "assistant", content: text || null, ...(calls.length ? { tool_calls: calls } : {}) });
    } else
      for (const p of m.content)
        if (p.type === "tool-result")
          out.push({ role: "tool", tool_call_id: p.toolCallId, content: JSON.stringify(p.output) });
  }
  return out;
}

function body(modelId: string, call: LanguageModelV4CallOptions): Msg {
  const tools = (call.tools ?? []).flatMap((t) =>
    t.type === "function"
      ? [
          {
            type: "function",
            function: { name: t.name, description: t.description, parameters: t.inputSchema },
          },
        ]
      : [],
  );
  return {
    model: modelId,
    messages: toMessages(call.prompt),
    stream: true,
    stream_options: { include_usage: true },
    ...(call.maxOutputTokens !== undefined ? { max_tokens: call.maxOutputTokens } : {}),
    ...(call.temperature !== undefined ? { temperature: call.temperature } : {}),
    ...(call.stopSequences?.length ? { stop: call.stopSequences } : {}),
    ...(tools.length ? { tools } : {}),
    ...(sessionOf(call) !== undefined ? { prompt_cache_key: sessionOf(call) } : {}),
  };
}

export function openAICompatible(opts: OpenAICompatibleOptions): LanguageModelV4 {
  if (typeof opts?.baseURL !== "string" || !/^https?:\/\//.test(opts.baseURL))
    throw new ValidationError("baseURL must be an http(s) URL");
  if (typeof opts.modelId !== "string" || !opts.modelId) throw new ValidationError("modelId is required");
  const provider = opts.provider ?? "openai-compatible";
  const url = `${opts.baseURL.replace(/\/+$/, "")}/chat/completions`;
  const doFetch = opts.fetch ?? fetch;
  const model: LanguageModelV4 = {
    specificationVersion: "v4",
    provider,
    modelId: opts.modelId,
    supportedUrls: {},
    async doStream(call) {
      const res = await doFetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "text/event-stream",
          ...(opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {}),
          ...(opts.headers ?? {}),
        },
        body: JSON.stringify(body(opts.modelId, call)),
        signal: call.abortSignal,
      });
      if (!res.ok || !res.body) {
        const text = (await res.text().catch(() => "")).slice(0, MAX_ERROR_BODY);
        throw new HttpStatusError(res.status, Object.fromEntries(res.headers.entries()), text);
      }
      return { stream: partStream(res.body, provider) };
    },
    async doGenerate() {
      throw new ValidationError(`${provider}: use doStream (this provider streams)`);
    },
  };
  return model;
}

function partStream(
  bytes: ReadableStream<Uint8Array>,
  provider: string,
): ReadableStream<LanguageModelV4StreamPart> {
  return readableOf(parts(bytes, provider));
}

/** SSE `data:` payloads, one per event; throws PROTOCOL past MAX_EVENT_BYTES. */
async function* events(bytes: ReadableStream<Uint8Array>, provider: string): AsyncGenerator<string> {
  const reader = bytes.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buf += value;
      let cut = buf.search(/\r?\n\r?\n/);
      while (cut >= 0) {
        const event = buf.slice(0, cut);
        buf = buf.slice(cut).replace(/^\r?\n\r?\n/, "");
        const data = event
          .split(/\r?\n/)
          .filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).replace(/^ /, ""))
          .join("\n");
        if (data) yield data;
        cut = buf.search(/\r?\n\r?\n/);
      }
      if (buf.length > MAX_EVENT_BYTES)
        throw new ModelError(
          "RATCHET_MODEL_PROTOCOL",
          `${provider}: an event over ${MAX_EVENT_BYTES} bytes`,
          { provider },
        );
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

interface Chunk {
  choices?: {
    delta?: { content?: string | null; reasoning_content?: string | null; tool_calls?: ToolDelta[] };
    finish_reason?: string | null;
  }[];
  usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number };
    completion_tokens_details?: { reasoning_tokens?: number };
  } | null;
  error?: { message?: string; code?: unknown; status?: number };
}
interface ToolDelta {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

const FINISH: Record<string, "stop" | "length" | "content-filter" | "tool-calls"> = {
  stop: "stop",
  length: "length",
  content_filter: "content-filter",
  tool_calls: "tool-calls",
  function_call: "tool-calls",
};

async function* parts(
  bytes: ReadableStream<Uint8Array>,
  provider: string,
): AsyncGenerator<LanguageModelV4StreamPart> {
  yield { type: "stream-start", warnings: [] };
  const tools = new Map<number, { id: string; name: string; args: string }>();
  let finish: string | null = null;
  let usage: Chunk["usage"] = null;
  let done = false;
  let text = false;
  try {
    for await (const data of events(bytes, provider)) {
      if (data === "[DONE]") {
        done = true;
        break;
      }
      let chunk: Chunk;
      try {
        chunk = JSON.parse(data) as Chunk;
      } catch {
        throw new ModelError(
          "RATCHET_MODEL_PROTOCOL",
          `${provider}: a data line is not JSON: ${data.slice(0, 80)}`,
          { provider },
        );
      }
      if (chunk.error) {
        const status = typeof chunk.error.status === "number" ? chunk.error.status : 503;
        throw new HttpStatusError(status, {}, chunk.error.message ?? "error in stream");
      }
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices ?? []) {
        const d = choice.delta;
        if (d?.reasoning_content) yield { type: "reasoning-delta", id: "r0", delta: d.reasoning_content };
        if (d?.content) {
          if (!text) yield { type: "text-start", id: "t0" };
          text = true;
          yield { type: "text-delta", id: "t0", delta: d.content };
        }
        for (const t of d?.tool_calls ?? []) {
          const i = t.index ?? 0;
          const cur = tools.get(i) ?? { id: t.id ?? `call_${i}`, name: "", args: "" };
          if (t.id) cur.id = t.id;
          if (t.function?.name) cur.name += t.function.name;
          if (t.function?.arguments) cur.args += t.function.arguments;
          tools.set(i, cur);
        }
        if (choice.finish_reason) finish = choice.finish_reason;
      }
    }
  } catch (e) {
    if (e instanceof ModelError || e instanceof HttpStatusError) throw e;
    if ((e as { name?: string })?.name === "AbortError") throw e;
    throw new ModelError(
      "RATCHET_MODEL_CONNECTION",
      `${provider}: the stream broke: ${String((e as Error)?.message ?? e)}`,
      {
        provider,
        cause: e,
      },
    );
  }
  if (!done && finish === null)
    throw new ModelError("RATCHET_MODEL_CONNECTION", `${provider}: the stream ended before [DONE]`, {
      provider,
    });
  if (text) yield { type: "text-end", id: "t0" };
  for (const t of [...tools.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1]))
    yield { type: "tool-call", toolCallId: t.id, toolName: t.name, input: t.args || "{}" };
  const n = (v: number | undefined) => (typeof v === "number" ? v : undefined);
  yield {
    type: "finish",
    finishReason: { unified: finish ? (FINISH[finish] ?? "other") : "stop", raw: finish ?? undefined },
    usage: {
      inputTokens: {
        total: n(usage?.prompt_tokens),
        noCache: undefined,
        cacheRead: n(usage?.prompt_tokens_details?.cached_tokens),
        cacheWrite: undefined,
      },
      outputTokens: {
        total: n(usage?.completion_tokens),
        text: undefined,
        reasoning: n(usage?.completion_tokens_details?.reasoning_tokens),
      },
    },
  };
}
