/**
 * How errors leave the HTTP API: every response for a failed request is
 * `{ error: { code, message } }` with a status chosen from the code.
 *
 * - A RatchetError keeps its code; its status comes from HTTP_STATUS, a table
 *   over every ErrorCode (the compiler flags a new code without a status).
 * - RATCHET_STORE and anything unknown are logged in full and answered with a
 *   fixed message: driver text (SQL, paths, connection strings) never reaches
 *   a client.
 * - The server's own refusals (auth, media type, route, size) are HttpErrors
 *   with codes of their own.
 */
import { type ErrorCode, RatchetError } from "../errors.js";

/** Codes only the HTTP layer produces. */
export type HttpOnlyCode =
  | "RATCHET_UNAUTHORIZED"
  | "RATCHET_FORBIDDEN_HOST"
  | "RATCHET_UNSUPPORTED_MEDIA_TYPE"
  | "RATCHET_TOO_MANY_STREAMS"
  | "RATCHET_INTERNAL";

export type HttpErrorCode = ErrorCode | HttpOnlyCode;

/**
 * The status of each Ratchet code. Choices that are not obvious:
 * - UNKNOWN_TASK 422: the request is well formed but names a task this
 *   server has no definition for (start `serve` with --tasks).
 * - QUEUE_FULL 409: the queue's state refuses the enqueue (spec §2.7); not
 *   429, which would tell clients their own rate is the problem.
 * - STORE / CLOSED 503: the storage (or the engine) is unavailable; retrying
 *   later may work. TIMEOUT 504.
 * - Worker-side codes (LEASE_LOST, ABORTED, …) should never surface from an
 *   API call; if one does it is a server fault: 500.
 */
export const HTTP_STATUS: Record<ErrorCode, number> = {
  RATCHET_INVALID_INPUT: 400,
  RATCHET_INVALID_JSON: 400,
  RATCHET_CYCLE: 400,
  RATCHET_INVALID_WAIT: 400,
  RATCHET_USAGE: 400,
  RATCHET_INVALID_PIPELINE: 400,
  RATCHET_PAYLOAD_TOO_LARGE: 413,
  RATCHET_UNKNOWN_TASK: 422,
  RATCHET_NOT_FOUND: 404,
  RATCHET_INVALID_STATE: 409,
  RATCHET_QUEUE_FULL: 409,
  RATCHET_CONVERSATION_BUSY: 409,
  RATCHET_STREAM_CLOSED: 409,
  RATCHET_STREAM_FULL: 409,
  RATCHET_ENV: 500,
  RATCHET_STORE: 503,
  // A model provider's failure seen through the API (spec §18.2): the upstream's fault, or its limit.
  RATCHET_MODEL_RATE_LIMITED: 503,
  RATCHET_MODEL_UNAVAILABLE: 502,
  RATCHET_MODEL_TIMEOUT: 504,
  RATCHET_MODEL_CONNECTION: 502,
  RATCHET_MODEL_PROTOCOL: 502,
  RATCHET_MODEL_REJECTED: 502,
  RATCHET_NO_ROUTE: 503,
  // A forge (GitHub) failure seen through the API (spec §22.3): the upstream's fault.
  RATCHET_FORGE: 502,
  RATCHET_CLOSED: 503,
  RATCHET_TIMEOUT: 504,
  RATCHET_CONFIG: 500,
  RATCHET_SCHEMA_TOO_NEW: 500,
  RATCHET_LEASE_LOST: 500,
  RATCHET_ABORTED: 500,
  RATCHET_NON_RETRYABLE: 500,
  RATCHET_DUPLICATE_STEP: 500,
  RATCHET_NO_PROGRESS: 500,
  RATCHET_RATE_LIMITED: 500,
};

/** A refusal by the HTTP layer itself. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: HttpErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "HttpError";
  }
}

export interface ErrorBody {
  error: { code: HttpErrorCode; message: string };
}

/** Status and body for any thrown value; `log` receives what is hidden from the client. */
export function toErrorResponse(
  err: unknown,
  log: (msg: string, err: unknown) => void,
): { status: number; body: ErrorBody } {
  if (err instanceof HttpError) return { status: err.status, body: body(err.code, err.message) };
  if (err instanceof RatchetError) {
    const status = HTTP_STATUS[err.code] ?? 500;
    if (err.code === "RATCHET_STORE" || status === 500) {
      log(`request failed with ${err.code}`, err);
      return { status, body: body(err.code, "the server could not complete the request; see its log") };
    }
    return { status, body: body(err.code, err.message) };
  }
  log("request failed with an unexpected error", err);
  return { status: 500, body: body("RATCHET_INTERNAL", "internal error; see the server log") };
}

function body(code: HttpErrorCode, message: string): ErrorBody {
  return { error: { code, message } };
}
