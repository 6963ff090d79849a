/** Dispatch rows as the stores return them, and their mapping from SQL rows (spec §20.18). */
import type {
  AttemptMode,
  AttemptState,
  AttemptView,
  ClosingCause,
  ForcedFailure,
} from "../../core/dispatch/model.js";
import type { ItemPrWait } from "../../core/dispatch/pulls.js";
import type { ItemState, KeptSession } from "../../core/dispatch/sessions.js";

export interface ItemRow {
  readonly id: string;
  readonly pipeline: string;
  readonly step: string;
  readonly state: ItemState;
  /** Serialised JSON. */
  readonly input: string;
  /** Takes of bounded edges so far, by edge id (spec §20.11). */
  readonly taken: Readonly<Record<string, number>>;
  /** The next attempt revives the kept session (its edge had `resume: true`). */
  readonly resumeNext: boolean;
  readonly kept: KeptSession | null;
  /** No attempt starts before this instant (a usage limit's reset, spec §20.29). */
  readonly notBefore: number | null;
  /** The pull-request state it waits for before it moves on (spec §22.7), or null. */
  readonly prWait: ItemPrWait | null;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly endedAt: number | null;
}

export interface AttemptRow extends AttemptView {
  readonly itemId: string;
  readonly pipeline: string;
  readonly worker: string;
  /** The rendered spawn request (JSON), kept so it can be sent again. */
  readonly spawn: string;
  readonly forced: ForcedFailure | null;
  readonly sessionStopped: boolean | null;
  readonly resumeFallback: boolean;
  readonly forgotten: boolean;
  /** The close-out the settlement read (JSON), if any. */
  readonly closeout: string | null;
  /** When the usage limit that closed it resets (spec §20.29). */
  readonly usageResetsAt: number | null;
  /** The compare-and-set guard: every move names the version it read. */
  readonly version: number;
  readonly holder: string | null;
  readonly leaseUntil: number | null;
  readonly updatedAt: number;
}

export interface AttemptEvent {
  readonly id: number;
  readonly attemptId: string;
  readonly at: number;
  readonly kind: string;
  readonly detail: unknown;
}

export interface SeatRow {
  readonly worker: string;
  readonly limit: number | null;
  /** Live attempts of the kind that hold a seat (every live state but sleeping). */
  readonly held: number;
  readonly refusals: number;
  readonly backoffUntil: number | null;
}

const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));
const bool = (v: unknown): boolean | null => (v === null || v === undefined ? null : Number(v) === 1);

export function toItem(r: Record<string, unknown>): ItemRow {
  return {
    id: String(r.id),
    pipeline: r.pipeline as string,
    step: r.step as string,
    state: r.state as ItemState,
    input: r.input as string,
    taken: JSON.parse(r.taken as string) as Record<string, number>,
    resumeNext: Number(r.resume_next) === 1,
    kept: r.kept === null || r.kept === undefined ? null : (JSON.parse(r.kept as string) as KeptSession),
    notBefore: num(r.not_before),
    prWait:
      r.pr_wait === null || r.pr_wait === undefined ? null : (JSON.parse(r.pr_wait as string) as ItemPrWait),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
    endedAt: num(r.ended_at),
  };
}

export function toAttempt(r: Record<string, unknown>): AttemptRow {
  return {
    id: String(r.id),
    itemId: String(r.item_id),
    pipeline: r.pipeline as string,
    phase: r.phase as string,
    worker: r.worker as string,
    mode: r.mode as AttemptMode,
    state: r.state as AttemptState,
    claimedAt: Number(r.claimed_at),
    startedAt: num(r.started_at),
    wokenAt: num(r.woken_at),
    wakeRequestedAt: num(r.wake_requested_at),
    suspendRequestedAt: num(r.suspend_requested_at),
    closingAt: num(r.closing_at),
    closing: (r.closing as ClosingCause | null) ?? null,
    session: (r.session as string | null) ?? null,
    spawn: r.spawn as string,
    endedAt: num(r.ended_at),
    forced: (r.forced as ForcedFailure | null) ?? null,
    sessionStopped: bool(r.session_stopped),
    resumeFallback: Number(r.resume_fallback) === 1,
    forgotten: Number(r.forgotten) === 1,
    closeout: (r.closeout as string | null) ?? null,
    usageResetsAt: num(r.usage_resets_at),
    version: Number(r.version),
    holder: (r.holder as string | null) ?? null,
    leaseUntil: num(r.lease_until),
    updatedAt: Number(r.updated_at),
  };
}

export function toEvent(r: Record<string, unknown>): AttemptEvent {
  return {
    id: Number(r.id),
    attemptId: String(r.attempt_id),
    at: Number(r.at),
    kind: r.kind as string,
    detail: r.detail === null || r.detail === undefined ? null : JSON.parse(r.detail as string),
  };
}
