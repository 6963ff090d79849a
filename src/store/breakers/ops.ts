/**
 * Circuit breakers in the store (spec §18.6), written once for both stores as programs (see
 * ../tree/program.ts). One row per breaker key (a provider+model); a missing row is a closed
 * breaker with no failures, so a healthy route costs one read per request and no write.
 *
 * The transitions are src/core/breaker.ts's; these programs read the row under the key's lock,
 * ask `decideBreaker`, and apply its decision in the same transaction.
 *
 * Invariant: the half-open probe is claimed by a conditional write on the state that was read, so
 * among any number of workers and processes exactly one request is admitted per probe claim
 * (spec §18.6); a report from a request that was not the probe never moves a half_open breaker.
 */
import {
  type BreakerConfig,
  type BreakerMode,
  type BreakerState,
  CLOSED,
  checkBreakerConfig,
  decideBreaker,
} from "../../core/breaker.js";
import { ValidationError } from "../../errors.js";
import { one, type Program, q } from "../tree/program.js";

const B = "{s}.ratchet_breakers";

/** Longest breaker key (provider + "/" + model). */
export const MAX_BREAKER_KEY = 512;
/** Breakers one list returns at most. */
export const MAX_BREAKERS_LISTED = 1_000;

export type BreakerAdmission = { admit: true; probe: boolean } | { admit: false; until: number };

export interface BreakerRecord extends BreakerState {
  key: string;
  updatedAt: number;
}

/** The breaker operations of the Store contract (spec §18.6). */
export interface BreakerOps {
  /** May a request go to `key` now? Claims the probe when the cool-down has passed. */
  admitBreaker(key: string, config: BreakerConfig): Promise<BreakerAdmission>;
  /** A request's outcome: `ok` false counts a failure; `probe` says it was the admitted probe. */
  reportBreaker(key: string, ok: boolean, probe: boolean, config: BreakerConfig): Promise<BreakerRecord>;
  /** Breakers with a row (every one that ever failed), by key. */
  listBreakers(limit?: number): Promise<BreakerRecord[]>;
  /** Forgets a breaker (it reads as closed); true when there was one. */
  resetBreaker(key: string): Promise<boolean>;
}

interface Row {
  key: string;
  state: string;
  failures: number;
  window_start: number;
  opened_at: number;
  probe_until: number;
  updated_at: number;
}

function toState(r: Row | undefined): BreakerState {
  if (!r) return CLOSED;
  return {
    state: r.state as BreakerMode,
    failures: Number(r.failures),
    windowStart: Number(r.window_start),
    openedAt: Number(r.opened_at),
    probeUntil: Number(r.probe_until),
  };
}

function toRecord(key: string, s: BreakerState, updatedAt: number): BreakerRecord {
  return { key, ...s, updatedAt };
}

/** A breaker key is a non-empty string of at most MAX_BREAKER_KEY characters. */
export function checkBreakerKey(key: unknown): string {
  if (typeof key !== "string" || key.length === 0 || key.length > MAX_BREAKER_KEY)
    throw new ValidationError(`breaker key must be a string of 1–${MAX_BREAKER_KEY} characters`);
  return key;
}

function* read(key: string): Program<{ row: Row | undefined; now: number }> {
  // The key's lock serialises every decision on one breaker (PostgreSQL: a missing row has nothing
  // to lock FOR UPDATE; SQLite's IMMEDIATE transaction already serialises writers).
  yield { op: "lock", key: `breaker:${key}` };
  const row = yield* one<Row>(`SELECT * FROM ${B} WHERE key = :key @update`, { key });
  const t = yield* one<{ now: number }>("SELECT :now AS now");
  return { row, now: Number(t!.now) };
}

function* write(key: string, s: BreakerState): Program<void> {
  yield* q(
    `INSERT INTO ${B} (key, state, failures, window_start, opened_at, probe_until, updated_at)
     VALUES (:key, :state, :failures, :ws, :opened, :pu, :now)
     ON CONFLICT (key) DO UPDATE SET state = :state, failures = :failures, window_start = :ws,
       opened_at = :opened, probe_until = :pu, updated_at = :now`,
    { key, state: s.state, failures: s.failures, ws: s.windowStart, opened: s.openedAt, pu: s.probeUntil },
  );
}

/** spec §18.6: admit, refuse, or claim the probe. */
export function* admitBreaker(key: string, config: BreakerConfig): Program<BreakerAdmission> {
  const { row, now } = yield* read(key);
  const seen = toState(row);
  const d = decideBreaker(seen, { kind: "request" }, now, config);
  if (d.kind === "refuse") return { admit: false, until: d.until };
  if (d.kind !== "admit") return { admit: true, probe: false };
  if (!d.next) return { admit: true, probe: d.probe };
  // The claim: a conditional write on the state read. Rows affected 0 = another request claimed it.
  const claimed = yield* q(
    `UPDATE ${B} SET state = :state, probe_until = :pu, updated_at = :now
     WHERE key = :key AND state = :seen AND probe_until = :seenPu AND opened_at = :opened RETURNING key`,
    {
      key,
      state: d.next.state,
      pu: d.next.probeUntil,
      seen: seen.state,
      seenPu: seen.probeUntil,
      opened: seen.openedAt,
    },
  );
  if (claimed.length === 0) return { admit: false, until: d.next.probeUntil };
  return { admit: true, probe: true };
}

/** spec §18.6: a request's outcome moves the breaker as decideBreaker says. */
export function* reportBreaker(
  key: string,
  ok: boolean,
  probe: boolean,
  config: BreakerConfig,
): Program<BreakerRecord> {
  const { row, now } = yield* read(key);
  const seen = toState(row);
  const d = decideBreaker(seen, { kind: ok ? "success" : "failure", probe }, now, config);
  if (d.kind !== "record" || !d.next) return toRecord(key, seen, row ? Number(row.updated_at) : now);
  if (!row && d.next.state === "closed" && d.next.failures === 0) return toRecord(key, d.next, now);
  yield* write(key, d.next);
  return toRecord(key, d.next, now);
}

/** Whether the key has a row at all: a missing row is a closed breaker with nothing to decide. */
export function* hasBreaker(key: string): Program<boolean> {
  return (yield* one(`SELECT key FROM ${B} WHERE key = :key`, { key })) !== undefined;
}

export function* listBreakers(limit: number): Program<BreakerRecord[]> {
  const n = Math.max(1, Math.min(MAX_BREAKERS_LISTED, Math.floor(limit)));
  const rows = yield* q<Row>(`SELECT * FROM ${B} ORDER BY key LIMIT ${n}`);
  return rows.map((r) => toRecord(r.key, toState(r), Number(r.updated_at)));
}

export function* resetBreaker(key: string): Program<boolean> {
  const rows = yield* q(`DELETE FROM ${B} WHERE key = :key RETURNING key`, { key });
  return rows.length > 0;
}

export type ProgramRunner = <R>(p: () => Program<R>) => Promise<R>;

/** The breaker operations of a store, bound to its way of running a program (one transaction each). */
export function breakerOps(write: ProgramRunner, read: ProgramRunner = write): BreakerOps {
  return {
    admitBreaker: async (key, config) => {
      checkBreakerKey(key);
      checkBreakerConfig(config);
      // A healthy route (no row) is admitted on a plain read, without the write transaction and the
      // key's lock: a row that appears meanwhile opened after this request started, like one in flight.
      if (!(await read(() => hasBreaker(key)))) return { admit: true, probe: false };
      return write(() => admitBreaker(key, config));
    },
    reportBreaker: async (key, ok, probe, config) => {
      checkBreakerKey(key);
      checkBreakerConfig(config);
      return write(() => reportBreaker(key, ok === true, probe === true, config));
    },
    listBreakers: async (limit = MAX_BREAKERS_LISTED) => read(() => listBreakers(limit)),
    resetBreaker: async (key) => {
      checkBreakerKey(key);
      return write(() => resetBreaker(key));
    },
  };
}
