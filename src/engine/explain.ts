/**
 * explain(id) (spec §14.5): why a task is where it is, from the scheduler's
 * side, as one typed reason and a sentence. Pure over the rows the store read
 * in one transaction; nothing here writes or runs task code.
 */
import type { StoredError } from "../core/json.js";
import type { Outcome, Status } from "../core/model.js";
import { groupOf, keyLabel } from "../store/gates.js";
import type { BlockedReason, ExplainRows, TaskId, TaskRecord } from "../store/store.js";
import type { TaskDefinition } from "./definition.js";

export type Reason =
  | { kind: "ended"; outcome: Outcome; at: number | null }
  | {
      kind: "running";
      holder: string | null;
      leaseUntil: number | null;
      abortHandler: boolean;
      abortRequested: boolean;
    }
  | { kind: "completing"; outcome: Outcome; children: TaskId[] }
  | { kind: "not_due"; until: number | null }
  | { kind: "sleeping"; step: string; until: number | null; abortHandler: boolean }
  | { kind: "backoff"; until: number | null; error: StoredError; rateLimited: boolean }
  | { kind: "needs"; ids: TaskId[]; count: number }
  | { kind: "tasks"; ids: TaskId[]; policy: string }
  | { kind: "event"; name: string; until: number | null }
  | { kind: "draining"; children: TaskId[] }
  | { kind: "abort_retry"; until: number | null }
  | { kind: "blocked"; reason: BlockedReason; error?: StoredError }
  | { kind: "no_definition" }
  | { kind: "seat"; seat: string; holders: TaskId[]; limit: number | null }
  | { kind: "rate"; buckets: string[]; until: number | null; paused: boolean }
  | { kind: "queued"; ahead: number; abortHandler: boolean; migrates: boolean };

export interface Explanation {
  id: TaskId;
  name: string;
  queue: string;
  status: Status;
  reason: Reason;
  /** The reason as a sentence. */
  text: string;
  /** The store's clock when this was read. */
  at: number;
}

const iso = (ms: number | null) => (ms === null ? "?" : new Date(ms).toISOString());
const list = (ids: readonly TaskId[]) => (ids.length ? ids.join(", ") : "none left");

export function explain(rows: ExplainRows, local: TaskDefinition | undefined): Explanation {
  const t = rows.task;
  const reason = reasonOf(rows, local);
  return {
    id: t.id,
    name: t.name,
    queue: t.queue,
    status: t.status,
    reason,
    text: sentence(reason, t.queue),
    at: rows.now,
  };
}

/** What a classification needs besides the task itself (bounded id lists, as the store read them). */
export interface ReasonContext {
  liveMembers: readonly TaskId[];
  liveChildren: readonly TaskId[];
  liveNeeds: readonly TaskId[];
  /** Pending tasks of the queue a claim takes first (0 when not counted). */
  ahead: number;
  /** The definition in this process, and as some instance registered it on the store. */
  local: TaskDefinition | undefined;
  stored: { version: number } | null;
  /** A task parked on a seat: who holds it and the limit in force (spec §14.9). */
  seatHolders?: readonly TaskId[];
  seatLimit?: number | null;
  /** Buckets of a task parked on a rate limit, with their 429 pauses (spec §14.10–§14.11). */
  buckets?: readonly { bucket: string; pausedUntil: number }[];
  now?: number;
  /** The `ctx.sleep` step the task's timer belongs to, when explain read it (spec §14.5). */
  sleep?: string | null;
}

/**
 * The one classification of a task's state (spec §12.10, §14.5), shared by
 * explain() and inspect(): a live task is running, completing, waiting on
 * something named, blocked, or ready behind N others.
 */
export function reasonFor(t: TaskRecord, c: ReasonContext): Reason {
  switch (t.status) {
    case "terminal":
      return { kind: "ended", outcome: t.outcome!, at: t.endedAt };
    case "running":
      return {
        kind: "running",
        holder: t.lockedBy,
        leaseUntil: t.leaseUntil,
        abortHandler: t.abortRequested,
        abortRequested: t.abortRequested,
      };
    case "completing":
      return { kind: "completing", outcome: t.heldOutcome!, children: [...c.liveChildren] };
    case "waiting":
      switch (t.waitOn) {
        case "blocked":
          return {
            kind: "blocked",
            reason: t.blocked!.reason,
            ...(t.blocked!.error ? { error: t.blocked!.error } : {}),
          };
        case "tasks":
          return { kind: "tasks", ids: [...c.liveMembers], policy: t.waitPolicy ?? "allSettled" };
        case "event":
          return { kind: "event", name: t.eventName!, until: t.wakeAt };
        case "drain":
          return { kind: "draining", children: [...c.liveChildren] };
        case "abort":
          // An abort handler's own sleep is a sleep, not the retry of a failed handler.
          if (c.sleep) return { kind: "sleeping", step: c.sleep, until: t.wakeAt, abortHandler: true };
          return { kind: "abort_retry", until: t.wakeAt };
        case "seat":
          return {
            kind: "seat",
            seat: keyLabel(t.seat ?? "?"),
            holders: [...(c.seatHolders ?? [])],
            limit: c.seatLimit ?? null,
          };
        case "rate": {
          const bs = c.buckets ?? [];
          const paused = bs.filter((b) => b.pausedUntil > (c.now ?? 0));
          // A pause names the buckets a provider paused, not every bucket of the task.
          return {
            kind: "rate",
            buckets: (paused.length > 0 ? paused : bs).map((b) => keyLabel(b.bucket)),
            until: t.wakeAt,
            paused: paused.length > 0,
          };
        }
        default:
          if (t.needsPending > 0) return { kind: "needs", ids: [...c.liveNeeds], count: t.needsPending };
          // spec §14.5: a task in its own ctx.sleep is sleeping, even when an earlier attempt failed
          // (the task keeps that error); any other timer after a failed or deferred attempt (spec §5.2,
          // §14.8) is a backoff, and the attempt's error says why (a provider's 429 is RATCHET_RATE_LIMITED).
          if (c.sleep) return { kind: "sleeping", step: c.sleep, until: t.wakeAt, abortHandler: false };
          if (t.error !== null)
            return {
              kind: "backoff",
              until: t.wakeAt,
              error: t.error,
              rateLimited: t.error.code === "RATCHET_RATE_LIMITED",
            };
          return { kind: "not_due", until: t.wakeAt };
      }
    default: {
      const version = c.local?.version ?? c.stored?.version;
      if (version === undefined) return { kind: "no_definition" };
      if (version < t.version) return { kind: "blocked", reason: "too_old" };
      if (c.local && c.local.version > t.version && !c.local.migrate)
        return { kind: "blocked", reason: "migration_failed" };
      return {
        kind: "queued",
        ahead: c.ahead,
        abortHandler: t.abortRequested,
        migrates: version > t.version,
      };
    }
  }
}

function reasonOf(r: ExplainRows, local: TaskDefinition | undefined): Reason {
  const group = r.task.seat === null ? null : groupOf(r.task.seat);
  const codeLimit = group !== null && local?.gates?.seat?.group === group ? local.gates.seat.limit : null;
  return reasonFor(r.task, {
    ...r,
    local,
    stored: r.definition,
    seatLimit: r.seatOverride ?? codeLimit,
  });
}

function sentence(r: Reason, queue: string): string {
  switch (r.kind) {
    case "ended":
      return `ended ${r.outcome} at ${iso(r.at)}`;
    case "running":
      return r.abortRequested && r.abortHandler
        ? `running its abort handler on ${r.holder ?? "?"} (lease until ${iso(r.leaseUntil)})`
        : `running on ${r.holder ?? "?"}, lease until ${iso(r.leaseUntil)}`;
    case "completing":
      return `its outcome (${r.outcome}) is decided; it holds it until the work it owns ends: ${list(r.children)}`;
    case "not_due":
      return `not due until ${iso(r.until)}`;
    case "sleeping":
      return `sleeping in ${r.abortHandler ? "its abort handler's " : ""}ctx.sleep("${r.step}") until ${iso(r.until)}`;
    case "backoff":
      return r.rateLimited
        ? `backing off until ${iso(r.until)}: deferred by a rate limit (${r.error.message}), no attempt used`
        : `backoff until ${iso(r.until)}: its retry policy runs it again after a failed attempt (${r.error.code ?? r.error.name}: ${r.error.message})`;
    case "needs":
      return `waiting for predecessors to complete: ${list(r.ids)}`;
    case "tasks":
      return `waiting (${r.policy}) for tasks: ${list(r.ids)}`;
    case "event":
      return `waiting for signal "${r.name}" until ${iso(r.until)}`;
    case "draining":
      return `aborting: waits for the work it owns to end before its abort handler runs: ${list(r.children)}`;
    case "abort_retry":
      return `its abort handler failed and retries at ${iso(r.until)}`;
    case "blocked":
      return `blocked: ${r.reason}${r.error ? ` (${r.error.message})` : ""}; registering a definition that can take it resumes it`;
    case "no_definition":
      return "no Ratchet instance on this store has registered its definition, so no worker claims it";
    case "seat":
      return `waiting for a seat of "${r.seat}"${r.limit === null ? "" : ` (limit ${r.limit})`}, held by tasks: ${list(r.holders)}`;
    case "rate":
      return r.paused
        ? `rate limit ${r.buckets.join(", ")} is paused by a provider's 429; it runs again from ${iso(r.until)}`
        : `rate limit ${r.buckets.join(", ")} refills for it at ${iso(r.until)}`;
    case "queued":
      return r.ahead === 0
        ? `due now${r.abortHandler ? " (to run its abort handler)" : ""}; the next free worker of queue "${queue}" takes it`
        : `due; ${r.ahead} task${r.ahead === 1 ? "" : "s"} of queue "${queue}" claim first (priority, then age)`;
  }
}
