/**
 * The provider seam (spec §18.1): any AI SDK language model (LanguageModelV4) streamed as our
 * events — text and reasoning deltas, tool calls, and one finish with usage — or a ModelError.
 *
 * Modes of one request:
 * - waiting: doStream was called; the overall timeout runs, the idle timeout runs from the call;
 * - streaming: each part resets the idle timer;
 * - ended: a finish part came and the stream closed (done), or a failure: an error part, a thrown
 *   error, a stream that ended without finish, the idle or overall timeout, or the caller's abort.
 * A timeout or abort cancels the provider's request through its AbortSignal and stops reading at
 * once, even from a provider that ignores the signal.
 *
 * Invariant: a request yields at most one finish, and nothing after it or after a failure; every
 * failure is a ModelError (a router's NoRouteError when no route answered) except the caller's own abort, which rethrows the signal's reason
 * (spec §18.1, §18.2).
 */
import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4StreamPart,
  LanguageModelV4Usage,
} from "@ai-sdk/provider";
import { ModelError, NoRouteError, ValidationError } from "../errors.js";
import { toModelError } from "./classify.js";

export type LanguageModel = LanguageModelV4;
export type ModelPrompt = LanguageModelV4CallOptions["prompt"];
/** Call options other than the prompt and the signal (which the seam owns). */
export type ModelCallOptions = Omit<LanguageModelV4CallOptions, "prompt" | "abortSignal">;

export interface Usage {
  /** Prompt tokens, cached ones included. */
  input: number;
  output: number;
  /** Prompt tokens read from the provider's cache. */
  cached: number;
  /** Output tokens spent on reasoning (part of output). */
  reasoning: number;
}

/** Which route answered, when a router did (spec §18.5). */
export interface RouteInfo {
  name: string;
  provider: string;
  model: string;
  /** Routes tried before it, with the code each failed with. */
  fallbacks: { route: string; code: string }[];
}

export type ModelEvent =
  | { type: "text"; delta: string }
  | { type: "reasoning"; delta: string }
  | { type: "tool-call"; id: string; name: string; input: string }
  | { type: "finish"; reason: string; usage: Usage; route: RouteInfo | null };

export interface StreamOptions {
  /** The caller's abort (e.g. ctx.signal): cancels the request. */
  signal?: AbortSignal;
  /** Longest wait for the next part (spec §18.1). Default 60 s. */
  idleTimeoutMs?: number;
  /** Longest whole request. Default 10 min. */
  timeoutMs?: number;
  call?: ModelCallOptions;
}

export const DEFAULT_IDLE_TIMEOUT_MS = 60_000;
export const DEFAULT_TIMEOUT_MS = 10 * 60_000;
const MAX_TIMEOUT_MS = 24 * 3600_000;

/**
 * The provider session identity of a request (spec §18.7), in `providerOptions.ratchet.sessionId`:
 * providers that cache prompts key their cache by it (the OpenAI-compatible provider sends it as
 * `prompt_cache_key`); others ignore it.
 */
export function sessionOf(call: Pick<LanguageModelV4CallOptions, "providerOptions">): string | undefined {
  const v = call.providerOptions?.ratchet?.sessionId;
  return typeof v === "string" ? v : undefined;
}

export const ZERO_USAGE: Usage = { input: 0, output: 0, cached: 0, reasoning: 0 };

/** The AI SDK's usage as ours (missing counts are 0). */
export function toUsage(u: LanguageModelV4Usage | undefined): Usage {
  const n = (v: number | undefined) =>
    typeof v === "number" && Number.isFinite(v) && v >= 0 ? Math.round(v) : 0;
  return {
    input: n(u?.inputTokens?.total),
    output: n(u?.outputTokens?.total),
    cached: n(u?.inputTokens?.cacheRead),
    reasoning: n(u?.outputTokens?.reasoning),
  };
}

function checkMs(v: number | undefined, dflt: number, what: string): number {
  if (v === undefined) return dflt;
  if (!Number.isInteger(v) || v < 1 || v > MAX_TIMEOUT_MS)
    throw new ValidationError(`${what} must be an integer in [1, ${MAX_TIMEOUT_MS}] ms`);
  return v;
}

function routeOf(part: Extract<LanguageModelV4StreamPart, { type: "finish" }>): RouteInfo | null {
  const r = part.providerMetadata?.ratchet?.route as RouteInfo | undefined;
  return r && typeof r.name === "string" ? r : null;
}

/** spec §18.1: one streamed request as events; throws a ModelError (or the caller's abort reason). */
export async function* streamModel(
  model: LanguageModel,
  prompt: ModelPrompt,
  opts: StreamOptions = {},
): AsyncGenerator<ModelEvent, void, undefined> {
  const idleMs = checkMs(opts.idleTimeoutMs, DEFAULT_IDLE_TIMEOUT_MS, "idleTimeoutMs");
  const totalMs = checkMs(opts.timeoutMs, DEFAULT_TIMEOUT_MS, "timeoutMs");
  const provider = model.provider;
  const ac = new AbortController();
  let stopped: Promise<never> | undefined;
  let fail!: (e: unknown) => void;
  stopped = new Promise<never>((_, reject) => {
    fail = reject;
  });
  stopped.catch(() => {});
  const stop = (e: unknown) => {
    if (!ac.signal.aborted) ac.abort(e);
    fail(e);
  };
  const onAbort = () => stop(opts.signal?.reason ?? new DOMException("aborted", "AbortError"));
  if (opts.signal?.aborted) throw opts.signal.reason;
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  const timeout = (what: string, ms: number) => () =>
    stop(
      new ModelError("RATCHET_MODEL_TIMEOUT", `${provider}: ${what} timeout after ${ms} ms`, { provider }),
    );
  const overall = setTimeout(timeout("overall", totalMs), totalMs);
  let idle = setTimeout(timeout("idle stream", idleMs), idleMs);
  const touch = () => {
    clearTimeout(idle);
    idle = setTimeout(timeout("idle stream", idleMs), idleMs);
  };
  let reader: ReadableStreamDefaultReader<LanguageModelV4StreamPart> | undefined;
  try {
    const res = await race(
      Promise.resolve(model.doStream({ ...(opts.call ?? {}), prompt, abortSignal: ac.signal })),
      stopped,
    );
    reader = res.stream.getReader();
    for (;;) {
      const { done, value } = await race(reader.read(), stopped);
      if (done)
        throw new ModelError("RATCHET_MODEL_PROTOCOL", `${provider}: stream ended without a finish`, {
          provider,
        });
      touch();
      const ev = toEvent(value, provider);
      if (ev === null) continue;
      yield ev;
      if (ev.type === "finish") return;
    }
  } catch (e) {
    if (opts.signal?.aborted) throw opts.signal.reason;
    if (e instanceof NoRouteError) throw e;
    throw toModelError(e, provider);
  } finally {
    clearTimeout(overall);
    clearTimeout(idle);
    opts.signal?.removeEventListener("abort", onAbort);
    if (!ac.signal.aborted) ac.abort(new Error("request ended"));
    reader?.cancel().catch(() => {});
  }
}

function race<T>(p: Promise<T>, stopped: Promise<never>): Promise<T> {
  return Promise.race([p, stopped]);
}

function toEvent(p: LanguageModelV4StreamPart, provider: string): ModelEvent | null {
  switch (p.type) {
    case "text-delta":
      return p.delta ? { type: "text", delta: p.delta } : null;
    case "reasoning-delta":
      return p.delta ? { type: "reasoning", delta: p.delta } : null;
    case "tool-call":
      return { type: "tool-call", id: p.toolCallId, name: p.toolName, input: p.input };
    case "finish":
      return { type: "finish", reason: p.finishReason.unified, usage: toUsage(p.usage), route: routeOf(p) };
    case "error":
      throw toModelError(p.error, provider);
    default:
      return null;
  }
}

/** An async generator as a ReadableStream that pulls it one part at a time; cancelling ends the generator. */
export function readableOf<T>(it: AsyncGenerator<T, void, undefined>): ReadableStream<T> {
  return new ReadableStream<T>({
    async pull(c) {
      const n = await it.next();
      if (n.done) c.close();
      else c.enqueue(n.value);
    },
    async cancel() {
      await it.return(undefined);
    },
  });
}
