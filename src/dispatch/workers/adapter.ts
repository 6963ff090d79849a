/**
 * The worker adapter seam (spec §20.16): how the runner starts, reads and
 * controls sessions on a host. One adapter per worker kind; the runner never
 * talks to a host any other way. Adapters decide nothing: they report what
 * the host says, and the reconcile table decides.
 *
 * Every method answers with a value, never by throwing for a host's "no":
 * a missing session is `absent`, a refusal is `refused` with a cause, and
 * `capacity` is kept apart from every `other` cause because the runner backs
 * off on it instead of falling back (spec §20.6, §20.15).
 */
import type { SessionReading } from "../../core/dispatch/model.js";
import type { SpawnRequest } from "../../core/dispatch/route.js";
import type { KeptSession, StartOutcome } from "../../core/dispatch/sessions.js";
import { ValidationError } from "../../errors.js";

export type { SpawnRequest, StartOutcome };

export type RefusalCause = "capacity" | "other";

/** The answer to suspend, resume and stop. */
export type ControlOutcome =
  | { readonly kind: "done" }
  | { readonly kind: "absent" }
  | { readonly kind: "refused"; readonly cause: RefusalCause; readonly message: string };

export type ForgetOutcome =
  | { readonly kind: "forgotten" }
  | { readonly kind: "absent" }
  | { readonly kind: "refused"; readonly message: string };

/** The structured report a session gives at its end (spec §20.17). */
export interface Closeout {
  readonly outcome: "succeeded" | "failed";
  readonly summary: string | null;
  /** Optional JSON the next step may read. */
  readonly data: unknown;
}

/**
 * What a session printed, its last bytes (spec §22.11): `cut` when older output was left out, so the
 * text may start mid-line; a last line without a line break may still be being printed.
 */
export type OutputOutcome =
  | { readonly kind: "output"; readonly text: string; readonly cut: boolean }
  | { readonly kind: "absent" };

export interface OutputOptions {
  /** At most this many bytes, the last ones (default 64 KiB, at most 1 MiB). */
  readonly maxBytes?: number;
}

export interface WorkerAdapter {
  /** The worker kind pipelines name in their steps. */
  readonly kind: string;
  /**
   * Starts a session for the request, named by `req.name`. Starting a name
   * that already has a session answers that session (a respawn whose first
   * answer was lost must not start a second one).
   */
  start(req: SpawnRequest): Promise<StartOutcome>;
  read(session: string): Promise<SessionReading>;
  /** The session started under a spawn name, or null (finds strays). */
  find(name: string): Promise<string | null>;
  /** Suspends the session; its next reading is `suspended` with `asked: true`. */
  suspend(session: string): Promise<ControlOutcome>;
  /** Resumes a suspended session, or revives an ended one; `message` is given to the agent when set. */
  resume(session: string, message: string | null): Promise<ControlOutcome>;
  /** Revives a kept session for a new attempt, with the new request's prompt as its message. */
  resumeKept(kept: KeptSession, req: SpawnRequest): Promise<StartOutcome>;
  /** Asks the session to stop; a later reading says whether it did. */
  stop(session: string): Promise<ControlOutcome>;
  /** Drops everything the host keeps for the session. */
  forget(session: string): Promise<ForgetOutcome>;
  /** The close-out the session reported, or null when it reported none (yet). */
  closeout(session: string): Promise<Closeout | null>;
  /**
   * The last ≤ `maxBytes` of what the session printed, read without loading more than that (spec
   * §22.11), or `absent` when the host has no output of it (no such session, or gone with its output).
   */
  output(session: string, o?: OutputOptions): Promise<OutputOutcome>;
  /** Releases what the adapter holds (not the sessions: they outlive runners). */
  close?(): Promise<void>;
}

/** Bounds every adapter applies to what a session reports. */
export const MAX_CLOSEOUT_BYTES = 256 * 1024;
export const MAX_REPORT_CHARS = 1_000;

export const DEFAULT_OUTPUT_BYTES = 64 * 1024;
export const MAX_OUTPUT_BYTES = 1024 * 1024;

/** The output bound asked for, checked: an integer in 1–1 MiB (`RATCHET_INVALID_INPUT` otherwise). */
export function outputBytes(o: OutputOptions | undefined): number {
  const n = o?.maxBytes ?? DEFAULT_OUTPUT_BYTES;
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_OUTPUT_BYTES)
    throw new ValidationError(`output maxBytes must be an integer in 1–${MAX_OUTPUT_BYTES}`);
  return n;
}

/**
 * The last ≤ `max` bytes of `buf` as text: a character the cut splits is dropped whole (UTF-8
 * continuation bytes at the start are skipped), so the text never starts with half a character.
 */
export function tailText(buf: Buffer, max: number): { text: string; cut: boolean } {
  if (buf.length <= max) return { text: buf.toString("utf8"), cut: false };
  let from = buf.length - max;
  for (let i = 0; i < 3 && from < buf.length && (buf[from]! & 0xc0) === 0x80; i++) from++;
  return { text: buf.subarray(from).toString("utf8"), cut: true };
}

/** Parses a close-out a session wrote; a malformed one is a failed close-out naming the problem. */
export function parseCloseout(text: string): Closeout {
  if (text.length > MAX_CLOSEOUT_BYTES)
    return { outcome: "failed", summary: `close-out larger than ${MAX_CLOSEOUT_BYTES} bytes`, data: null };
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { outcome: "failed", summary: "close-out is not JSON", data: null };
  }
  if (typeof v !== "object" || v === null)
    return { outcome: "failed", summary: "close-out is not an object", data: null };
  const o = v as Record<string, unknown>;
  if (o.outcome !== "succeeded" && o.outcome !== "failed")
    return { outcome: "failed", summary: 'close-out outcome must be "succeeded" or "failed"', data: null };
  const summary = typeof o.summary === "string" ? o.summary.slice(0, MAX_REPORT_CHARS) : null;
  return { outcome: o.outcome, summary, data: o.data ?? null };
}
