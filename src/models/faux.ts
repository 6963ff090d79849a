/**
 * The scripted `faux` provider (spec §18.3): a LanguageModelV4 whose every answer is written in
 * advance, for tests, the demo and `ratchet chat` without a network. Each request takes the next
 * script (the last one repeats); a script streams its text in chunks of `chunkChars`, then its tool
 * calls, then a finish with usage — or fails as a provider would: an HTTP status before the
 * stream (429 with Retry-After, 5xx, 400), an error after `afterChunks` chunks, or a stall.
 *
 * Invariant: the same scripts and the same prompts give the same parts in the same order
 * (spec §18.3); with no latencyMs and no tokensPerSecond nothing waits on a timer.
 */
import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4GenerateResult,
  LanguageModelV4StreamPart,
  LanguageModelV4Usage,
} from "@ai-sdk/provider";
import { ValidationError } from "../errors.js";
import { readableOf, sessionOf, type Usage } from "./stream.js";

export interface FauxScript {
  text?: string;
  reasoning?: string;
  toolCalls?: { id?: string; name: string; input: unknown }[];
  /** Characters per text chunk (a "token"). Default 4. */
  chunkChars?: number;
  /** Wait before the first part. */
  latencyMs?: number;
  /** Chunks per second after the first (no wait when absent). */
  tokensPerSecond?: number;
  /** Reported usage; default: input = prompt characters / 4, output = chunks. */
  usage?: Partial<Usage>;
  /**
   * Fail as the provider: `status` before the stream starts (or after `afterChunks` text chunks,
   * as an error part), with Retry-After `retryAfterSeconds` on a 429.
   */
  error?: { status: number; message?: string; retryAfterSeconds?: number; afterChunks?: number };
  /** After the text, send nothing more and never end (for idle timeouts). */
  stall?: boolean;
}

export interface FauxOptions {
  modelId?: string;
  provider?: string;
  /** Scripts in request order (the last repeats), or a function of the request number and prompt. */
  scripts: readonly FauxScript[] | ((n: number, call: LanguageModelV4CallOptions) => FauxScript);
}

/** The faux provider's error: shaped like the AI SDK's APICallError (statusCode, responseHeaders). */
export class FauxApiError extends Error {
  readonly responseHeaders: Record<string, string>;
  constructor(
    readonly statusCode: number,
    message: string,
    retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = "FauxApiError";
    this.responseHeaders =
      retryAfterSeconds === undefined ? {} : { "retry-after": String(retryAfterSeconds) };
  }
}

export interface FauxModel extends LanguageModelV4 {
  /** Requests made so far. */
  readonly calls: number;
  /** The prompts of the requests, in order. */
  readonly prompts: LanguageModelV4CallOptions["prompt"][];
  /** The provider session identity of each request (spec §18.7), in order. */
  readonly sessions: (string | undefined)[];
}

const MAX_SCRIPT_CHARS = 1024 * 1024;

function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function promptChars(call: LanguageModelV4CallOptions): number {
  let n = 0;
  for (const m of call.prompt) {
    if (typeof m.content === "string") n += m.content.length;
    else for (const p of m.content) if ("text" in p && typeof p.text === "string") n += p.text.length;
  }
  return n;
}

function usageOf(s: FauxScript, call: LanguageModelV4CallOptions, chunks: number): LanguageModelV4Usage {
  const input = s.usage?.input ?? Math.ceil(promptChars(call) / 4);
  const output = s.usage?.output ?? chunks;
  const cached = s.usage?.cached ?? 0;
  return {
    inputTokens: { total: input, noCache: input - cached, cacheRead: cached, cacheWrite: undefined },
    outputTokens: {
      total: output,
      text: output - (s.usage?.reasoning ?? 0),
      reasoning: s.usage?.reasoning ?? 0,
    },
  };
}

function checkScript(s: FauxScript): FauxScript {
  if (!s || typeof s !== "object") throw new ValidationError("a faux script must be an object");
  if ((s.text?.length ?? 0) > MAX_SCRIPT_CHARS)
    throw new ValidationError("a faux script's text is over 1 MiB");
  const c = s.chunkChars ?? 4;
  if (!Number.isInteger(c) || c < 1) throw new ValidationError("chunkChars must be an integer ≥ 1");
  return s;
}

/** spec §18.3: a scripted model. */
export function fauxModel(opts: FauxOptions): FauxModel {
  const pick =
    typeof opts.scripts === "function"
      ? opts.scripts
      : (n: number) => {
          const list = opts.scripts as readonly FauxScript[];
          if (list.length === 0) throw new ValidationError("faux needs at least one script");
          return list[Math.min(n, list.length - 1)]!;
        };
  let calls = 0;
  const prompts: LanguageModelV4CallOptions["prompt"][] = [];
  const sessions: (string | undefined)[] = [];
  const model: FauxModel = {
    specificationVersion: "v4",
    provider: opts.provider ?? "faux",
    modelId: opts.modelId ?? "faux-1",
    supportedUrls: {},
    get calls() {
      return calls;
    },
    prompts,
    sessions,
    async doStream(call) {
      const s = checkScript(pick(calls, call));
      calls++;
      prompts.push(call.prompt);
      sessions.push(sessionOf(call));
      if (s.latencyMs) await wait(s.latencyMs, call.abortSignal);
      if (s.error && s.error.afterChunks === undefined)
        throw new FauxApiError(
          s.error.status,
          s.error.message ?? `faux error ${s.error.status}`,
          s.error.retryAfterSeconds,
        );
      return { stream: partsStream(s, call) };
    },
    async doGenerate(call): Promise<LanguageModelV4GenerateResult> {
      const { stream } = await model.doStream(call);
      return collect(stream);
    },
  };
  return model;
}

function partsStream(
  s: FauxScript,
  call: LanguageModelV4CallOptions,
): ReadableStream<LanguageModelV4StreamPart> {
  return readableOf(parts(s, call));
}

async function* parts(
  s: FauxScript,
  call: LanguageModelV4CallOptions,
): AsyncGenerator<LanguageModelV4StreamPart> {
  const size = s.chunkChars ?? 4;
  const gap = s.tokensPerSecond ? 1000 / s.tokensPerSecond : 0;
  yield { type: "stream-start", warnings: [] };
  let chunks = 0;
  if (s.reasoning) {
    yield { type: "reasoning-start", id: "r0" };
    yield { type: "reasoning-delta", id: "r0", delta: s.reasoning };
    yield { type: "reasoning-end", id: "r0" };
  }
  const text = s.text ?? "";
  if (text) yield { type: "text-start", id: "t0" };
  for (let i = 0; i < text.length; i += size) {
    if (s.error?.afterChunks !== undefined && chunks >= s.error.afterChunks) break;
    if (gap && chunks > 0) await wait(gap, call.abortSignal);
    yield { type: "text-delta", id: "t0", delta: text.slice(i, i + size) };
    chunks++;
  }
  if (s.error?.afterChunks !== undefined) {
    yield {
      type: "error",
      error: new FauxApiError(s.error.status, s.error.message ?? `faux error ${s.error.status}`),
    };
    return;
  }
  if (s.stall)
    await new Promise<never>((_, reject) =>
      call.abortSignal?.addEventListener("abort", () => reject(call.abortSignal?.reason), { once: true }),
    );
  if (text) yield { type: "text-end", id: "t0" };
  for (const [i, t] of (s.toolCalls ?? []).entries())
    yield {
      type: "tool-call",
      toolCallId: t.id ?? `call_${i}`,
      toolName: t.name,
      input: JSON.stringify(t.input ?? {}),
    };
  yield {
    type: "finish",
    usage: usageOf(s, call, chunks),
    finishReason: { unified: s.toolCalls?.length ? "tool-calls" : "stop", raw: undefined },
  };
}

export async function collect(
  stream: ReadableStream<LanguageModelV4StreamPart>,
): Promise<LanguageModelV4GenerateResult> {
  const content: LanguageModelV4GenerateResult["content"] = [];
  let text = "";
  let finish: Extract<LanguageModelV4StreamPart, { type: "finish" }> | undefined;
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (value.type === "text-delta") text += value.delta;
    else if (value.type === "tool-call") content.push(value);
    else if (value.type === "error") throw value.error;
    else if (value.type === "finish") finish = value;
  }
  if (text) content.unshift({ type: "text", text });
  return {
    content,
    finishReason: finish?.finishReason ?? { unified: "other", raw: undefined },
    usage: finish?.usage ?? usageOf({}, { prompt: [] }, 0),
    warnings: [],
  };
}
