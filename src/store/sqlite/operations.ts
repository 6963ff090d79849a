/** Operator actions for the SQLite store: retry, abort and prune. spec §6.3, §7. */
import { keyTaken, planRetrySubtree } from "../../core/cascade.js";
import { isRetryableOutcome, type Outcome } from "../../core/model.js";
import { InvalidStateError, NotFoundError } from "../../errors.js";
import { type TaskRow, toRecord } from "../rows.js";
import type { AbortResult, TaskId, TaskRecord } from "../store.js";
import { pruneStreams } from "../streams/ops.js";
import * as tree from "../tree/ops.js";
import type { SqliteCore } from "./core.js";

/** spec §6.3. */
export function retry(c: SqliteCore, id: TaskId): TaskRecord {
  return c.tx(() => {
    const now = c.now();
    const row = c.s("SELECT * FROM ratchet_tasks WHERE id = ?").get(id) as TaskRow | undefined;
    if (!row) throw new NotFoundError(`task ${id}`);
    if (row.status !== "terminal")
      throw new InvalidStateError(`task ${id} is ${row.status}; only a terminal task can be retried`);
    const outcome = row.outcome!;
    if (outcome === "completed")
      throw new InvalidStateError(`task ${id} completed; enqueue it again instead`);
    if (outcome === "upstream_failed") {
      const root = failedRoot(c, id);
      throw new InvalidStateError(
        `task ${id} did not run because upstream task ${root ?? "?"} failed; retry task ${root ?? "?"} instead`,
      );
    }
    if (!isRetryableOutcome(outcome))
      throw new InvalidStateError(`task ${id} ended ${outcome} and cannot be retried`);
    c.inTx(tree.checkRetryOwner(id, row.owner_id));
    const needs = needsWithOutcome(c, id);
    const bad = needs.find((n) => n.status === "terminal" && n.outcome !== "completed");
    if (bad)
      throw new InvalidStateError(
        `task ${id} needs task ${bad.id}, which ended ${bad.outcome}; retry task ${bad.id} first`,
      );
    if (row.dedupe_key !== null) {
      const taken = c
        .s(
          "SELECT id FROM ratchet_tasks WHERE queue = ? AND dedupe_key = ? AND id <> ? AND (status <> 'terminal' OR outcome = 'completed')",
        )
        .get(row.queue, row.dedupe_key, id) as { id: number } | undefined;
      if (taken)
        throw new InvalidStateError(
          `task ${id}'s dedupe key "${row.dedupe_key}" is now held by task ${taken.id}`,
        );
    }
    const livePreds = needs.filter((n) => n.status !== "terminal").length;
    c.s(`UPDATE ratchet_tasks SET status = :status, outcome = NULL, result = NULL, error = NULL, attempts = 0, abort_requested = 0,
          needs_pending = :pending, wake_at = NULL, run_after = :now, ended_at = NULL, progress = NULL, progress_note = NULL, updated_at = :now
        WHERE id = :id`).run({ id, now, pending: livePreds, status: livePreds > 0 ? "waiting" : "pending" });
    c.bumpLive(row.queue, 1);
    c.event(id, now, "retried", null, { previous: outcome });
    resetSubtree(c, id, now);
    return toRecord(c.s("SELECT * FROM ratchet_tasks WHERE id = ?").get(id) as TaskRow);
  });
}

/** Puts the upstream_failed dependents of a retried task back to waiting (plan from src/core). */
function resetSubtree(c: SqliteCore, id: TaskId, now: number): void {
  const nodes = c.dependentsOf(id);
  const outcomes = new Map(nodes.map((n) => [n.id, n.outcome]));
  const lookup = (n: number) => (outcomes.has(n) ? outcomes.get(n)! : outcomeOf(c, n));
  const queueOf = new Map(nodes.map((n) => [n.id, n.queue]));
  const reset =
    c.s(`UPDATE ratchet_tasks SET status = 'waiting', outcome = NULL, error = NULL, needs_pending = :pending,
        wake_at = NULL, ended_at = NULL, attempts = 0, updated_at = :now WHERE id = :id AND outcome = 'upstream_failed'`);
  const keyOf = c.s(
    "SELECT queue, dedupe_key FROM ratchet_tasks WHERE id = ? AND outcome = 'upstream_failed'",
  );
  const holder = c.s(
    "SELECT id FROM ratchet_tasks WHERE queue = ? AND dedupe_key = ? AND id <> ? AND (status <> 'terminal' OR outcome = 'completed')",
  );
  for (const r of planRetrySubtree(id, nodes, lookup)) {
    // A revived dependent takes its dedupe key back: refused, and the whole retry rolled back, when
    // another task holds it now (the retried root itself, say; spec §6.3, §2.3).
    const k = keyOf.get(r.id) as { queue: string; dedupe_key: string | null } | undefined;
    if (k?.dedupe_key != null) {
      const taken = holder.get(k.queue, k.dedupe_key, r.id) as { id: number } | undefined;
      if (taken) throw keyTaken(id, r.id, k.dedupe_key, taken.id);
    }
    if (reset.run({ id: r.id, pending: r.needsPending, now }).changes === 1)
      c.bumpLive(queueOf.get(r.id)!, 1);
  }
}

function outcomeOf(c: SqliteCore, id: TaskId): Outcome | null {
  const r = c.s("SELECT outcome FROM ratchet_tasks WHERE id = ?").get(id) as
    | { outcome: Outcome | null }
    | undefined;
  return r?.outcome ?? null;
}

function needsWithOutcome(c: SqliteCore, id: TaskId) {
  return c
    .s(
      `SELECT t.id, t.status, t.outcome FROM ratchet_deps d JOIN ratchet_tasks t ON t.id = d.needs_id WHERE d.task_id = ?`,
    )
    .all(id) as {
    id: number;
    status: string;
    outcome: Outcome | null;
  }[];
}

/** Walks up through upstream_failed predecessors to the task that actually failed. */
function failedRoot(c: SqliteCore, id: TaskId): TaskId | null {
  const seen = new Set<number>();
  let cur: number | null = id;
  while (cur !== null && !seen.has(cur)) {
    seen.add(cur);
    const preds: { id: number; status: string; outcome: Outcome | null }[] = needsWithOutcome(c, cur).filter(
      (n) => n.status === "terminal" && n.outcome !== "completed",
    );
    const failed = preds.find((n) => n.outcome !== "upstream_failed");
    if (failed) return failed.id;
    cur = preds[0]?.id ?? null;
  }
  return null;
}

/** spec §7.1–§7.3, §12.5: the durable mark and everything it implies, in one transaction. */
export function abort(c: SqliteCore, id: TaskId): AbortResult {
  return c.program(() => tree.abort(id));
}

export function prune(c: SqliteCore, olderThanMs: number, limit: number): number {
  return c.tx(() => {
    const cutoff = c.now() - olderThanMs;
    c.inTx(tree.pruneSignals(olderThanMs));
    const ids = (
      c
        .s(
          "SELECT id FROM ratchet_tasks WHERE status = 'terminal' AND ended_at < ? ORDER BY ended_at LIMIT ?",
        )
        .all(cutoff, limit) as { id: number }[]
    ).map((r) => r.id);
    if (ids.length === 0) return 0;
    const list = JSON.stringify(ids);
    c.inTx(pruneStreams(ids));
    c.s("DELETE FROM ratchet_steps WHERE task_id IN (SELECT value FROM json_each(?))").run(list);
    c.s("DELETE FROM ratchet_events WHERE task_id IN (SELECT value FROM json_each(?))").run(list);
    c.s(
      "DELETE FROM ratchet_deps WHERE task_id IN (SELECT value FROM json_each(?)) OR needs_id IN (SELECT value FROM json_each(?))",
    ).run(list, list);
    return c.s("DELETE FROM ratchet_tasks WHERE id IN (SELECT value FROM json_each(?))").run(list).changes;
  });
}
