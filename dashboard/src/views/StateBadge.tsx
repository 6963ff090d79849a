/** A task's state as a coloured badge: the status, or the outcome once terminal. */
import { stateOf } from "../format.js";
import type { TaskRecord } from "../types.js";

export function StateBadge({
  task,
}: {
  task: Pick<TaskRecord, "status" | "outcome" | "abortRequested"> & {
    heldOutcome?: TaskRecord["heldOutcome"];
  };
}) {
  const s = stateOf(task);
  return (
    <span class={`badge state-${s.split(" ")[0]}`} data-field="state">
      {s}
      {task.abortRequested && task.status !== "terminal" ? " · abort requested" : ""}
    </span>
  );
}
