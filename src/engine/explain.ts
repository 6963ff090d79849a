/**
 * explain(id) (spec §14.5): why a task is where it is, from the scheduler's
 * side, as one typed reason and a sentence. Pure over the rows the store read
 * in one transaction; nothing here writes or runs task code.
 */
import type { StoredError } from "../core/json.js";
import type { Outcome, Status } from "../core/model.js";
import type { BlockedReason, ExplainRows, TaskId } from "../store/store.js";
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
  | { kind: "needs"; ids: TaskId[] }
  | { kind: "tasks"; ids: TaskId[]; policy: string }
  | { kind: "event"; name: string; until: number | null }
  | { kind: "draining"; children: TaskId[] }
  | { kind: "abort_retry"; until: number | null }
  | { kind: "blocked"; reason: BlockedReason; error?: StoredError }
  | { kind: "no_definition" }
  | { kind: "queued"; ahead: number; abortHandler: boolean };

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

function reasonOf(r: ExplainRows, local: TaskDefinition | undefined): Reason {
  const t = r.task;
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
      return { kind: "completing", outcome: t.heldOutcome!, children: r.liveChildren };
    case "waiting":
      switch (t.waitOn) {
        case "blocked":
          return {
            kind: "blocked",
            reason: t.blocked!.reason,
            ...(t.blocked!.error ? { error: t.blocked!.error } : {}),
          };
        case "tasks":
          return { kind: "tasks", ids: r.liveMembers, policy: t.waitPolicy ?? "allSettled" };
        case "event":
          return { kind: "event", name: t.eventName!, until: t.wakeAt };
        case "drain":
          return { kind: "draining", children: r.liveChildren };
        case "abort":
          return { kind: "abort_retry", until: t.wakeAt };
        default:
          if (t.needsPending > 0) return { kind: "needs", ids: r.liveNeeds };
          return { kind: "not_due", until: t.wakeAt };
      }
    default: {
      const version = local?.version ?? r.definition?.version;
      if (version === undefined) return { kind: "no_definition" };
      if (version < t.version) return { kind: "blocked", reason: "too_old" };
      return { kind: "queued", ahead: r.ahead, abortHandler: t.abortRequested };
    }
  }
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
    case "queued":
      return r.ahead === 0
        ? `due now${r.abortHandler ? " (to run its abort handler)" : ""}; the next free worker of queue "${queue}" takes it`
        : `due; ${r.ahead} task${r.ahead === 1 ? "" : "s"} of queue "${queue}" claim first (priority, then age)`;
  }
}
