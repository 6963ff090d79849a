/**
 * Durable output streams (spec §16), written once for both stores as programs (see
 * ../tree/program.ts): SQLite drives them inside its transaction, PostgreSQL with `await`.
 *
 * A stream is (task, name): a `ratchet_streams` row with its committed length — the next offset —
 * its bytes and whether it is closed, and one `ratchet_stream_chunks` row per committed batch
 * (a segment of offsets first … first + count − 1, the chunks' JSON texts as one JSON array).
 *
 * Invariant: an append commits only while its fence holds the claim (spec §16.3) and only at the
 * length its writer expects (spec §16.4), so a stale holder's chunks and a retried commit's
 * second copy both change nothing; offsets have no gap and no duplicate.
 */
import { type Fence, type FencedFields, holds, type SettleResult, type TaskId } from "../store.js";
import { one, type Program, q } from "../tree/program.js";

const S = "{s}.ratchet_streams";
const C = "{s}.ratchet_stream_chunks";
const T = "{s}.ratchet_tasks";

/** Streams one task may have (spec §16.6). */
export const MAX_STREAMS_PER_TASK = 64;
/** Segments one read returns at most: a reader pages on with the next offset. */
export const MAX_READ_SEGMENTS = 32;

/** One writer's batch: chunks (JSON texts) to add at offset `expect`, and whether this closes the stream. */
export interface StreamAppend {
  readonly fence: Fence;
  readonly name: string;
  /** The stream's length the writer saw: the offset of the first chunk of this batch. */
  readonly expect: number;
  /** Each chunk's JSON text. */
  readonly chunks: readonly string[];
  /** UTF-8 bytes of the chunks' texts, added up. */
  readonly bytes: number;
  readonly close: boolean;
  /** The stream's byte cap (spec §16.6): an append past it is refused whole. */
  readonly maxBytes: number;
}

/**
 * What an append did: `ok` committed (or had already committed: a retried commit); `lease_lost`
 * the fence no longer holds; `closed` the stream was closed before; `full` past the byte cap;
 * `too_many` a new stream past MAX_STREAMS_PER_TASK; `conflict` the stream's length is not the one
 * the writer expected (its view of the stream is wrong: it never happens to a writer that holds
 * the claim, since only the holder writes).
 */
export type StreamAppendResult = "ok" | "lease_lost" | "closed" | "full" | "too_many" | "conflict";

/**
 * A step committed in one transaction with its invocation's still-buffered batches (spec §18.10):
 * each batch's result, in order, and the step's — `ok` written, a refusal of its fence, or
 * `stream_failed`: not written because a batch was refused (the others committed, as a boundary's
 * flush before a step commit would have).
 */
export interface StepStreamsResult {
  streams: StreamAppendResult[];
  step: SettleResult | "stream_failed";
}

/**
 * spec §18.10: the batches of a step's commit, appended in its transaction before its row, once the
 * caller found the step's fence holding (its task row read FOR SHARE in this transaction, so no
 * second read here). `refused` is null when every one committed (the step may be written).
 */
export function* appendBeforeStep(
  items: readonly StreamAppend[],
): Program<{ streams: StreamAppendResult[]; refused: boolean }> {
  const streams: StreamAppendResult[] = [];
  for (const a of items) streams.push(yield* appendHeld(a));
  return { streams, refused: streams.some((r) => r !== "ok") };
}

export interface StreamInfo {
  taskId: TaskId;
  name: string;
  /** Committed chunks: the offset the next one gets. */
  length: number;
  bytes: number;
  closed: boolean;
  createdAt: number;
  updatedAt: number;
}

/** A read of committed chunks from an offset, with the stream's and its task's state at the read. */
export interface StreamRead {
  /** Offsets from `from` on, in order, at most up to the info's length; data as written (parsed JSON). */
  chunks: { offset: number; data: unknown }[];
  info: StreamInfo | null;
  /** The task is terminal (or gone): nothing will be appended any more (spec §16.5). */
  ended: boolean;
  /** The task exists (a pruned or never created task reads as absent). */
  exists: boolean;
}

interface StreamRow {
  task_id: number;
  name: string;
  length: number;
  bytes: number;
  closed: number;
  created_at: number;
  updated_at: number;
}

function toInfo(r: StreamRow): StreamInfo {
  return {
    taskId: r.task_id,
    name: r.name,
    length: r.length,
    bytes: r.bytes,
    closed: r.closed === 1,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** spec §16.3–§16.4: each item fenced and length-checked on its own; one transaction for all. */
export function* appendStreams(items: readonly StreamAppend[]): Program<StreamAppendResult[]> {
  const out: StreamAppendResult[] = [];
  for (const item of items) out.push(yield* appendOne(item));
  return out;
}

function* appendOne(a: StreamAppend): Program<StreamAppendResult> {
  // FOR SHARE: a settlement (FOR UPDATE) of this task waits for the append or the append for it,
  // so a chunk is never committed beside the settlement that ended its claim.
  const task = yield* one<FencedFields>(
    `SELECT status, epoch, claimed_at, abort_requested FROM ${T} WHERE id = :id @share`,
    { id: a.fence.taskId },
  );
  if (!holds(task, a.fence)) return "lease_lost";
  return yield* appendHeld(a);
}

/** An append whose fence the caller checked in this transaction, holding the task row FOR SHARE. */
function* appendHeld(a: StreamAppend): Program<StreamAppendResult> {
  // A first batch (a fresh turn's stream) counts the task's streams and looks for its own in one
  // read; the row is read (and locked) only when it exists. One round trip less on PostgreSQL.
  let streams: number | null = null;
  if (a.expect === 0) {
    const c = yield* one<{ n: number | string; mine: number | string | null }>(
      `SELECT count(*) AS n, sum(CASE WHEN name = :name THEN 1 ELSE 0 END) AS mine FROM ${S} WHERE task_id = :id`,
      { id: a.fence.taskId, name: a.name },
    );
    if (Number(c?.mine ?? 0) === 0) streams = Number(c?.n ?? 0);
  }
  const row =
    streams === null
      ? yield* one<StreamRow>(`SELECT * FROM ${S} WHERE task_id = :id AND name = :name @update`, {
          id: a.fence.taskId,
          name: a.name,
        })
      : undefined;
  const n = a.chunks.length;
  if (row) {
    if (row.length !== a.expect) {
      // A retried commit whose first try committed (its answer was lost): the very segment is there.
      if (n > 0 && row.length >= a.expect + n) {
        const seg = yield* one<{ count: number; data: string }>(
          `SELECT count, data FROM ${C} WHERE task_id = :id AND name = :name AND first = :first`,
          { id: a.fence.taskId, name: a.name, first: a.expect },
        );
        if (seg && seg.count === n && seg.data === `[${a.chunks.join(",")}]`) return "ok";
      }
      return row.closed === 1 ? "closed" : "conflict";
    }
    if (row.closed === 1) return n === 0 && a.close ? "ok" : "closed";
    if (row.bytes + a.bytes > a.maxBytes) return "full";
  } else {
    if (a.expect !== 0) return "conflict";
    if (a.bytes > a.maxBytes) return "full";
    if ((streams ?? 0) >= MAX_STREAMS_PER_TASK) return "too_many";
  }
  if (n > 0)
    yield* q(
      `INSERT INTO ${C} (task_id, name, first, count, data) VALUES (:id, :name, :first, :count, :data)`,
      {
        id: a.fence.taskId,
        name: a.name,
        first: a.expect,
        count: n,
        data: `[${a.chunks.join(",")}]`,
      },
    );
  const p = {
    id: a.fence.taskId,
    name: a.name,
    length: a.expect + n,
    bytes: a.bytes,
    closed: a.close ? 1 : 0,
  };
  if (row)
    yield* q(
      `UPDATE ${S} SET length = :length, bytes = bytes + :bytes, closed = :closed, updated_at = :now
       WHERE task_id = :id AND name = :name`,
      p,
    );
  else
    yield* q(
      `INSERT INTO ${S} (task_id, name, length, bytes, closed, created_at, updated_at)
       VALUES (:id, :name, :length, :bytes, :closed, :now, :now)`,
      p,
    );
  return "ok";
}

/** One stream's state, or null before its first commit. */
export function* streamInfo(taskId: TaskId, name: string): Program<StreamInfo | null> {
  const r = yield* one<StreamRow>(`SELECT * FROM ${S} WHERE task_id = :id AND name = :name`, {
    id: taskId,
    name,
  });
  return r ? toInfo(r) : null;
}

/** A task's streams by name (at most MAX_STREAMS_PER_TASK exist). */
export function* listStreams(taskId: TaskId): Program<StreamInfo[]> {
  const rows = yield* q<StreamRow>(`SELECT * FROM ${S} WHERE task_id = :id ORDER BY name`, { id: taskId });
  return rows.map(toInfo);
}

/**
 * spec §16.5: committed chunks from `from`. The task row is read first, then the stream row, then
 * the segments below the stream row's length: each read sees at least what the one before it saw
 * (statements may see different commits on PostgreSQL's read committed), so `ended` and `closed`
 * are never newer than the chunks returned — a reader that sees them has seen every chunk.
 */
export function* readStream(taskId: TaskId, name: string, from: number): Program<StreamRead> {
  const task = yield* one<{ status: string }>(`SELECT status FROM ${T} WHERE id = :id`, { id: taskId });
  const row = yield* one<StreamRow>(`SELECT * FROM ${S} WHERE task_id = :id AND name = :name`, {
    id: taskId,
    name,
  });
  const info = row ? toInfo(row) : null;
  const read: StreamRead = { chunks: [], info, ended: !task || task.status === "terminal", exists: !!task };
  if (!info || from >= info.length) return read;
  // The segment holding `from` starts at or before it: the newest first ≤ from.
  const segs = yield* q<{ first: number; count: number; data: string }>(
    `SELECT first, count, data FROM ${C}
     WHERE task_id = :id AND name = :name AND first < :length
       AND first >= coalesce((SELECT max(first) FROM ${C} WHERE task_id = :id AND name = :name AND first <= :from), 0)
     ORDER BY first LIMIT ${MAX_READ_SEGMENTS}`,
    { id: taskId, name, from, length: info.length },
  );
  for (const s of segs) {
    const values = JSON.parse(s.data) as unknown[];
    for (let i = Math.max(0, from - s.first); i < values.length; i++)
      read.chunks.push({ offset: s.first + i, data: values[i] });
  }
  return read;
}

/** Deletes the streams of pruned tasks (spec §16.7), inside prune's transaction. */
export function* pruneStreams(ids: readonly TaskId[]): Program<void> {
  yield* q(`DELETE FROM ${C} WHERE task_id IN @ids(ids)`, { ids });
  yield* q(`DELETE FROM ${S} WHERE task_id IN @ids(ids)`, { ids });
}
