/**
 * A task's opt-in events (spec §21.17): `defineTask({ facts: ["completed", "failed"] })` names the
 * outcomes whose settlement writes a `task.<outcome>` fact in its own transaction. A definition
 * without the option costs its settlements one property read and no SQL.
 */
import type { ClaimedTask, Settlement } from "../store/store.js";

export const TASK_FACT_OUTCOMES = ["completed", "failed", "faulted", "aborted"] as const;
export type TaskFactOutcome = (typeof TASK_FACT_OUTCOMES)[number];

/** The outcome a settlement ends its task with, if it ends it (a retry, sleep or release does not). */
function outcomeOf(s: Settlement): TaskFactOutcome | null {
  // An abort handler's run ends its task aborted, whatever it returned (spec §12.5).
  if (s.fence.mode === "abort")
    return s.kind === "complete" || s.kind === "fail" || s.kind === "aborted" ? "aborted" : null;
  switch (s.kind) {
    case "complete":
      return "completed";
    case "fail":
      return s.outcome;
    case "aborted":
      return s.handler ? null : "aborted";
    default:
      return null;
  }
}

/**
 * `s` with its `task.<outcome>` fact when the definition opted into that outcome.
 * Invariant: the fact rides in the settlement, so it commits iff the settlement applies (spec §21.2).
 */
export function withTaskFacts(
  s: Settlement,
  task: Pick<ClaimedTask, "id" | "name" | "queue">,
  opted: ReadonlySet<TaskFactOutcome>,
): Settlement {
  const outcome = outcomeOf(s);
  if (outcome === null || !opted.has(outcome)) return s;
  const data = { task: task.id, name: task.name, queue: task.queue, outcome };
  return { ...s, facts: [{ type: `task.${outcome}`, subject: `task:${task.id}`, data }] };
}
