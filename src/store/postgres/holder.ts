/** Holder writes (spec §3.7–§3.8, §4): steps, heartbeats, progress and settlements, each fenced by the claim token. */
import { AbortedError, LeaseLostError } from "../../errors.js";
import { appendFactsOfChanges, factsOfApplied } from "../outbox/facts.js";
import {
  type Fence,
  fenceParams,
  markOf,
  type Settlement,
  type SettleResult,
  type StepWrite,
  type TaskId,
} from "../store.js";
import { reconcile, settleTree } from "../tree/ops.js";
import type { Client, PgCore } from "./core.js";
import { FENCE, T } from "./sql.js";

/** spec §4.2: one step; a refusal becomes AbortedError or LeaseLostError. */
export async function commitStep(core: PgCore, fence: Fence, name: string, result: string): Promise<void> {
  const [r] = await commitSteps(core, [{ fence, name, result }]);
  if (r === "abort_marked") throw new AbortedError(fence.taskId);
  if (r !== "ok") throw new LeaseLostError(fence.taskId, fence.token);
}

/**
 * spec §4.2. One statement for the whole group, so one round trip and one
 * commit: the fenced touches and the inserts land together or not at all.
 * Measured: a commit per step held W4 at the fsync rate (~1.8k steps/s here).
 */
export async function commitSteps(core: PgCore, items: readonly StepWrite[]): Promise<SettleResult[]> {
  if (items.length === 0) return [];
  return core.read(async (c) => {
    const rows = await core.run<{ id: number; epoch: number; claimed: number; mark: number }>(
      c,
      `WITH v AS (SELECT * FROM unnest(:ids::bigint[], :tokens::int[], :claimed::bigint[], :names::text[],
                                       :results::text[], :marks::int[])
                    WITH ORDINALITY AS v(id, token, claimed, name, result, mark, ord)),
       f AS (UPDATE ${T} t SET updated_at = :now FROM (SELECT DISTINCT id, token, claimed, mark FROM v) d
             WHERE t.id = d.id AND t.status = 'running' AND t.epoch = d.token AND t.claimed_at = d.claimed
               AND t.abort_requested = d.mark
             RETURNING t.id, t.epoch, t.claimed_at AS claimed, t.attempts, t.abort_requested AS mark),
       ins AS (INSERT INTO {s}.ratchet_steps (task_id, name, result, attempt, created_at)
               SELECT v.id, v.name, v.result, f.attempts, :now FROM v
               JOIN f ON f.id = v.id AND f.epoch = v.token AND f.claimed = v.claimed AND f.mark = v.mark
               ORDER BY v.ord ON CONFLICT (task_id, name) DO NOTHING RETURNING 1)
       SELECT id, epoch, claimed, mark FROM f`,
      {
        ids: items.map((w) => w.fence.taskId),
        tokens: items.map((w) => w.fence.token),
        claimed: items.map((w) => w.fence.claimedAt),
        names: items.map((w) => w.name),
        results: items.map((w) => w.result),
        marks: items.map((w) => markOf(w.fence)),
      },
    );
    // A fence is the id, the token, the claim's time and the mode (spec §3.7, §12.5): a run-mode
    // write of a marked task is refused even beside an abort-mode write of the same claim.
    const held = new Set(rows.map((r) => `${r.id}:${r.epoch}:${r.claimed}:${r.mark}`));
    const out: SettleResult[] = [];
    for (const w of items) {
      if (held.has(`${w.fence.taskId}:${w.fence.token}:${w.fence.claimedAt}:${markOf(w.fence)}`)) {
        out.push("ok");
        continue;
      }
      try {
        await core.refused(c, w.fence);
      } catch (e) {
        out.push(e instanceof AbortedError ? "abort_marked" : "lease_lost");
      }
    }
    return out;
  });
}

export async function heartbeat(
  core: PgCore,
  fence: Fence,
  maxMs: number,
  leaseGraceMs: number,
): Promise<void> {
  await core.tx(async (c) => {
    const rows = await core.run(
      c,
      `UPDATE ${T} SET lease_until = :now + :ms::bigint, updated_at = :now WHERE ${FENCE} AND abort_requested = :mark RETURNING id`,
      { ...fenceParams(fence), ms: maxMs + leaseGraceMs, mark: markOf(fence) },
    );
    if (!rows[0]) await core.refused(c, fence);
  });
}

export async function progress(
  core: PgCore,
  fence: Fence,
  fraction: number,
  note: string | null,
): Promise<void> {
  await core.tx(async (c) => {
    const rows = await core.run(
      c,
      `UPDATE ${T} SET progress = :p, progress_note = :note, updated_at = :now WHERE ${FENCE} AND abort_requested = :mark RETURNING id`,
      { ...fenceParams(fence), p: fraction, note, mark: markOf(fence) },
    );
    if (!rows[0]) await core.refused(c, fence);
  });
}

type Completion = Extract<Settlement, { kind: "complete" }>;
/** A run-mode completion: completeMany's statement writes it (with its facts, if any, after it). */
const isCompletion = (s: Settlement): s is Completion => s.kind === "complete" && s.fence.mode !== "abort";
/** A completion the one-statement path may write: no facts (spec §21.17: they need a transaction). */
const isPlain = (s: Settlement): s is Completion => isCompletion(s) && s.facts === undefined;

/**
 * A batch of run-mode completions (a worker's usual batch) is first written by one statement in its
 * own implicit transaction, which completes only the tasks with nothing more to do: no dependents
 * to release (spec §6.2), no owner or waiter to reconcile (spec §12.3–§12.4). One round trip with
 * its commit, where the transaction takes three (BEGIN, the statement, COMMIT): traced in an
 * in-process drain of 60,000 at c16, a settle batch of ~320 spent 1.2 ms in BEGIN and 2.2 ms in
 * COMMIT beside 6.9 ms in the statement, and the worker stopped claiming while its settle backlog
 * (spec §8.9) waited on them. What the statement did not apply (a task with more to do, a refused
 * fence, spec §3.7, a second completion of one claim) goes through the transaction, which finds
 * out which and does the rest atomically with the completion.
 */
export async function settle(core: PgCore, items: readonly Settlement[]): Promise<SettleResult[]> {
  if (items.length === 0) return [];
  if (!items.every(isPlain)) return settleInTx(core, items);
  const first = await core.autocommit((c) => completeMany(core, c, items, true));
  // The drain's batch: all applied, so no per-item key, object, lookup or sort (the same return in the
  // transaction measured 16.3 against 13.7 µs of Node CPU per task, `node dist/bench/drain.js`).
  if (first.all) return new Array<SettleResult>(items.length).fill("ok");
  // Not all applied: `rows` holds every applied one, and each serves one item.
  const results = new Array<SettleResult>(items.length);
  const rest: number[] = [];
  items.forEach((s, i) => {
    if (first.rows.delete(`${s.fence.taskId}:${s.fence.token}`)) results[i] = "ok";
    else rest.push(i);
  });
  const settled = await settleInTx(
    core,
    rest.map((i) => items[i]!),
  );
  rest.forEach((i, j) => {
    results[i] = settled[j]!;
  });
  return results;
}

async function settleInTx(core: PgCore, items: readonly Settlement[]): Promise<SettleResult[]> {
  return core.tx(async (c) => {
    const out: SettleResult[] = [];
    const deltas = new Map<string, number>();
    let wake = false;
    const results = new Array<SettleResult>(items.length);
    // Completions (the common case) are applied by one multi-row statement; what it
    // did not match, and every other kind, goes through #settleOne.
    const ended: TaskId[] = [];
    const completes = items.filter(isCompletion);
    const applied = await completeMany(core, c, completes, false);
    // Lock order by id keeps concurrent batches from deadlocking on each other.
    const order = items.map((s, i) => [s, i] as const).sort((a, b) => a[0].fence.taskId - b[0].fence.taskId);
    for (const [s, i] of order) {
      const key = `${s.fence.taskId}:${s.fence.token}`;
      const hit =
        s.kind !== "complete" || s.fence.mode === "abort"
          ? undefined
          : (applied.rows.get(key) ?? (applied.all ? NOTHING_MORE : undefined));
      if (hit) {
        // One row changed serves one item: a second completion of the same claim in the batch goes
        // through settleOne, which finds the task ended (lease_lost, as on SQLite), and the task's
        // dependents are released once (spec §3.7, §6.2).
        applied.rows.delete(key);
        results[i] = "ok";
        if (hit.tree) ended.push(s.fence.taskId);
        // Its live counter already dropped in completeMany's statement.
        if (hit.dependents > 0) wake = (await releaseDependents(core, c, s.fence.taskId)) || wake;
        continue;
      }
      const r = await settleOne(core, c, s, deltas, ended);
      results[i] = r.result;
      wake ||= r.wake;
    }
    out.push(...results);
    // spec §21.17: the opt-in facts of the settlements that applied, last (§21.3: the lock briefly).
    const facts = factsOfApplied(items, results);
    if (facts.length > 0) await core.inTx(c, appendFactsOfChanges(facts));
    await core.bumpLive(c, deltas);
    // Children and wait members that ended: their owners and waiters may move (spec §12.3–§12.4).
    if (ended.length > 0) await core.inTx(c, reconcile(ended));
    if (wake) await core.notify(c);
    return out;
  });
}

/** What settle still has to do for an applied completion: release dependents, reconcile a tree. */
interface MoreToDo {
  dependents: number;
  tree: boolean;
}
const NOTHING_MORE: MoreToDo = { dependents: 0, tree: false };

/**
 * Fenced completion of many tasks in one statement. `all`: every item applied (so no id repeats);
 * `rows`: the applied items the statement returned, keyed by id:token (two settlements of one task in
 * a batch are told apart by their fence), with what settle still has to do for them. When `all`, only
 * the items with more to do are in `rows`; otherwise every applied item is. `plain`: complete only
 * the tasks with nothing more to do (no dependents, no owner, not watched), for settle's statement
 * outside a transaction.
 */
export async function completeMany(
  core: PgCore,
  c: Client,
  items: readonly Completion[],
  plain: boolean,
): Promise<{ all: boolean; rows: Map<string, MoreToDo> }> {
  const out = new Map<string, MoreToDo>();
  if (items.length === 0) return { all: false, rows: out };
  const unique = sortedUnique(items);
  const rows = await core.run<{
    applied: number;
    id: number | null;
    token: number;
    dependents: number;
    tree: boolean;
  }>(
    c,
    // The live counters (spec §2.7) of the completed rows drop in the same statement: one round trip
    // fewer per settle batch. Upserts in queue order, like bumpLive, so batches cannot deadlock.
    //
    // No join with the arrays: each row finds its item by binary search, width_bucket over the ids
    // sorted and without repeats (its bucket in an array of distinct sorted bounds is its position).
    // As `UPDATE … FROM unnest(…)`, the planner, estimating one running row, chose a nested loop that
    // rescanned the whole array for every row: 516 completions took 84 ms (265,740 rows compared)
    // behind 200,000 future tasks, which made prefetch batches quadratic (W5 on PostgreSQL drained at
    // 0.4× its rate without them). array_position, the linear scan used before, compared each row
    // with half the batch, twice: in a drain of 150,000 tasks with batches of 500 its comparisons
    // were ~6 % of the server's CPU (perf). A repeated id keeps its first item here; the others go
    // through settleOne, which fences them on their own.
    //
    // The status test is a CASE so that the planner cannot answer it from the partial index of
    // running rows (ratchet_tasks_lease): with statistics taken while the tasks were pending, it
    // estimated one running row and scanned that whole index, testing each row's id against the
    // 500 ids one by one (`= ANY` of a parameter is not hashed), where the primary key finds the
    // 500 rows directly (auto_explain and EXPLAIN ANALYZE of the generic plan, 1,000 running rows:
    // 2.25 against 0.93 ms for the scan).
    //
    // The results travel as one text and each row takes its slice by byte offset: convert_to in an
    // init plan (once per statement), and substring of a bytea goes straight to its offset, where the
    // i-th element of a text[] is found by walking the i − 1 before it (variable-length elements), so
    // a batch of n paid O(n²) in the lookups. Claims and completions of 500 alone (`node dist/bench/pgshape.js --only
    // ratchet`, two builds alternating, three rounds): the completion 9.03–9.07 → 8.43–8.73 µs of
    // server time per task with the no-op's 4-byte results (a constant in place of the lookup: 7.6
    // against 8.35 before); the longer and more varied a batch's results, the more it saves.
    //
    // Rows come back only where settle has more to do: every applied row when some item was not
    // applied (settle must know which), else only those with dependents or in a tree; the first
    // row always carries the count. Returning all 500 rows of a batch cost ~4 µs per task in the
    // server's output and pg's parsing (bench: 36.4 against 32.2 µs per completed task, sequential).
    completeManySql(plain),
    {
      ids: unique.map((s) => s.fence.taskId),
      tokens: unique.map((s) => s.fence.token),
      claimed: unique.map((s) => s.fence.claimedAt),
      ...resultSlices(unique),
      shard: core.shard,
      total: items.length,
    },
  );
  for (const r of rows)
    if (r.id !== null) out.set(`${r.id}:${r.token}`, { dependents: r.dependents, tree: r.tree });
  // Every item applied (so no id repeats): the rows returned are the ones with more to do.
  return { all: rows[0]?.applied === items.length, rows: out };
}

/** completeMany's statement (exported for bench/claimshape.ts, which takes it apart). */
export function completeManySql(plain: boolean): string {
  return `WITH done AS (
     UPDATE ${T} t SET status = 'terminal', outcome = 'completed',
       result = convert_from(substring((SELECT convert_to(:results::text, 'UTF8'))
         FROM (:offsets::int[])[width_bucket(t.id, :ids::bigint[])]
         FOR (:lengths::int[])[width_bucket(t.id, :ids::bigint[])]), 'UTF8'), ended_at = :now,
       lease_until = NULL, locked_by = NULL, updated_at = :now
     WHERE t.id = ANY(:ids::bigint[]) AND CASE WHEN t.status = 'running' THEN true ELSE false END
       AND t.epoch = (:tokens::int[])[width_bucket(t.id, :ids::bigint[])]
       AND t.claimed_at = (:claimed::bigint[])[width_bucket(t.id, :ids::bigint[])]
       AND t.abort_requested = 0 AND t.owns = 0${plain ? PLAIN : ""}
     RETURNING t.id, t.epoch AS token, t.queue, t.dependents, (t.owner_id IS NOT NULL OR t.watched = 1) AS tree),
   counted AS (
     INSERT INTO {s}.ratchet_queue_counts (queue, shard, live)
     SELECT queue, :shard::int, -count(*) FROM done GROUP BY queue ORDER BY queue
     ON CONFLICT (queue, shard) DO UPDATE SET live = {s}.ratchet_queue_counts.live + excluded.live
     RETURNING 1),
   n AS MATERIALIZED (SELECT count(*)::int AS applied FROM done)
   SELECT n.applied, d.id, d.token, d.dependents, d.tree FROM n
   LEFT JOIN done d ON n.applied < :total::int OR d.dependents > 0 OR d.tree`;
}

/** The completions' results as one text and each one's 1-based byte offset and length in its UTF-8. */
export function resultSlices(items: readonly Completion[]): {
  results: string;
  offsets: number[];
  lengths: number[];
} {
  const offsets = new Array<number>(items.length);
  const lengths = new Array<number>(items.length);
  let results = "";
  let at = 1;
  // Buffer.byteLength without an encoding counts UTF-8 directly; with "utf8" it first looks the
  // encoding up (getEncodingOps), which V8 then compiled into this loop too.
  for (let i = 0; i < items.length; i++) {
    const r = items[i]!.result;
    const n = Buffer.byteLength(r);
    offsets[i] = at;
    lengths[i] = n;
    at += n;
    results += r;
  }
  return { results, offsets, lengths };
}

/** Completions with nothing more to do (settle's first statement): what MoreToDo would hold is empty. */
const PLAIN = " AND t.dependents = 0 AND t.owner_id IS NULL AND t.watched = 0";

/** The items by task id, ascending, each id once (its first item): the bounds width_bucket searches. */
export function sortedUnique<S extends Settlement>(items: readonly S[]): S[] {
  const sorted = [...items].sort((a, b) => a.fence.taskId - b.fence.taskId);
  return sorted.filter((s, i) => i === 0 || s.fence.taskId !== sorted[i - 1]!.fence.taskId);
}

export async function settleOne(
  core: PgCore,
  c: Client,
  s: Settlement,
  deltas: Map<string, number>,
  ended: TaskId[],
): Promise<{ result: SettleResult; wake: boolean }> {
  // Abort-mode invocations and interrupted runs with an abort handler follow the tree rules (spec §12.5).
  if (s.fence.mode === "abort" || (s.kind === "aborted" && s.handler))
    return { result: await core.inTx(c, settleTree(s)), wake: false };
  const p = fenceParams(s.fence);
  const guard = s.kind === "aborted" || s.kind === "release" ? "" : "AND abort_requested = 0";
  const end = "lease_until = NULL, locked_by = NULL, updated_at = :now";
  type Row = {
    queue: string;
    dependents: number;
    attempts: number;
    wake_at: number | null;
    owner_id: number | null;
    watched: number;
  };
  const ret = "RETURNING queue, dependents, attempts, wake_at, owner_id, watched";
  const why = async (): Promise<{ result: SettleResult; wake: boolean }> => {
    try {
      await core.refused(c, s.fence);
    } catch (e) {
      return { result: e instanceof AbortedError ? "abort_marked" : "lease_lost", wake: false };
    }
    return { result: "lease_lost", wake: false };
  };
  let row: Row | undefined;
  switch (s.kind) {
    case "complete":
      row = (
        await core.run<Row>(
          c,
          `UPDATE ${T} SET status = 'terminal', outcome = 'completed', result = :result, ended_at = :now, ${end}
        WHERE ${FENCE} ${guard} AND owns = 0 ${ret}`,
          { ...p, result: s.result },
        )
      )[0];
      break;
    case "retry":
      row = (
        await core.run<Row>(
          c,
          `UPDATE ${T} SET status = 'waiting', wake_at = :now + :delay::bigint, error = :error,
            attempts = attempts - :refund::int, ${end}
        WHERE ${FENCE} ${guard} RETURNING queue, dependents, attempts, wake_at`,
          { ...p, delay: Math.round(s.delayMs), error: JSON.stringify(s.error), refund: s.refund ? 1 : 0 },
        )
      )[0];
      if (!row) return why();
      await core.event(c, s.fence.taskId, s.refund ? "rate_limited" : "attempt_failed", row.attempts, {
        error: s.error,
        retryAt: row.wake_at,
      });
      return { result: "ok", wake: false };
    case "sleep":
      row = (
        await core.run<Row>(
          c,
          `UPDATE ${T} SET status = 'waiting', wake_at = :now + :delay::bigint, attempts = attempts - 1, ${end}
        WHERE ${FENCE} ${guard} RETURNING queue, dependents, attempts, wake_at`,
          { ...p, delay: Math.round(s.delayMs) },
        )
      )[0];
      if (!row) return why();
      await core.run(
        c,
        `INSERT INTO {s}.ratchet_steps (task_id, name, result, attempt, created_at) VALUES (:id, :name, :result, :attempt, :now)
        ON CONFLICT (task_id, name) DO NOTHING`,
        {
          id: s.fence.taskId,
          name: s.step,
          result: JSON.stringify({ until: row.wake_at }),
          attempt: row.attempts,
        },
      );
      return { result: "ok", wake: false };
    case "release":
      row = (
        await core.run<Row>(
          c,
          `UPDATE ${T} SET status = 'pending', attempts = attempts - 1, ${end}
        WHERE ${FENCE} RETURNING queue, dependents, attempts, wake_at`,
          p,
        )
      )[0];
      if (!row) return why();
      await core.event(c, s.fence.taskId, "released", row.attempts + 1, null);
      return { result: "ok", wake: true };
    case "fail":
    case "aborted": {
      const outcome = s.kind === "fail" ? s.outcome : "aborted";
      row = (
        await core.run<Row>(
          c,
          `UPDATE ${T} SET status = 'terminal', outcome = :outcome, error = :error, ended_at = :now, ${end}
        WHERE ${FENCE} ${guard} AND owns = 0 ${ret}`,
          { ...p, outcome, error: s.error ? JSON.stringify(s.error) : null },
        )
      )[0];
      if (row)
        await core.event(c, s.fence.taskId, outcome === "aborted" ? "aborted" : outcome, row.attempts, {
          error: s.error,
        });
      break;
    }
  }
  if (!row) {
    const owner = await core.run<{ owns: number }>(c, `SELECT owns FROM ${T} WHERE ${FENCE}`, p);
    if (owner[0]?.owns === 1) return { result: await core.inTx(c, settleTree(s)), wake: false };
    return why();
  }
  if (row.owner_id !== null || row.watched === 1) ended.push(s.fence.taskId);
  deltas.set(row.queue, (deltas.get(row.queue) ?? 0) - 1);
  let wake = false;
  if (row.dependents > 0) {
    if (s.kind === "complete") wake = await releaseDependents(core, c, s.fence.taskId);
    else await core.cascade(c, s.fence.taskId);
  }
  return { result: "ok", wake };
}

/** spec §6.2. Returns true when some dependent became pending. */
export async function releaseDependents(core: PgCore, c: Client, id: TaskId): Promise<boolean> {
  const rows = await core.run<{ status: string }>(
    c,
    `UPDATE ${T} t SET needs_pending = t.needs_pending - 1,
      status = CASE WHEN t.needs_pending = 1 THEN (CASE WHEN t.run_after <= :now THEN 'pending' ELSE 'waiting' END) ELSE t.status END,
      wake_at = CASE WHEN t.needs_pending = 1 AND t.run_after > :now THEN t.run_after ELSE t.wake_at END,
      updated_at = :now
    FROM (SELECT task_id FROM {s}.ratchet_deps WHERE needs_id = :id ORDER BY task_id) d
    WHERE t.id = d.task_id AND t.status = 'waiting' AND t.needs_pending > 0 RETURNING t.status`,
    { id },
  );
  return rows.some((r) => r.status === "pending");
}
