/**
 * Every error a caller of Ratchet can see. Each has a stable `code`; raw
 * SQLite/PostgreSQL errors never reach a caller (they are wrapped in
 * StoreError with `cause`). spec §2.1, §3.7.
 */

export type ErrorCode =
  | "RATCHET_INVALID_INPUT"
  | "RATCHET_INVALID_JSON"
  | "RATCHET_PAYLOAD_TOO_LARGE"
  | "RATCHET_UNKNOWN_TASK"
  | "RATCHET_QUEUE_FULL"
  | "RATCHET_CYCLE"
  | "RATCHET_LEASE_LOST"
  | "RATCHET_ABORTED"
  | "RATCHET_NON_RETRYABLE"
  | "RATCHET_NOT_FOUND"
  | "RATCHET_INVALID_STATE"
  | "RATCHET_DUPLICATE_STEP"
  | "RATCHET_CONFIG"
  | "RATCHET_STORE"
  | "RATCHET_CLOSED"
  | "RATCHET_TIMEOUT"
  | "RATCHET_SCHEMA_TOO_NEW"
  | "RATCHET_INVALID_WAIT"
  | "RATCHET_NO_PROGRESS"
  | "RATCHET_RATE_LIMITED"
  | "RATCHET_CONVERSATION_BUSY"
  | "RATCHET_STREAM_CLOSED"
  | "RATCHET_STREAM_FULL"
  /** An execution environment's file or process call failed (spec §19.1); `kind` says how. */
  | "RATCHET_ENV"
  | "RATCHET_INVALID_PIPELINE"
  /** A model provider refused or failed a request (spec §18.2); `retryable` says whether another try may work. */
  | "RATCHET_MODEL_RATE_LIMITED"
  | "RATCHET_MODEL_UNAVAILABLE"
  | "RATCHET_MODEL_TIMEOUT"
  | "RATCHET_MODEL_CONNECTION"
  | "RATCHET_MODEL_PROTOCOL"
  | "RATCHET_MODEL_REJECTED"
  /** Every route of a router failed or was open (spec §18.5). */
  | "RATCHET_NO_ROUTE"
  /** A forge (GitHub) call failed (spec §22.3); `kind` says how, `retryAfterMs` when to come back. */
  | "RATCHET_FORGE"
  /** A malformed `ratchet` command line (the CLI's UsageError, exit code 2); never from the library. */
  | "RATCHET_USAGE";

export class RatchetError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** Bad arguments to an API call or CLI command. Nothing was written. */
export class ValidationError extends RatchetError {
  constructor(message: string, code: ErrorCode = "RATCHET_INVALID_INPUT", options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

export class UnknownTaskError extends RatchetError {
  constructor(readonly taskName: string) {
    super("RATCHET_UNKNOWN_TASK", `unknown task "${taskName}": no definition with this name is registered`);
  }
}

/** Admission control refused the enqueue (spec §2.7). Nothing was written. */
export class QueueFullError extends RatchetError {
  constructor(
    readonly queue: string,
    readonly depth: number,
    readonly maxDepth: number,
    readonly adding: number,
  ) {
    super(
      "RATCHET_QUEUE_FULL",
      `queue "${queue}" is full: ${depth} live tasks + ${adding} new > maxDepth ${maxDepth}; drain it first or raise maxDepth`,
    );
  }
}

/** A wait that could never finish, or that the task may not make (spec §12.3). Nothing was written. */
export class WaitError extends RatchetError {
  constructor(message: string) {
    super("RATCHET_INVALID_WAIT", message);
  }
}

/** A phase returned the checkpoint it started from: it would run for ever (spec §12.8). Ends the task `faulted`. */
export class NoProgressError extends RatchetError {
  constructor(message: string) {
    super("RATCHET_NO_PROGRESS", message);
  }
}

/** Longest pause a RateLimitedError may ask for. */
export const MAX_RETRY_AFTER_MS = 24 * 3600_000;

/**
 * Thrown by task code when a provider says "later" (an HTTP 429 with
 * Retry-After): the task runs again after retryAfterMs without using up an
 * attempt (spec §14.8). retryAfterMs is clamped to [0, 24 h]. A task with
 * rate limits also pauses them for every worker until then (spec §14.11).
 */
export class RateLimitedError extends RatchetError {
  readonly retryAfterMs: number;
  /** The rate limit (by name) to pause; null pauses every rate limit of the task (spec §14.11). */
  readonly limit: string | null;
  constructor(opts: { retryAfterMs: number; message?: string; limit?: string }) {
    const ms = Number.isFinite(opts?.retryAfterMs)
      ? Math.min(Math.max(0, Math.round(opts.retryAfterMs)), MAX_RETRY_AFTER_MS)
      : 1_000;
    super("RATCHET_RATE_LIMITED", opts?.message ?? `rate limited; retry after ${ms} ms`);
    this.retryAfterMs = ms;
    this.limit = typeof opts?.limit === "string" ? opts.limit : null;
  }
}

/** A `needs` cycle in an enqueued batch (spec §2.6). Nothing was written. */
export class CycleError extends RatchetError {
  constructor(readonly path: string[]) {
    super("RATCHET_CYCLE", `dependency cycle: ${path.join(" -> ")}`);
  }
}

/**
 * The holder's claim was superseded (lease expired and another worker claimed,
 * or the task was settled meanwhile). The write changed nothing. spec §3.7.
 */
export class LeaseLostError extends RatchetError {
  constructor(
    readonly taskId: number,
    readonly token: number,
  ) {
    super(
      "RATCHET_LEASE_LOST",
      `task ${taskId}: claim ${token} is no longer the holder; the write was refused`,
    );
  }
}

/** The task carries an abort mark; its run may not commit any more (spec §4.5). */
export class AbortedError extends RatchetError {
  constructor(readonly taskId: number) {
    super("RATCHET_ABORTED", `task ${taskId} was aborted`);
  }
}

/** Thrown by task code to fail at once, without further retries (spec §5.3). */
export class NonRetryableError extends RatchetError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("RATCHET_NON_RETRYABLE", message, options);
  }
}

export class NotFoundError extends RatchetError {
  constructor(what: string) {
    super("RATCHET_NOT_FOUND", `${what} not found`);
  }
}

export class InvalidStateError extends RatchetError {
  constructor(message: string) {
    super("RATCHET_INVALID_STATE", message);
  }
}

export class DuplicateStepError extends RatchetError {
  constructor(readonly stepName: string) {
    super(
      "RATCHET_DUPLICATE_STEP",
      `step "${stepName}" was already used in this run; give each step a unique name (e.g. "fetch:3" inside a loop)`,
    );
  }
}

export class ConfigError extends RatchetError {
  constructor(message: string) {
    super("RATCHET_CONFIG", message);
  }
}

/** A storage failure that is not a Ratchet decision. `cause` holds the driver error. */
export class StoreError extends RatchetError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("RATCHET_STORE", message, options);
  }
}

export class ClosedError extends RatchetError {
  constructor() {
    super("RATCHET_CLOSED", "this Ratchet instance is closed");
  }
}

export class TimeoutError extends RatchetError {
  constructor(message: string) {
    super("RATCHET_TIMEOUT", message);
  }
}

export class SchemaTooNewError extends RatchetError {
  constructor(found: number, known: number) {
    super(
      "RATCHET_SCHEMA_TOO_NEW",
      `the database schema is version ${found}, newer than this Ratchet knows (${known}); upgrade Ratchet`,
    );
  }
}

/**
 * A submission with `whenBusy: "reject"` met a conversation with a run in progress or input queued
 * (spec §17.6). Nothing was written.
 */
export class ConversationBusyError extends RatchetError {
  constructor(readonly conversationId: string) {
    super("RATCHET_CONVERSATION_BUSY", `conversation "${conversationId}" is busy; nothing was submitted`);
  }
}

/** A write to a durable output stream that was closed (spec §16.2). Nothing was written. */
export class StreamClosedError extends RatchetError {
  constructor(
    readonly taskId: number,
    readonly stream: string,
  ) {
    super("RATCHET_STREAM_CLOSED", `stream "${stream}" of task ${taskId} is closed`);
  }
}

/** A stream past its byte cap, or a task past its number of streams (spec §16.6). Nothing was written. */
export class StreamFullError extends RatchetError {
  constructor(
    readonly taskId: number,
    readonly stream: string,
    detail: string,
  ) {
    super("RATCHET_STREAM_FULL", `stream "${stream}" of task ${taskId}: ${detail}`);
  }
}

/** What went wrong with a model request (spec §18.2), one code each. */
export type ModelErrorCode =
  | "RATCHET_MODEL_RATE_LIMITED"
  | "RATCHET_MODEL_UNAVAILABLE"
  | "RATCHET_MODEL_TIMEOUT"
  | "RATCHET_MODEL_CONNECTION"
  | "RATCHET_MODEL_PROTOCOL"
  | "RATCHET_MODEL_REJECTED";

/**
 * A model request failed (spec §18.2). RATE_LIMITED (429, with `retryAfterMs` when the provider
 * said), UNAVAILABLE (5xx, overload), TIMEOUT (idle or overall), CONNECTION and PROTOCOL (a
 * malformed or cut stream) are retryable; REJECTED (any other 4xx) is not: a retry cannot fix it.
 * Invariant: `retryable` is a function of `code` alone (spec §18.2).
 */
export class ModelError extends RatchetError {
  declare readonly code: ModelErrorCode;
  readonly retryable: boolean;
  constructor(
    code: ModelErrorCode,
    message: string,
    readonly detail: {
      status?: number | null;
      retryAfterMs?: number | null;
      provider?: string;
      cause?: unknown;
    } = {},
  ) {
    super(code, message, { cause: detail.cause });
    this.retryable = code !== "RATCHET_MODEL_REJECTED";
  }
  get status(): number | null {
    return this.detail.status ?? null;
  }
  get retryAfterMs(): number | null {
    return this.detail.retryAfterMs ?? null;
  }
}

/** A router found no route it could use: each failed retryably or its breaker was open (spec §18.5). */
export class NoRouteError extends RatchetError {
  constructor(
    message: string,
    readonly attempts: readonly { route: string; error: string }[],
    readonly retryAfterMs: number | null,
  ) {
    super("RATCHET_NO_ROUTE", message);
  }
}
