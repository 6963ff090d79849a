/** Operations on tasks (spec §6.3, §7, §10.3): retry of a failed root and its subtree, abort, prune. */
import { keyTaken, planRetrySubtree } from "../../core/cascade.js";
import { fromJson, type StoredError } from "../../core/json.js";
import { isRetryableOutcome, type Outcome } from "../../core/model.js";
import { InvalidStateError, NotFoundError } from "../../errors.js";
import { type TaskRow, toRecord } from "../rows.js";
import type { AbortResult, TaskId, TaskRecord } from "../store.js";
import { pruneStreams } from "../streams/ops.js";
import * as tree from "../tree/ops.js";
import type { PgCore } from "./core.js";
import { T } from "./sql.js";

export async function retry(core: PgCore, id: TaskId): Promise<TaskRecord> {
  return core.tx(async (c) => {
    const row = (await core.run<TaskRow>(c, `SELECT * FROM ${T} WHERE id = :id FOR UPDATE`, { id }))[0];
    if (!row) throw new NotFoundError(`task ${id}`);
    if (row.status !== "terminal")
      throw new InvalidStateError(`task ${id} is ${row.status}; only a terminal task can be retried`);
    const outcome = row.outcome!;
    if (outcome === "completed")
      throw new InvalidStateError(`task ${id} completed; enqueue it again instead`);
    if (outcome === "upstream_failed") {
      const root = fromJson<StoredError | null>(row.error)?.upstream ?? "?";
      throw new InvalidStateError(
        `task ${id} did not run because upstream task ${root} failed; retry task ${root} instead`,
      );
    }
    if (!isRetryableOutcome(outcome))
      throw new InvalidStateError(`task ${id} ended ${outcome} and cannot be retried`);
    await core.inTx(c, tree.checkRetryOwner(id, row.owner_id));
    const needs = await core.run<{ id: number; status: string; outcome: Outcome | null }>(
      c,
      `SELECT t.id, t.status, t.outcome FROM {s}.ratchet_deps d JOIN ${T} t ON t.id = d.needs_id WHERE d.task_id = :id`,
      { id },
    );
    const bad = needs.find((n) => n.status === "terminal" && n.outcome !== "completed");
    if (bad)
      throw new InvalidStateError(
        `task ${id} needs task ${bad.id}, which ended ${bad.outcome}; retry task ${bad.id} first`,
      );
    if (row.dedupe_key !== null) {
      const taken = await core.findDedupe(c, row.queue, row.dedupe_key);
      if (taken && taken.id !== id)
        throw new InvalidStateError(
          `task ${id}'s dedupe key "${row.dedupe_key}" is now held by task ${taken.id}`,
        );
    }
    const live = needs.filter((n) => n.status !== "terminal").length;
    await core.run(
      c,
      `UPDATE ${T} SET status = :status, outcome = NULL, result = NULL, error = NULL, attempts = 0, abort_requested = 0,
        needs_pending = :pending, wake_at = NULL, run_after = :now, ended_at = NULL, progress = NULL, progress_note = NULL, updated_at = :now
      WHERE id = :id`,
      { id, pending: live, status: live > 0 ? "waiting" : "pending" },
    );
    const deltas = new Map([[row.queue, 1]]);
    await core.event(c, id, "retried", null, { previous: outcome });
    const nodes = await core.dependentsOf(c, id);
    const known = new Map(nodes.map((n) => [n.id, n.outcome]));
    const others = [...new Set(nodes.flatMap((n) => n.needs))].filter((n) => !known.has(n) && n !== id);
    if (others.length > 0) {
      for (const r of await core.run<{ id: number; outcome: Outcome | null }>(
        c,
        `SELECT id, outcome FROM ${T} WHERE id = ANY(:ids)`,
        { ids: others },
      )) {
        known.set(r.id, r.outcome);
      }
    }
    const plan = planRetrySubtree(id, nodes, (n) => known.get(n) ?? null);
    const queueOf = new Map(nodes.map((n) => [n.id, n.queue]));
    for (const r of plan) {
      // A revived dependent takes its dedupe key back: refused, and the whole retry rolled back, when
      // another task holds it now (the retried root itself, say; spec §6.3, §2.3).
      const k = (
        await core.run<{ queue: string; dedupe_key: string | null }>(
          c,
          `SELECT queue, dedupe_key FROM ${T} WHERE id = :id AND outcome = 'upstream_failed'`,
          { id: r.id },
        )
      )[0];
      if (k?.dedupe_key != null) {
        const taken = await core.findDedupe(c, k.queue, k.dedupe_key);
        if (taken && taken.id !== r.id) throw keyTaken(id, r.id, k.dedupe_key, taken.id);
      }
      const upd = await core.run(
        c,
        `UPDATE ${T} SET status = 'waiting', outcome = NULL, error = NULL, needs_pending = :pending,
        wake_at = NULL, ended_at = NULL, attempts = 0, updated_at = :now WHERE id = :id AND outcome = 'upstream_failed' RETURNING id`,
        { id: r.id, pending: r.needsPending },
      );
      if (upd[0]) deltas.set(queueOf.get(r.id)!, (deltas.get(queueOf.get(r.id)!) ?? 0) + 1);
    }
    await core.bumpLive(c, deltas);
    if (live === 0) await core.notify(c);
    return toRecord((await core.run<TaskRow>(c, `SELECT * FROM ${T} WHERE id = :id`, { id }))[0]!);
  });
}

/** spec §7.1–§7.3, §12.5: the durable mark and everything it implies, in one transaction. */
export async function abort(core: PgCore, id: TaskId): Promise<AbortResult> {
  return core.program(() => tree.abort(id));
}

export async function prune(core: PgCore, olderThanMs: number, limit: number): Promise<number> {
  return core.tx(async (c) => {
    await core.inTx(c, tree.pruneSignals(olderThanMs));
    const ids = (
      await core.run<{ id: number }>(
        c,
        `SELECT id FROM ${T} WHERE status = 'terminal' AND ended_at < :now - :age::bigint
      ORDER BY ended_at LIMIT :limit FOR UPDATE SKIP LOCKED`,
        { age: olderThanMs, limit },
      )
    ).map((r) => r.id);
    if (ids.length === 0) return 0;
    await core.inTx(c, pruneStreams(ids));
    await core.run(c, "DELETE FROM {s}.ratchet_steps WHERE task_id = ANY(:ids)", { ids });
    await core.run(c, "DELETE FROM {s}.ratchet_events WHERE task_id = ANY(:ids)", { ids });
    await core.run(c, "DELETE FROM {s}.ratchet_deps WHERE task_id = ANY(:ids) OR needs_id = ANY(:ids)", {
      ids,
    });
    return (await core.run(c, `DELETE FROM ${T} WHERE id = ANY(:ids) RETURNING id`, { ids })).length;
  });
}
