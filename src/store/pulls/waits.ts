/**
 * Items waiting on their pull request (spec §22.7): the program that moves a
 * waiting item on, or closes it, once its pull request's known state allows.
 * Run inside the transaction that changed what it depends on: a settlement
 * that routed the item onto a waiting edge, a link, or a watcher's write.
 */
import { itemMoved } from "../../core/dispatch/facts.js";
import { decidePrWait, type ItemPrWait } from "../../core/dispatch/pulls.js";
import type { ItemState } from "../../core/dispatch/sessions.js";
import { I } from "../dispatch/items.js";
import type { FactInput } from "../outbox/facts.js";
import { one, type Program, q } from "../tree/program.js";
import { itemPull } from "./programs.js";
import { L } from "./rows.js";

/** At most this many waiting items are looked at per pull-request write (one pull request, many items, is rare). */
export const MAX_WAITERS_PER_WRITE = 1_000;

/**
 * Ends an open item's wait if its pull request (the most recently linked to
 * any of its attempts) is in the state waited for, or closes the item if the
 * pull request was closed unmerged (decidePrWait). Returns the facts to append.
 * Invariant: only an open item with a wait changes, under its row lock, and
 * only by the decision on the pull request's state read in this transaction.
 */
export function* releaseWait(itemId: string): Program<FactInput[]> {
  const item = yield* one(
    `SELECT id, pipeline, step, pr_wait FROM ${I} WHERE id = CAST(:id AS bigint) AND state = 'open' AND pr_wait IS NOT NULL @update`,
    { id: itemId },
  );
  if (!item) return [];
  const wait = JSON.parse(item.pr_wait as string) as ItemPrWait;
  const pull = yield* itemPull(itemId);
  const d = decidePrWait(wait, pull);
  if (d.kind === "wait") return [];
  const state: ItemState = d.kind === "close" ? "closed" : (wait.end ?? "open");
  yield* q(
    `UPDATE ${I} SET state = :state, pr_wait = NULL, updated_at = :now, ended_at = ${state === "open" ? "NULL" : ":now"}
     WHERE id = CAST(:id AS bigint)`,
    { id: itemId, state },
  );
  const f = itemMoved(
    { id: itemId, pipeline: item.pipeline as string, step: item.step as string, state },
    { step: item.step as string, state: "open" },
  );
  const cause = d.kind === "close" ? "pr-closed-unmerged" : wait.for;
  return [{ ...f, data: { ...(f.data as object), cause, pull: pull?.url ?? null } }];
}

/** Ends the waits of the items linked to a pull request whose state just changed (spec §22.7). */
export function* releaseWaitsOf(pullId: string): Program<FactInput[]> {
  const items = yield* q<{ item_id: number }>(
    `SELECT DISTINCT l.item_id FROM ${L} l JOIN ${I} i ON i.id = l.item_id
     WHERE l.pull_id = CAST(:id AS bigint) AND i.state = 'open' AND i.pr_wait IS NOT NULL
     ORDER BY l.item_id LIMIT :limit`,
    { id: pullId, limit: MAX_WAITERS_PER_WRITE },
  );
  const facts: FactInput[] = [];
  for (const r of items) facts.push(...(yield* releaseWait(String(r.item_id))));
  return facts;
}
