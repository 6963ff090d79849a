/**
 * The usage ledger (spec §18.8), written once for both stores as programs (see ../tree/program.ts).
 *
 * One row per committed model response, and one per failed attempt the provider billed, each with
 * a caller-made `key` (the task, the turn's step and the attempt): the row is written at most once
 * per key whatever the retries. `commitStepWithUsage` writes a step's result and the usage rows of
 * the response it holds in one fenced transaction, like a step commit (spec §4.2): a crash before it
 * leaves neither, after it both, so a committed response is counted exactly once.
 *
 * Invariant: a usage row is written once per key, and a fenced write only while its fence holds
 * the claim (spec §18.8); bad rows are refused before the first write.
 */
import { ValidationError } from "../../errors.js";
import { type Fence, type FencedFields, holds, type SettleResult, type TaskId } from "../store.js";
import {
  appendBeforeStep,
  MAX_STREAMS_PER_TASK,
  type StepStreamsResult,
  type StreamAppend,
} from "../streams/ops.js";
import { one, type Program, q } from "../tree/program.js";

const U = "{s}.ratchet_usage";
const T = "{s}.ratchet_tasks";

/** Rows one write may carry (a response and its billed failed attempts). */
export const MAX_USAGE_ROWS = 100;
/** Rows one list returns at most. */
export const MAX_USAGE_LISTED = 1_000;
const MAX_TEXT = 512;
const MAX_TOKENS = 1e12;

export type UsageStatus = "committed" | "failed";

/** One row of the ledger as written. */
export interface UsageRow {
  /** Unique per counted response or attempt: a repeat of the key writes nothing. */
  key: string;
  status: UsageStatus;
  conversationId: string | null;
  taskId: TaskId | null;
  provider: string;
  model: string;
  /** The router's route name, or the model's id outside a router. */
  route: string;
  input: number;
  output: number;
  cached: number;
  reasoning: number;
  /** In US dollars, from the catalog's prices (0 when the model is not in it). */
  cost: number;
}

export interface UsageRecord extends UsageRow {
  id: number;
  createdAt: number;
}

export interface UsageFilter {
  conversationId?: string;
  taskId?: TaskId;
  provider?: string;
  model?: string;
  /** Epoch ms: rows created at or after. */
  since?: number;
}

export interface UsageTotals {
  /** Rows counted: committed responses plus billed failed attempts. */
  responses: number;
  failed: number;
  input: number;
  output: number;
  cached: number;
  reasoning: number;
  cost: number;
}

export interface ModelUsage extends UsageTotals {
  provider: string;
  model: string;
}

/** A step result and the usage of the response it holds, committed together (spec §18.8). */
export interface StepUsageWrite {
  fence: Fence;
  /** The step's stored name. */
  name: string;
  /** Its result, JSON text. */
  result: string;
  rows: readonly UsageRow[];
}

/**
 * A model turn's commit (spec §18.10): its step write and the invocation's still-buffered stream
 * batches (each under the same fence), in one transaction.
 */
export interface TurnWrite extends StepUsageWrite {
  streams: readonly StreamAppend[];
}

/** The usage operations of the Store contract (spec §18.8). */
export interface UsageOps {
  /** Writes rows (once per key); with a fence, only while it holds the claim. */
  recordUsage(rows: readonly UsageRow[], fence: Fence | null): Promise<SettleResult>;
  /** A step's result and its usage rows in one fenced transaction; a repeat changes nothing. */
  commitStepWithUsage(w: StepUsageWrite): Promise<SettleResult>;
  /**
   * spec §18.10: turns, each fenced on its own, in one transaction: a turn's stream batches are
   * appended first (as appendStreams would, spec §16.3–§16.4), then its step and usage rows unless a
   * batch was refused. A repeat of a turn whose commit landed changes nothing.
   */
  commitTurns(items: readonly TurnWrite[]): Promise<StepStreamsResult[]>;
  usageTotals(filter?: UsageFilter): Promise<UsageTotals>;
  /** Totals per provider and model, by provider then model. */
  usageByModel(filter?: UsageFilter): Promise<ModelUsage[]>;
  /** Rows, newest first. */
  listUsage(filter?: UsageFilter, limit?: number): Promise<UsageRecord[]>;
}

function text(v: unknown, what: string, nullable: boolean): void {
  if (v === null && nullable) return;
  if (typeof v !== "string" || v.length === 0 || v.length > MAX_TEXT)
    throw new ValidationError(`usage ${what} must be a string of 1–${MAX_TEXT} characters`);
}

function count(v: unknown, what: string): void {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > MAX_TOKENS)
    throw new ValidationError(`usage ${what} must be an integer in [0, ${MAX_TOKENS}]`);
}

/** Every row well formed, at most MAX_USAGE_ROWS of them; throws before anything is written. */
export function checkUsageRows(rows: readonly UsageRow[]): void {
  if (!Array.isArray(rows) || rows.length > MAX_USAGE_ROWS)
    throw new ValidationError(`usage rows must be an array of at most ${MAX_USAGE_ROWS}`);
  for (const r of rows) {
    text(r.key, "key", false);
    if (r.status !== "committed" && r.status !== "failed")
      throw new ValidationError(`usage status must be "committed" or "failed"`);
    text(r.conversationId, "conversationId", true);
    if (r.taskId !== null && !Number.isSafeInteger(r.taskId))
      throw new ValidationError("usage taskId must be an integer or null");
    text(r.provider, "provider", false);
    text(r.model, "model", false);
    text(r.route, "route", false);
    for (const k of ["input", "output", "cached", "reasoning"] as const) count(r[k], k);
    if (typeof r.cost !== "number" || !Number.isFinite(r.cost) || r.cost < 0 || r.cost > 1e9)
      throw new ValidationError("usage cost must be a finite number in [0, 1e9]");
  }
}

function* fenced(fence: Fence): Program<{ result: SettleResult; attempts: number }> {
  const row = yield* one<FencedFields & { attempts: number }>(
    `SELECT status, epoch, claimed_at, abort_requested, attempts FROM ${T} WHERE id = :id @share`,
    { id: fence.taskId },
  );
  if (!holds(row, fence)) return { result: "lease_lost", attempts: 0 };
  if (fence.mode !== "abort" && row.abort_requested === 1) return { result: "abort_marked", attempts: 0 };
  return { result: "ok", attempts: Number(row.attempts) };
}

function* insertRows(rows: readonly UsageRow[]): Program<void> {
  for (const r of rows)
    yield* q(
      `INSERT INTO ${U} (key, status, conversation_id, task_id, provider, model, route, input_tokens,
         output_tokens, cached_tokens, reasoning_tokens, cost, created_at)
       VALUES (:key, :status, :conv, :task, :provider, :model, :route, :input, :output, :cached,
         :reasoning, :cost, :now)
       ON CONFLICT (key) DO NOTHING`,
      {
        key: r.key,
        status: r.status,
        conv: r.conversationId,
        task: r.taskId,
        provider: r.provider,
        model: r.model,
        route: r.route,
        input: r.input,
        output: r.output,
        cached: r.cached,
        reasoning: r.reasoning,
        cost: r.cost,
      },
    );
}

export function* recordUsage(rows: readonly UsageRow[], fence: Fence | null): Program<SettleResult> {
  if (fence) {
    const f = yield* fenced(fence);
    if (f.result !== "ok") return f.result;
  }
  yield* insertRows(rows);
  return "ok";
}

/** spec §18.8: the step row (once, like a retried step commit) and its usage rows, fenced. */
export function* commitStepWithUsage(w: StepUsageWrite): Program<SettleResult> {
  const f = yield* fenced(w.fence);
  if (f.result !== "ok") return f.result;
  yield* insertStep(w, f.attempts);
  return "ok";
}

function* insertStep(w: StepUsageWrite, attempts: number): Program<void> {
  yield* q(
    `INSERT INTO {s}.ratchet_steps (task_id, name, result, attempt, created_at)
     VALUES (:id, :name, :result, :attempt, :now) ON CONFLICT (task_id, name) DO NOTHING`,
    { id: w.fence.taskId, name: w.name, result: w.result, attempt: attempts },
  );
  yield* insertRows(w.rows);
}

/**
 * spec §18.10: a turn's buffered chunks and its step commit in one program, so one transaction: a
 * failure anywhere leaves neither, a stale holder writes neither (its batches are fenced too), and
 * an abort mark refuses the step but not the chunks (spec §16.3).
 */
export function* commitTurn(w: TurnWrite): Program<StepStreamsResult> {
  // One read of the task row (FOR SHARE) fences the batches and the step alike.
  const f = yield* fenced(w.fence);
  if (f.result === "lease_lost") return { streams: w.streams.map(() => "lease_lost"), step: "lease_lost" };
  const { streams, refused } = yield* appendBeforeStep(w.streams);
  if (refused) return { streams, step: "stream_failed" };
  if (f.result !== "ok") return { streams, step: f.result };
  yield* insertStep(w, f.attempts);
  return { streams, step: "ok" };
}

/** The WHERE clause of a filter: fixed fragments, values bound as parameters. */
function where(f: UsageFilter): { sql: string; p: Record<string, unknown> } {
  const parts: string[] = [];
  const p: Record<string, unknown> = {};
  if (f.conversationId !== undefined) {
    parts.push("conversation_id = :conv");
    p.conv = f.conversationId;
  }
  if (f.taskId !== undefined) {
    parts.push("task_id = :task");
    p.task = f.taskId;
  }
  if (f.provider !== undefined) {
    parts.push("provider = :provider");
    p.provider = f.provider;
  }
  if (f.model !== undefined) {
    parts.push("model = :model");
    p.model = f.model;
  }
  if (f.since !== undefined) {
    parts.push("created_at >= CAST(:since AS bigint)");
    p.since = Math.floor(f.since);
  }
  return { sql: parts.length ? `WHERE ${parts.join(" AND ")}` : "", p };
}

/** Checks a filter's fields; throws before any read. */
export function checkUsageFilter(f: UsageFilter | undefined): UsageFilter {
  const out = f ?? {};
  if (out.conversationId !== undefined) text(out.conversationId, "conversationId", false);
  if (out.provider !== undefined) text(out.provider, "provider", false);
  if (out.model !== undefined) text(out.model, "model", false);
  if (out.taskId !== undefined && !Number.isSafeInteger(out.taskId))
    throw new ValidationError("taskId must be an integer");
  if (out.since !== undefined && (typeof out.since !== "number" || !Number.isFinite(out.since)))
    throw new ValidationError("since must be epoch milliseconds");
  return out;
}

const SUMS = `count(*) AS responses, coalesce(sum(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), 0) AS failed,
  coalesce(sum(input_tokens), 0) AS input, coalesce(sum(output_tokens), 0) AS output,
  coalesce(sum(cached_tokens), 0) AS cached, coalesce(sum(reasoning_tokens), 0) AS reasoning,
  coalesce(sum(cost), 0) AS cost`;

type SumRow = Record<keyof UsageTotals, number | string>;

function toTotals(r: SumRow | undefined): UsageTotals {
  const n = (k: keyof UsageTotals) => Number(r?.[k] ?? 0);
  return {
    responses: n("responses"),
    failed: n("failed"),
    input: n("input"),
    output: n("output"),
    cached: n("cached"),
    reasoning: n("reasoning"),
    cost: n("cost"),
  };
}

export function* usageTotals(f: UsageFilter): Program<UsageTotals> {
  const w = where(f);
  return toTotals(yield* one<SumRow>(`SELECT ${SUMS} FROM ${U} ${w.sql}`, w.p));
}

export function* usageByModel(f: UsageFilter): Program<ModelUsage[]> {
  const w = where(f);
  const rows = yield* q<SumRow & { provider: string; model: string }>(
    `SELECT provider, model, ${SUMS} FROM ${U} ${w.sql} GROUP BY provider, model ORDER BY provider, model
     LIMIT ${MAX_USAGE_LISTED}`,
    w.p,
  );
  return rows.map((r) => ({ provider: r.provider, model: r.model, ...toTotals(r) }));
}

interface Row {
  id: number;
  key: string;
  status: string;
  conversation_id: string | null;
  task_id: number | null;
  provider: string;
  model: string;
  route: string;
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  reasoning_tokens: number;
  cost: number;
  created_at: number;
}

export function* listUsage(f: UsageFilter, limit: number): Program<UsageRecord[]> {
  const w = where(f);
  const n = Math.max(1, Math.min(MAX_USAGE_LISTED, Math.floor(limit)));
  const rows = yield* q<Row>(`SELECT * FROM ${U} ${w.sql} ORDER BY id DESC LIMIT ${n}`, w.p);
  return rows.map((r) => ({
    id: Number(r.id),
    key: r.key,
    status: r.status as UsageStatus,
    conversationId: r.conversation_id,
    taskId: r.task_id === null ? null : Number(r.task_id),
    provider: r.provider,
    model: r.model,
    route: r.route,
    input: Number(r.input_tokens),
    output: Number(r.output_tokens),
    cached: Number(r.cached_tokens),
    reasoning: Number(r.reasoning_tokens),
    cost: Number(r.cost),
    createdAt: Number(r.created_at),
  }));
}

/** Step writes one group commit carries at most. */
export const MAX_STEP_WRITES = 500;

function checkStepWrite(w: StepUsageWrite): void {
  checkUsageRows(w.rows);
  if (typeof w.name !== "string" || typeof w.result !== "string")
    throw new ValidationError("a step write needs a name and a JSON text result");
}

function checkTurnWrite(w: TurnWrite): void {
  checkStepWrite(w);
  if (!Array.isArray(w.streams) || w.streams.length > MAX_STREAMS_PER_TASK)
    throw new ValidationError(`a turn carries at most ${MAX_STREAMS_PER_TASK} stream batches`);
  for (const a of w.streams)
    if (
      a?.fence?.taskId !== w.fence.taskId ||
      a.fence.token !== w.fence.token ||
      a.fence.claimedAt !== w.fence.claimedAt
    )
      throw new ValidationError("a turn's stream batches are written under the turn's own fence");
}

export type ProgramRunner = <R>(p: () => Program<R>) => Promise<R>;

/** The usage operations of a store, bound to its way of running a program (one transaction each). */
export function usageOps(write: ProgramRunner, read: ProgramRunner = write): UsageOps {
  return {
    recordUsage: async (rows, fence) => {
      checkUsageRows(rows);
      return write(() => recordUsage(rows, fence));
    },
    commitStepWithUsage: async (w) => {
      checkStepWrite(w);
      return write(() => commitStepWithUsage(w));
    },
    commitTurns: async (items) => {
      if (!Array.isArray(items) || items.length > MAX_STEP_WRITES)
        throw new ValidationError(`at most ${MAX_STEP_WRITES} turns per call`);
      for (const w of items) checkTurnWrite(w);
      if (items.length === 0) return [];
      return write(function* () {
        const out: StepStreamsResult[] = [];
        for (const w of items) out.push(yield* commitTurn(w));
        return out;
      });
    },
    usageTotals: async (f) => {
      const filter = checkUsageFilter(f);
      return read(() => usageTotals(filter));
    },
    usageByModel: async (f) => {
      const filter = checkUsageFilter(f);
      return read(() => usageByModel(filter));
    },
    listUsage: async (f, limit = 100) => {
      const filter = checkUsageFilter(f);
      return read(() => listUsage(filter, limit));
    },
  };
}
