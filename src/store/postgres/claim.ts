/** Claims (spec §3): promotion of due timers, reclaim of expired leases (or failure past maxAttempts), batch claims with SKIP LOCKED. */
import { deadHolderEnd, decideReclaim } from "../../core/backoff.js";
import { fromJson } from "../../core/json.js";
import { admitBatch, parkClaimed } from "../gates.js";
import { type ClaimRow, type TaskRow, toClaimed, toRecord } from "../rows.js";
import type { ClaimedTask, ClaimRequest, RateCharge, TaskId, TaskRecord } from "../store.js";
import { finish, parkForDrain, reconcile } from "../tree/ops.js";
import type { Client, PgCore } from "./core.js";
import {
  CLAIM_ONE,
  CLAIMED_LONG,
  claimFast,
  claimPending,
  LIST_READY,
  PROMOTE_AND_EXPIRED,
  SMALL_CLAIM,
  T,
} from "./sql.js";

export async function claim(core: PgCore, req: ClaimRequest): Promise<ClaimedTask[]> {
  if (req.limit <= 0 || req.names.length === 0 || req.queues.length === 0) return [];
  if (req.queues.length > 1) return fullClaim(core, req);
  // One queue: the claim in one round trip when nothing needs the transaction (see claimFast).
  // Two forms: the small one (up to SMALL_CLAIM) claims one task in ~0.6 ms, the latency of every
  // enqueue to an idle worker; the large one (by ctid) in ~1.2 ms, but it refills a prefetching
  // worker's 500 in one statement. An idle worker that prefetches asks for hundreds and finds one, so
  // the form follows what the last claim of the queue found: a queue with a backlog gets the large
  // one; otherwise the small one, and only if it comes back full the large one for the rest. Always
  // the large form put W3's p99 on PostgreSQL at 5.4 ms against graphile-worker's 3.9; always the
  // small one first, then the full claim, made a refill of 500 take ~12 ms while the 250 tasks left
  // in the buffer ran in ~7, and the drain waited on its refills. A queue this store has not claimed
  // from yet takes the large form: a worker that starts with a backlog (a deploy, a restart, the
  // peers harness's W2) then makes one claim before its first handler where it made two (the small
  // one, then the large one for the rest), and its new connection plans one statement fewer; an
  // idle one pays the large form's ~0.6 ms more once.
  const queue = req.queues[0]!;
  const large = req.limit > SMALL_CLAIM && !core.short.has(queue);
  const first = large ? req.limit : Math.min(req.limit, SMALL_CLAIM);
  const rows = await core.read((c) =>
    core.run<FastRow>(c, claimFast(first), {
      grace: req.leaseGraceMs,
      worker: req.workerId,
      queue,
      queues: req.queues,
      names: req.names,
      limit: first,
    }),
  );
  const head = rows[0]!;
  // Nothing was claimed (the statement's update did not run): the full claim does it all.
  if (head.full) return fullClaim(core, req);
  const out = head.rows === null ? [] : await claimedFrom(core, head, queue, req);
  // A full small claim goes on with the large form for the rest.
  const more = !large && out.length === first && req.limit > first;
  if (more || out.length > SMALL_CLAIM) core.short.delete(queue);
  else core.short.add(queue);
  if (more) out.push(...(await claim(core, { ...req, limit: req.limit - first })));
  return out;
}

/** The one row of a fast claim (sql.ts FAST_SELECT). */
interface FastRow {
  full: true | null;
  claim_now: number;
  /** The claimed tasks as a JSON array of ClaimTuple, in claim order; NULL when none. */
  rows: string | null;
}

/** A claimed task in a fast claim's text (sql.ts claimRowText). */
type ClaimTuple = [
  id: number,
  name: string,
  version: number,
  /** null when not inline (rare is 0). */
  input: unknown,
  priority: number,
  maxMs: number,
  attempts: number,
  epoch: number,
  abortRequested: number,
  startedAt: number,
  rare: Rare | null | 0,
];
type Rare = [
  job: string | null,
  ownerId: number | null,
  scope: string | null,
  checkpoint: string | null,
  seat: string | null,
  rate: string | null,
];

/**
 * The ClaimedTasks of a fast claim's text: what it leaves out follows from the claim (spec §3.2).
 * Built by push: the driver's loops over claims meet one kind of array (one from map has another
 * map in V8, and meeting both deoptimized them in a fresh worker).
 */
async function claimedFrom(core: PgCore, head: FastRow, queue: string, req: ClaimRequest) {
  const tuples = JSON.parse(head.rows!) as ClaimTuple[];
  const notInline = tuples.filter((t) => t[10] === 0);
  const apart = notInline.length === 0 ? undefined : await readLong(core, notInline);
  const out: ClaimedTask[] = [];
  for (const t of tuples) {
    const read = t[10] === 0 ? apart!.get(t[0])! : undefined;
    const rare = read ? read.rare : (t[10] as Rare | null);
    out.push({
      id: t[0],
      queue,
      name: t[1],
      version: t[2],
      input: read ? read.input : t[3],
      status: "running",
      priority: t[4],
      maxMs: t[5],
      attempts: t[6],
      epoch: t[7],
      leaseUntil: head.claim_now + t[5] + req.leaseGraceMs,
      lockedBy: req.workerId,
      job: rare ? rare[0] : null,
      abortRequested: t[8] === 1,
      startedAt: t[9],
      claimedAt: head.claim_now,
      ownerId: rare ? rare[1] : null,
      scope: rare ? rare[2] : null,
      checkpoint: rare ? fromJson(rare[3]) : null,
      seat: rare ? rare[4] : null,
      rate: rare?.[5] ? fromJson<RateCharge[]>(rare[5]) : null,
      reclaimed: false,
      // Only claims raise the epoch: 1 means no holder came before this one, so no steps are stored
      // (a task a seat or rate limit parked after an earlier claim is not counted fresh, which costs
      // it one read of its steps; those never take this path anyway, see claimFast).
      fresh: t[7] === 1,
    });
  }
  return out;
}

/**
 * The inputs and rare columns a fast claim left out (too long for its text, see sql.ts
 * claimRowText), read by id: the tasks are this claim's, and only their holder changes those.
 */
async function readLong(core: PgCore, long: readonly ClaimTuple[]) {
  const rows = await core.read((c) =>
    core.run<{ id: number; input: string; rare: string | null }>(c, CLAIMED_LONG, {
      ids: long.map((t) => t[0]),
    }),
  );
  const out = new Map<number, { input: unknown; rare: Rare | null }>();
  for (const r of rows) out.set(r.id, { input: fromJson(r.input), rare: fromJson<Rare | null>(r.rare) });
  return out;
}

/** spec §3.1–§3.4, §3.6, §5.4, §14.9–§14.10: promotion, reclaims and gated claims in one transaction. */
async function fullClaim(core: PgCore, req: ClaimRequest): Promise<ClaimedTask[]> {
  if (req.limit <= 0) return [];
  return core.tx(async (c) => {
    const base = { grace: req.leaseGraceMs, worker: req.workerId };
    const out: ClaimedTask[] = [];
    const lost: Map<string, number> = new Map();
    const expired = await core.run<{
      id: number;
      locked_by: string | null;
      lease_until: number;
      attempts: number;
      max_attempts: number;
      abort_requested: number;
      owns: number;
    }>(c, PROMOTE_AND_EXPIRED, {
      names: req.names,
      queues: req.queues,
      limit: req.limit,
    });
    for (const e of expired) {
      // A marked holder died: its abort handler waits until its owned work drained (spec §12.5).
      if (e.abort_requested === 1 && e.owns === 1 && (await core.inTx(c, parkForDrain(e.id, e.locked_by))))
        continue;
      if (decideReclaim(e.attempts, e.max_attempts) === "fail") {
        const q = await failDeadHolder(core, c, e.id, e.attempts, e.locked_by, e.abort_requested === 1);
        if (q) lost.set(q, (lost.get(q) ?? 0) - 1);
        continue;
      }
      const rows = await core.run<ClaimRow>(c, CLAIM_ONE, { ...base, id: e.id });
      const r = rows[0];
      if (!r) continue;
      await core.event(c, e.id, "reclaimed", r.attempts, {
        previousHolder: e.locked_by,
        leaseUntil: e.lease_until,
      });
      if (r.seat !== null || r.rate !== null) {
        // A reclaim is a new start: it pays its rate limits like any other (spec §14.10).
        const now = await core.nowIn(c);
        const v = (await core.inTx(c, admitBatch([r], req.limits, now, true))).get(r.id)!;
        if (!v.ok) {
          await core.inTx(c, parkClaimed(r.id, v, r.started_at, r.claimed_at));
          continue;
        }
      }
      out.push(toClaimed(r, true));
    }
    const start = core.rr++ % req.queues.length;
    for (let i = 0; i < req.queues.length && out.length < req.limit; i++) {
      const queue = req.queues[(start + i) % req.queues.length]!;
      // Claimed rows that may not start park again (spec §14.9, §14.10); a few more rounds fill the slots.
      for (let round = 0; round < GATE_ROUNDS && out.length < req.limit; round++) {
        const want = req.limit - out.length;
        const rows = await core.run<ClaimedRow>(c, claimPending(want), {
          ...base,
          queue,
          names: req.names,
          limit: want,
        });
        rows.sort((a, b) => a.order_key - b.order_key || a.id - b.id);
        const parked = await gate(core, c, rows, req);
        // The small form returns every row's started_at from before the claim, the large one a fresh flag.
        for (const r of rows)
          if (!parked.has(r.id)) out.push(toClaimed(r, false, r.fresh ?? r.prev_started === null));
        if (parked.size === 0 || rows.length < want) break;
      }
    }
    await core.bumpLive(c, lost);
    return out;
  });
}

const GATE_ROUNDS = 8;

type ClaimedRow = ClaimRow & {
  prev_started: number | null;
  prev_claimed: number | null;
  claim_now: number;
  /** The large form only (see claimPending). */
  fresh?: boolean;
};

/**
 * Seats and rate limits of rows just claimed (spec §14.9, §14.10). The locks of
 * every seat and bucket involved are taken first, in one order, so claimers
 * that share several keys cannot deadlock; then rows are admitted in claim order.
 * Returns the ids parked.
 */
async function gate(core: PgCore, c: Client, rows: readonly ClaimedRow[], req: ClaimRequest) {
  const parked = new Set<number>();
  const gated = rows.filter((r) => r.seat !== null || r.rate !== null);
  if (gated.length === 0) return parked;
  const verdicts = await core.inTx(c, admitBatch(gated, req.limits, gated[0]!.claim_now, true));
  const back = gated.filter((r) => !verdicts.get(r.id)!.ok);
  if (back.length === 0) return parked;
  // Parked again as if never claimed, in one statement: attempts and claim times restored.
  const why = (r: ClaimedRow) => verdicts.get(r.id) as { on: string; until: number | null };
  await core.run(
    c,
    `UPDATE ${T} t SET status = 'waiting', wait_on = v.w_on, wake_at = v.w_until, attempts = t.attempts - 1,
       lease_until = NULL, locked_by = NULL, started_at = v.ps, claimed_at = v.pc, updated_at = :now
     FROM (SELECT unnest(CAST(:ids AS bigint[])) AS id, unnest(CAST(:ons AS text[])) AS w_on,
                  unnest(CAST(:untils AS bigint[])) AS w_until, unnest(CAST(:pss AS bigint[])) AS ps,
                  unnest(CAST(:pcs AS bigint[])) AS pc) v
     WHERE t.id = v.id AND t.status = 'running'`,
    {
      ids: back.map((r) => r.id),
      ons: back.map((r) => why(r).on),
      untils: back.map((r) => why(r).until),
      pss: back.map((r) => r.prev_started),
      pcs: back.map((r) => r.prev_claimed),
    },
  );
  for (const r of back) parked.add(r.id);
  return parked;
}

/**
 * spec §5.4, §7.2: `failed` (AttemptsExhausted), or `aborted` for a task with an abort mark (see the
 * SQLite store's failDeadHolder). Returns the queue of the ended task (its live count drops).
 */
export async function failDeadHolder(
  core: PgCore,
  c: Client,
  id: TaskId,
  attempts: number,
  holder: string | null,
  marked: boolean,
): Promise<string | null> {
  const { outcome, error } = deadHolderEnd(attempts, holder, marked);
  const rows = await core.run<{ queue: string; dependents: number; tree: boolean }>(
    c,
    `UPDATE ${T} SET status = 'terminal', outcome = :outcome::text,
      error = :error, ended_at = :now, lease_until = NULL, locked_by = NULL, updated_at = :now
    WHERE id = :id AND status = 'running' AND lease_until <= :now AND owns = 0
    RETURNING queue, dependents, (owner_id IS NOT NULL OR watched = 1) AS tree`,
    { id, outcome, error: JSON.stringify(error) },
  );
  const row = rows[0];
  if (!row) {
    // A task that owns children holds its failure until they drained (spec §12.4).
    const owner = await core.run<{ owns: number }>(
      c,
      `SELECT owns FROM ${T} WHERE id = :id AND status = 'running' AND lease_until <= :now`,
      { id },
    );
    if (owner[0]?.owns === 1) {
      await core.inTx(c, finish(id, outcome, null, error, attempts));
      await core.inTx(c, reconcile([id]));
    }
    return null;
  }
  await core.event(c, id, outcome, attempts, { error });
  if (row.dependents > 0) await core.cascade(c, id);
  if (row.tree) await core.inTx(c, reconcile([id]));
  return row.queue;
}

export async function listReady(core: PgCore, queue: string, limit: number): Promise<TaskRecord[]> {
  return core.read(async (c) => (await core.run<TaskRow>(c, LIST_READY, { queue, limit })).map(toRecord));
}
