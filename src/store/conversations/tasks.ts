/**
 * Tasks a conversation commit creates (spec §17.4): top-level tasks inserted by the commit's own
 * program, so they exist exactly when the commit's entries and state do.
 */
import { ValidationError } from "../../errors.js";
import type { NewTask, TaskId } from "../store.js";
import { insertOwned } from "../tree/ops.js";
import { one, type Program } from "../tree/program.js";
import { T } from "./rows.js";

/** The engine scope of a conversation's tasks: `abortScope` and `waitForIdle` reach them by it (spec §17.8). */
export function conversationScope(id: string): string {
  return `conversation:${id}`;
}

/**
 * The owner a conversation's new task gets (spec §17.1): the conversation's owner task while that
 * task is live, so the owner's abort cascades to it and the owner's finish waits for it (spec
 * §12.2, §12.4); none once the owner is terminal, when later work there runs as ordinary work.
 */
function* liveOwner(ownerTaskId: number | null): Program<{ id: number; detached: number } | null> {
  if (ownerTaskId === null) return null;
  const o = yield* one<{ id: number; detached: number }>(
    `SELECT id, detached FROM ${T} WHERE id = :id AND status <> 'terminal' @share`,
    { id: ownerTaskId },
  );
  return o ? { id: Number(o.id), detached: Number(o.detached) } : null;
}

/**
 * Inserts a plain task in the conversation's scope, counted by admission like any task of its
 * queue (spec §2.7), owned by the conversation's live owner task if it has one. Dedupe keys, needs
 * and flow keys belong to `enqueue`; a commit refuses them rather than silently ignoring them.
 * Invariant: the task is written in the caller's transaction or not at all.
 */
export function* insertTask(
  t: NewTask,
  conversation: { id: string; owner_task_id: number | null },
  maxDepth: number,
): Program<TaskId> {
  const scope = conversationScope(conversation.id);
  if (t.dedupe !== null || t.needs.length > 0 || t.flow)
    throw new ValidationError("a conversation commit creates plain tasks: no dedupe key, needs or flow key");
  const owner = yield* liveOwner(conversation.owner_task_id);
  return yield* insertOwned(
    t,
    { owner: owner?.id ?? null, scope, background: false, detached: owner?.detached === 1, spawnName: null },
    maxDepth,
  );
}

/** Live tasks of the scope, background subtrees included (they inherit the scope, spec §12.2). */
export function* liveInScope(scope: string): Program<number> {
  const r = yield* one<{ n: number }>(
    `SELECT count(*) AS n FROM ${T} WHERE scope = :scope AND status <> 'terminal'`,
    {
      scope,
    },
  );
  return Number(r?.n ?? 0);
}
