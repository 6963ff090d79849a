/**
 * One vocabulary for every provider's failures (spec §18.2): whatever a provider throws (an AI SDK
 * APICallError, a fetch TypeError, our own providers' errors) becomes a ModelError whose code says
 * what happened and whether another try may work.
 *
 * Invariant: 429, 408, 5xx and overload, timeouts, connection and protocol failures are retryable;
 * any other 4xx is not (spec §18.2). A ModelError passes through unchanged.
 */
import { MAX_RETRY_AFTER_MS, ModelError, type ModelErrorCode } from "../errors.js";

/** Longest provider error text kept in a message. */
const MAX_MESSAGE = 500;

/** A Retry-After value (seconds or an HTTP date) or retry-after-ms, in ms from `now`, bounded; null if absent or unreadable. */
export function parseRetryAfter(
  headers: Record<string, string | undefined> | undefined,
  now: number,
): number | null {
  if (!headers) return null;
  const get = (k: string) => {
    for (const [h, v] of Object.entries(headers))
      if (h.toLowerCase() === k && typeof v === "string") return v.trim();
    return undefined;
  };
  const ms = get("retry-after-ms");
  if (ms !== undefined && /^\d+(\.\d+)?$/.test(ms)) return clamp(Number(ms));
  const v = get("retry-after");
  if (v === undefined || v === "") return null;
  if (/^\d+(\.\d+)?$/.test(v)) return clamp(Number(v) * 1000);
  const at = Date.parse(v);
  return Number.isFinite(at) ? clamp(at - now) : null;
}

function clamp(ms: number): number {
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(0, Math.round(ms)));
}

/** The code of an HTTP status (spec §18.2). */
export function codeOfStatus(status: number): ModelErrorCode {
  if (status === 429) return "RATCHET_MODEL_RATE_LIMITED";
  if (status === 408) return "RATCHET_MODEL_TIMEOUT";
  if (status >= 500) return "RATCHET_MODEL_UNAVAILABLE";
  return "RATCHET_MODEL_REJECTED";
}

const NETWORK_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EAI_AGAIN",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

function short(s: unknown): string {
  const t = typeof s === "string" ? s : String(s);
  return t.length > MAX_MESSAGE ? `${t.slice(0, MAX_MESSAGE)}…` : t;
}

function networkCode(e: unknown, depth = 0): string | undefined {
  if (!e || typeof e !== "object" || depth > 4) return undefined;
  const code = (e as { code?: unknown }).code;
  if (typeof code === "string" && NETWORK_CODES.has(code)) return code;
  return networkCode((e as { cause?: unknown }).cause, depth + 1);
}

/** spec §18.2: any thrown value as a ModelError. */
export function toModelError(e: unknown, provider: string, now: number = Date.now()): ModelError {
  if (e instanceof ModelError) return e;
  const o = (e && typeof e === "object" ? e : {}) as {
    statusCode?: unknown;
    status?: unknown;
    responseHeaders?: Record<string, string>;
    message?: unknown;
    name?: unknown;
    isRetryable?: unknown;
  };
  const message = short(o.message ?? e);
  const status =
    typeof o.statusCode === "number" ? o.statusCode : typeof o.status === "number" ? o.status : null;
  if (status !== null && status >= 400) {
    const code = codeOfStatus(status);
    const retryAfterMs =
      code === "RATCHET_MODEL_RATE_LIMITED" ? parseRetryAfter(o.responseHeaders, now) : null;
    return new ModelError(code, `${provider}: HTTP ${status}: ${message}`, {
      status,
      retryAfterMs,
      provider,
      cause: e,
    });
  }
  const net = networkCode(e);
  if (net)
    return new ModelError("RATCHET_MODEL_CONNECTION", `${provider}: connection failed (${net}): ${message}`, {
      provider,
      cause: e,
    });
  if (o.name === "TimeoutError")
    return new ModelError("RATCHET_MODEL_TIMEOUT", `${provider}: timed out: ${message}`, {
      provider,
      cause: e,
    });
  if (e instanceof TypeError && /fetch failed|terminated|network/i.test(message))
    return new ModelError("RATCHET_MODEL_CONNECTION", `${provider}: connection failed: ${message}`, {
      provider,
      cause: e,
    });
  // The AI SDK's own argument errors (AI_InvalidPromptError, AI_UnsupportedFunctionalityError, …): no retry can fix them.
  if (typeof o.name === "string" && o.name.startsWith("AI_") && o.isRetryable !== true)
    return new ModelError("RATCHET_MODEL_REJECTED", `${provider}: ${message}`, { provider, cause: e });
  return new ModelError("RATCHET_MODEL_PROTOCOL", `${provider}: ${message}`, { provider, cause: e });
}
