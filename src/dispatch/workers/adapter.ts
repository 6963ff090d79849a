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
  /** Releases what the adapter holds (not the sessions: they outlive runners). */
  close?(): Promise<void>;
}

/** Bounds every adapter applies to what a session reports. */
export const MAX_CLOSEOUT_BYTES = 256 * 1024;
export const MAX_REPORT_CHARS = 1_000;

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
