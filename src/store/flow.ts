/**
 * Throttle and debounce keys on enqueue (spec §14.6–§14.7), as programs both
 * stores run inside their enqueue transaction (see tree/program.ts), so a key
 * is checked and recorded atomically with the insert it governs.
 */
import type { Status } from "../core/model.js";
import type { FlowKey, TaskId } from "./store.js";
import { one, type Program, q } from "./tree/program.js";

const T = "{s}.ratchet_tasks";
const K = "{s}.ratchet_flow_keys";

/**
 * Before inserting an entry with a flow key: the task the enqueue resolves to
 * instead (throttled within the period, or a not-yet-started debounced task,
 * whose input and start this call updates), or null to insert a new task.
 */
export function* flowBefore(
  queue: string,
  flow: FlowKey,
  input: string,
): Program<{ id: TaskId; status: Status } | null> {
  const row = yield* one<{ task_id: number; at: number; first_at: number }>(
    `SELECT task_id, at, first_at FROM ${K} WHERE queue = :queue AND kind = :kind AND key = :key @update`,
    { queue, kind: flow.kind, key: flow.key },
  );
  if (!row) return null;
  if (flow.kind === "throttle") {
    const w = yield* one<{ w: number }>(
      "SELECT CASE WHEN :now - CAST(:at AS bigint) < CAST(:p AS bigint) THEN 1 ELSE 0 END AS w",
      { at: row.at, p: flow.periodMs },
    );
    if (Number(w!.w) !== 1) return null;
    const t = yield* one<{ status: Status }>(`SELECT status FROM ${T} WHERE id = :id`, { id: row.task_id });
    return t ? { id: Number(row.task_id), status: t.status } : null;
  }
  const t = yield* one<{ status: Status; attempts: number; wake_at: number | null }>(
    `SELECT status, attempts, wake_at FROM ${T} WHERE id = :id @update`,
    { id: row.task_id },
  );
  // Only a task that has not started yet (still on its first timer) can absorb the call.
  if (t?.status !== "waiting" || Number(t.attempts) !== 0 || t.wake_at === null) return null;
  const cap = Number(row.first_at) + flow.maxDelayMs;
  yield* q(
    `UPDATE ${T} SET input = :input,
       run_after = CASE WHEN :now + CAST(:d AS bigint) < CAST(:cap AS bigint) THEN :now + CAST(:d AS bigint) ELSE CAST(:cap AS bigint) END,
       wake_at = CASE WHEN :now + CAST(:d AS bigint) < CAST(:cap AS bigint) THEN :now + CAST(:d AS bigint) ELSE CAST(:cap AS bigint) END,
       updated_at = :now
     WHERE id = :id`,
    { id: row.task_id, input, d: flow.delayMs, cap },
  );
  yield* q(`UPDATE ${K} SET at = :now WHERE queue = :queue AND kind = :kind AND key = :key`, {
    queue,
    kind: flow.kind,
    key: flow.key,
  });
  return { id: Number(row.task_id), status: "waiting" };
}

/** After inserting a new task for a flow key: it is the key's task from now on. */
export function* flowAfter(queue: string, flow: FlowKey, taskId: TaskId): Program<void> {
  yield* q(
    `INSERT INTO ${K} (queue, kind, key, task_id, at, first_at) VALUES (:queue, :kind, :key, :id, :now, :now)
     ON CONFLICT (queue, kind, key) DO UPDATE SET task_id = excluded.task_id, at = excluded.at, first_at = excluded.first_at`,
    { queue, kind: flow.kind, key: flow.key, id: taskId },
  );
}
