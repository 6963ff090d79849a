/**
 * Flow control inside the claim (spec §14.9–§14.13): seats (per-key
 * concurrency), token-bucket rate limits, and fair order between keys of a
 * queue. Written once as programs (see tree/program.ts) and run by both stores.
 *
 * A task whose seat is full or whose bucket is empty is not claimed: it parks
 * (`waiting`, wait_on 'seat' or 'rate') so the claim never looks at it again
 * until it can run. A seat parks without a timer and is woken when a task of
 * the same seat leaves `running` (a trigger on both stores, so no transition
 * can forget it) or by the sweep in maintenance; a bucket parks with a timer
 * at the time the bucket will have refilled.
 */
import {
  type BucketConfig,
  type BucketState,
  correct,
  decide,
  fullBucket,
  level,
  pause,
} from "../core/bucket.js";
import { AGING_STEP_MS } from "../core/priority.js";
import type { ClaimLimits, Gates, RateCharge, TaskId } from "./store.js";
import { one, type Program, q } from "./tree/program.js";

const T = "{s}.ratchet_tasks";
const B = "{s}.ratchet_buckets";
const SL = "{s}.ratchet_seat_limits";
const FAIR = "{s}.ratchet_fair";

/** Separates a group (or rate-limit name) from the key in a stored seat or bucket name. */
export const KEY_SEP = "\u001f";

/**
 * One transaction-scoped lock (PostgreSQL) serialises everything that decides on seats and buckets:
 * admission in a claim, the seat release trigger, wake-ups, pauses and usage reports. One lock, not
 * one per seat: per-seat locks taken in a settle batch's row order, or in a claim's successive
 * rounds, deadlocked against claims taking theirs sorted (hundreds of `deadlock detected` in the
 * four-process test, each a 1 s stall). A claim takes it only when it has gated rows, after its
 * bulk claim, and waits on no row lock while it holds it (SKIP LOCKED), so it cannot close a cycle.
 * The release trigger takes it too, so a task parked by a concurrent claim is seen.
 */
const GATES_LOCK = { op: "lock", key: "gates" } as const;

/** Most seats one maintenance pass looks at, and most waiters it wakes per seat. */
const SWEEP_SEATS = 100;
const SWEEP_WAKE = 1000;

/** "group" or "group:key" for people; the stored form uses KEY_SEP. */
export function keyLabel(stored: string): string {
  return stored.replace(KEY_SEP, ":");
}

export function groupOf(stored: string): string {
  const i = stored.indexOf(KEY_SEP);
  return i < 0 ? stored : stored.slice(0, i);
}

export interface GateColumns {
  id: TaskId;
  seat: string | null;
  rate: string | null;
}

export type Verdict = { ok: true } | { ok: false; on: "seat" | "rate"; until: number | null };

/** spec §14.9: the key's run-time limit, else its group's, else the limit in the claimer's code. */
export function* seatLimit(seat: string, limits: ClaimLimits | undefined): Program<number | null> {
  const group = groupOf(seat);
  const rows = yield* q<{ seat: string; lim: number }>(`SELECT seat, lim FROM ${SL} WHERE seat IN (:a, :b)`, {
    a: seat,
    b: group,
  });
  const own = rows.find((r) => r.seat === seat) ?? rows.find((r) => r.seat === group);
  if (own) return Number(own.lim);
  return limits?.seats[group] ?? null;
}

export function* seatHolders(seat: string, limit: number): Program<TaskId[]> {
  const rows = yield* q<{ id: number }>(
    `SELECT id FROM ${T} WHERE seat = :seat AND status = 'running' ORDER BY id LIMIT :n`,
    { seat, n: Math.max(1, Math.min(limit, 50)) },
  );
  return rows.map((r) => Number(r.id));
}

function* saveBucket(bucket: string, s: BucketState, cfg: BucketConfig): Program<void> {
  yield* q(
    `INSERT INTO ${B} (bucket, tokens, at, next_wake, paused_until, lim, period_ms, burst)
     VALUES (:b, CAST(:tokens AS double precision), CAST(:at AS bigint), CAST(:nw AS bigint), CAST(:pu AS bigint),
       CAST(:lim AS double precision), CAST(:period AS bigint), CAST(:burst AS double precision))
     ON CONFLICT (bucket) DO UPDATE SET tokens = excluded.tokens, at = excluded.at, next_wake = excluded.next_wake,
       paused_until = excluded.paused_until, lim = excluded.lim, period_ms = excluded.period_ms, burst = excluded.burst`,
    {
      b: bucket,
      tokens: s.tokens,
      at: Math.round(s.at),
      nw: Math.round(s.nextWake),
      pu: Math.round(s.pausedUntil),
      lim: cfg.limit,
      period: cfg.periodMs,
      burst: cfg.burst,
    },
  );
}

export function parseCharges(rate: string | null): RateCharge[] {
  if (rate === null) return [];
  return JSON.parse(rate) as RateCharge[];
}

/**
 * Which of these candidates may start now (spec §14.9, §14.10)? Rows are
 * decided in the order given (claim order). `claimed`: the rows are already
 * marked running in this transaction (PostgreSQL claims in bulk and checks
 * after; a reclaimed row is running too), so they do not count as holding
 * their seats until admitted here. Admitted rows take their rate tokens.
 * A few statements per batch, not per row: the limits in force, the seat and
 * bucket locks (PostgreSQL, sorted), the running count per seat, the buckets.
 */
export function* admitBatch(
  rows: readonly GateColumns[],
  limits: ClaimLimits | undefined,
  now: number,
  claimed: boolean,
): Program<Map<TaskId, Verdict>> {
  const out = new Map<TaskId, Verdict>();
  const seats = [...new Set(rows.map((r) => r.seat).filter((x): x is string => x !== null))];
  const charges = new Map(rows.map((r) => [r.id, parseCharges(r.rate)]));
  const bucketNames = [...new Set([...charges.values()].flat().map((c) => c.bucket))].filter(
    (b) => limits?.rates[groupOf(b)] !== undefined, // a limit this claimer's code does not know is not enforced by it
  );
  // The flow-control lock (PostgreSQL), then one read gives the run-time limits, the running count per
  // seat and the buckets: two statements per claim whatever the batch size.
  yield GATES_LOCK;
  const names = [...new Set([...seats, ...seats.map(groupOf)])];
  const read = yield* q<{
    kind: string;
    key: string;
    a: number;
    b: number | null;
    c: number | null;
    d: number | null;
  }>(admitRead(claimed), {
    names: seats.length > 0 ? names : [],
    seats,
    buckets: bucketNames,
    ...(claimed ? { batch: rows.map((r) => r.id) } : {}),
  });
  const over = new Map<string, number>();
  const used = new Map<string, number>();
  const stored = new Map<string, BucketState>();
  for (const r of read) {
    if (r.kind === "limit") over.set(r.key, Number(r.a));
    else if (r.kind === "running") used.set(r.key, Number(r.a));
    else
      stored.set(r.key, {
        tokens: Number(r.a),
        at: Number(r.b),
        nextWake: Number(r.c),
        pausedUntil: Number(r.d),
      });
  }
  // spec §14.9: the key's run-time limit, else its group's, else the limit in this claimer's code.
  const lim = new Map<string, number | null>(
    seats.map((x) => [x, over.get(x) ?? over.get(groupOf(x)) ?? limits?.seats[groupOf(x)] ?? null]),
  );
  const states = new Map<string, { state: BucketState; cfg: BucketConfig; dirty: boolean }>();
  for (const b of bucketNames) {
    const cfg = limits!.rates[groupOf(b)]!;
    states.set(b, { state: stored.get(b) ?? fullBucket(cfg, now), cfg, dirty: false });
  }
  for (const r of rows) {
    const cap = r.seat === null ? null : (lim.get(r.seat) ?? null);
    if (cap !== null && (used.get(r.seat!) ?? 0) + 1 > cap) {
      out.set(r.id, { ok: false, on: "seat", until: null });
      continue;
    }
    const mine = charges.get(r.id)!.filter((c) => states.has(c.bucket));
    if (mine.length > 0) {
      const items = mine.map((c) => ({ ...states.get(c.bucket)!, cost: c.cost }));
      const d = decide(items, now);
      mine.forEach((c, i) => {
        states.set(c.bucket, { state: d.states[i]!, cfg: items[i]!.cfg, dirty: true });
      });
      if (!d.ok) {
        out.set(r.id, { ok: false, on: "rate", until: d.until });
        continue;
      }
    }
    if (cap !== null) used.set(r.seat!, (used.get(r.seat!) ?? 0) + 1);
    out.set(r.id, { ok: true });
  }
  for (const [b, v] of states) if (v.dirty) yield* saveBucket(b, v.state, v.cfg);
  return out;
}

/**
 * Admission's one read (spec §14.9, §14.10): run-time limits by primary key, running tasks per seat
 * through ratchet_tasks_seat (running rows only), buckets by primary key. Never a scan.
 */
export function admitRead(claimed: boolean): string {
  return `SELECT 'limit' AS kind, seat AS key, CAST(lim AS double precision) AS a, CAST(NULL AS double precision) AS b,
       CAST(NULL AS double precision) AS c, CAST(NULL AS double precision) AS d
     FROM ${SL} WHERE seat IN @texts(names)
     UNION ALL
     SELECT 'running', seat, CAST(count(*) AS double precision), NULL, NULL, NULL
     FROM ${T} WHERE seat IN @texts(seats) AND status = 'running' ${claimed ? "AND id NOT IN @ids(batch)" : ""}
     GROUP BY seat
     UNION ALL
     SELECT 'bucket', bucket, tokens, CAST(at AS double precision), CAST(next_wake AS double precision),
       CAST(paused_until AS double precision)
     FROM ${B} WHERE bucket IN @texts(buckets)`;
}

/**
 * The first tasks parked on a seat (also the release trigger's query): index ratchet_tasks_seat_parked.
 * SKIP LOCKED on PostgreSQL: a row a claimer holds (woken and claimed since this statement's snapshot)
 * is passed over instead of waited for; waiting on it while holding the flow-control lock deadlocked.
 */
export const FIRST_PARKED = `SELECT id FROM ${T} WHERE seat = :seat AND status = 'waiting' AND wait_on = 'seat'
  ORDER BY order_key, id LIMIT :n @skip`;

/** A pending candidate that may not start parks (SQLite checks before claiming). */
export function* parkPending(id: TaskId, v: Exclude<Verdict, { ok: true }>): Program<void> {
  yield* q(
    `UPDATE ${T} SET status = 'waiting', wait_on = :on, wake_at = CAST(:until AS bigint), updated_at = :now
     WHERE id = :id AND status = 'pending'`,
    { id, on: v.on, until: v.until },
  );
}

/**
 * A row claimed in this transaction that may not start parks again as if never
 * claimed (PostgreSQL checks after its bulk claim): attempts and times restored.
 */
export function* parkClaimed(
  id: TaskId,
  v: Exclude<Verdict, { ok: true }>,
  prevStarted: number | null,
  prevClaimed: number | null,
): Program<void> {
  yield* q(
    `UPDATE ${T} SET status = 'waiting', wait_on = :on, wake_at = CAST(:until AS bigint), attempts = attempts - 1,
       lease_until = NULL, locked_by = NULL, started_at = CAST(:ps AS bigint), claimed_at = CAST(:pc AS bigint), updated_at = :now
     WHERE id = :id AND status = 'running'`,
    { id, on: v.on, until: v.until, ps: prevStarted, pc: prevClaimed },
  );
}

/** Wakes up to n tasks parked on a seat, first in claim order. */
export function* wakeSeat(seat: string, n: number): Program<number> {
  yield GATES_LOCK;
  // The outer condition is checked again on the locked row: the task may have been woken and
  // claimed since the subquery read it (a running task set back to pending ran twice).
  const rows = yield* q(
    `UPDATE ${T} SET status = 'pending', wait_on = NULL, updated_at = :now
     WHERE id IN (${FIRST_PARKED}) AND status = 'waiting' AND wait_on = 'seat' RETURNING id`,
    { seat, n },
  );
  if (rows.length > 0) yield { op: "notify" };
  return rows.length;
}

/**
 * The safety net behind the release trigger (spec §14.9): seats with parked
 * tasks and free places wake as many as are free. Bounded per pass.
 */
export function* sweepSeats(
  limits: ClaimLimits | undefined,
  from = "",
): Program<{ woken: number; next: string }> {
  // Distinct seats with parked tasks, one index seek each, from where the last pass stopped.
  const seats: string[] = [];
  let after = from;
  while (seats.length < SWEEP_SEATS) {
    const row = yield* one<{ seat: string | null }>(
      `SELECT min(seat) AS seat FROM ${T} WHERE status = 'waiting' AND wait_on = 'seat' AND seat > :after`,
      { after },
    );
    if (!row?.seat) break;
    seats.push(row.seat);
    after = row.seat;
  }
  let woken = 0;
  for (const seat of seats) {
    const lim = yield* seatLimit(seat, limits);
    const row = yield* one<{ n: number }>(
      `SELECT count(*) AS n FROM ${T} WHERE seat = :seat AND status = 'running'`,
      { seat },
    );
    // Tasks of the seat already pending are not counted (no index finds them cheaply): a wake too
    // many parks again at its claim.
    const free = lim === null ? SWEEP_WAKE : lim - Number(row?.n ?? 0);
    if (free > 0) woken += yield* wakeSeat(seat, Math.min(free, SWEEP_WAKE));
  }
  // A full pass resumes after its last seat; a short one wrapped around, so the next starts over.
  return { woken, next: seats.length < SWEEP_SEATS ? "" : seats[seats.length - 1]! };
}

/** spec §14.9: a run-time limit for a group or one key; null removes it. Wakes parked tasks that now fit. */
export function* setSeatLimit(seat: string, limit: number | null): Program<number> {
  if (limit === null) yield* q(`DELETE FROM ${SL} WHERE seat = :seat`, { seat });
  else
    yield* q(
      `INSERT INTO ${SL} (seat, lim, updated_at) VALUES (:seat, :lim, :now)
       ON CONFLICT (seat) DO UPDATE SET lim = excluded.lim, updated_at = excluded.updated_at`,
      { seat, lim: limit },
    );
  // The seats this limit governs: the key itself, or every key of the group.
  const rows = yield* q<{ seat: string }>(
    `SELECT DISTINCT seat FROM ${T} WHERE status = 'waiting' AND wait_on = 'seat'
       AND (seat = :seat OR (seat >= :lo AND seat < :hi)) LIMIT ${SWEEP_SEATS}`,
    { seat, lo: `${seat}${KEY_SEP}`, hi: `${seat}\u0020` },
  );
  let woken = 0;
  for (const r of rows) woken += yield* wakeSeat(r.seat, Math.min(limit ?? SWEEP_WAKE, SWEEP_WAKE));
  return woken;
}

export function* seatLimits(): Program<{ seat: string; limit: number }[]> {
  const rows = yield* q<{ seat: string; lim: number }>(`SELECT seat, lim FROM ${SL} ORDER BY seat`);
  return rows.map((r) => ({ seat: r.seat, limit: Number(r.lim) }));
}

function* storedBucket(bucket: string): Program<{ state: BucketState; cfg: BucketConfig } | null> {
  const row = yield* one<{
    tokens: number;
    at: number;
    next_wake: number;
    paused_until: number;
    lim: number;
    period_ms: number;
    burst: number;
  }>(`SELECT * FROM ${B} WHERE bucket = :b`, { b: bucket });
  if (!row) return null;
  return {
    state: {
      tokens: Number(row.tokens),
      at: Number(row.at),
      nextWake: Number(row.next_wake),
      pausedUntil: Number(row.paused_until),
    },
    cfg: { limit: Number(row.lim), periodMs: Number(row.period_ms), burst: Number(row.burst) },
  };
}

/**
 * spec §14.11: a provider's 429 pauses every bucket the task is charged to
 * (or the named ones) for all workers until now + ms.
 */
export function* pauseBuckets(id: TaskId, ms: number, only: string | null): Program<string[]> {
  const row = yield* one<{ rate: string | null }>(`SELECT rate FROM ${T} WHERE id = :id`, { id });
  const paused: string[] = [];
  const nowRow = yield* one<{ now: number }>("SELECT CAST(:now AS bigint) AS now");
  const now = Number(nowRow!.now);
  for (const ch of parseCharges(row?.rate ?? null)) {
    if (only !== null && groupOf(ch.bucket) !== only) continue;
    yield GATES_LOCK;
    const b = yield* storedBucket(ch.bucket);
    if (!b) continue;
    yield* saveBucket(ch.bucket, pause(b.state, b.cfg, now, now + ms), b.cfg);
    paused.push(ch.bucket);
  }
  return paused;
}

/**
 * spec §14.10: the actual usage of a started task replaces the estimate it was
 * charged. `usage` maps a unit ("tokens") to the amount; a charge with that
 * unit is corrected. Returns the corrections made.
 */
export function* reportUsage(
  id: TaskId,
  usage: Readonly<Record<string, number>>,
): Program<{ bucket: string; charged: number; actual: number }[]> {
  const row = yield* one<{ rate: string | null }>(`SELECT rate FROM ${T} WHERE id = :id`, { id });
  const nowRow = yield* one<{ now: number }>("SELECT CAST(:now AS bigint) AS now");
  const now = Number(nowRow!.now);
  const out: { bucket: string; charged: number; actual: number }[] = [];
  for (const ch of parseCharges(row?.rate ?? null)) {
    const actual = ch.unit === undefined ? undefined : usage[ch.unit];
    if (actual === undefined) continue;
    yield GATES_LOCK;
    const b = yield* storedBucket(ch.bucket);
    if (!b) continue;
    yield* saveBucket(ch.bucket, correct(b.state, b.cfg, now, actual - ch.cost), b.cfg);
    out.push({ bucket: ch.bucket, charged: ch.cost, actual });
  }
  return out;
}

export function* bucketsOf(
  rate: string | null,
): Program<{ bucket: string; state: BucketState; cfg: BucketConfig }[]> {
  const out: { bucket: string; state: BucketState; cfg: BucketConfig }[] = [];
  for (const ch of parseCharges(rate)) {
    const b = yield* storedBucket(ch.bucket);
    if (b) out.push({ bucket: ch.bucket, ...b });
  }
  return out;
}

/**
 * spec §14.12: the start tag of a fair task. Each key's tag advances by
 * stepMs / weight per task and never lags the clock, so a key with a burst
 * queues behind its own backlog while a newly active key starts at "now".
 */
export function* fairTag(queue: string, key: string, stepMs: number): Program<number> {
  const row = yield* one<{ next_at: number | null; now: number }>(
    `SELECT (SELECT next_at FROM ${FAIR} WHERE queue = :queue AND key = :key) AS next_at, CAST(:now AS bigint) AS now`,
    { queue, key },
  );
  const now = Number(row!.now);
  const start = Math.max(now, Number(row?.next_at ?? now));
  yield* q(
    `INSERT INTO ${FAIR} (queue, key, next_at) VALUES (:queue, :key, CAST(:next AS bigint))
     ON CONFLICT (queue, key) DO UPDATE SET next_at = excluded.next_at`,
    { queue, key, next: Math.ceil(start + stepMs) },
  );
  return start;
}

/** Maintenance of flow control: stale fairness tags, then one bounded sweep of seats from `from`. */
export function* maintainGates(limits: ClaimLimits, from: string): Program<{ woken: number; next: string }> {
  yield* pruneFair();
  return yield* sweepSeats(limits, from);
}

/** Fair keys whose tag the clock passed carry no state; dropped in maintenance. */
export function* pruneFair(): Program<number> {
  const rows = yield* q(
    `DELETE FROM ${FAIR} WHERE (queue, key) IN (SELECT queue, key FROM ${FAIR} WHERE next_at < :now LIMIT 1000) RETURNING key`,
  );
  return rows.length;
}

/** What explain needs about a task's seat and buckets. */
export function* gateExplain(seat: string | null, rate: string | null, now: number) {
  let holders: TaskId[] = [];
  let seatOverride: number | null = null;
  if (seat !== null) {
    seatOverride = yield* seatLimit(seat, undefined);
    holders = yield* seatHolders(seat, 50);
  }
  const buckets = (yield* bucketsOf(rate)).map((b) => ({
    bucket: b.bucket,
    level: level(b.state, b.cfg, now),
    pausedUntil: b.state.pausedUntil,
    limit: b.cfg.limit,
    periodMs: b.cfg.periodMs,
  }));
  return { seatHolders: holders, seatOverride, buckets };
}

/** Stores a new task's flow-control columns (spec §14.9–§14.12); fairness replaces its order key. */
export function* applyGates(id: TaskId, queue: string, priority: number, g: Gates): Program<void> {
  const tag = g.fair ? yield* fairTag(queue, g.fair.key, g.fair.stepMs) : null;
  yield* q(
    `UPDATE ${T} SET seat = :seat, rate = :rate, fair_key = :fk,
       order_key = CASE WHEN CAST(:tag AS bigint) IS NULL THEN order_key ELSE CAST(:tag AS bigint) - CAST(:prio AS bigint) * ${AGING_STEP_MS} END
     WHERE id = :id`,
    {
      id,
      seat: g.seat,
      rate: g.rate ? JSON.stringify(g.rate) : null,
      fk: g.fair?.key ?? null,
      tag,
      prio: priority,
    },
  );
}
