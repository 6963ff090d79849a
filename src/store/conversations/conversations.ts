/**
 * Conversations, entries and state (spec §17.1–§17.4, §17.7, §17.9), written once as programs
 * (see ../tree/program.ts) that SQLite and PostgreSQL each drive in one transaction.
 */
import { InvalidStateError, NotFoundError, ValidationError } from "../../errors.js";
import { one, type Program, q } from "../tree/program.js";
import {
  C,
  CM,
  type ConversationRow,
  checkFence,
  E,
  type EntryRow,
  lockConversation,
  ST,
  SUB,
  T,
  toConversation,
  toEntry,
} from "./rows.js";
import { insertTask } from "./tasks.js";
import type {
  CommitResult,
  ConversationCommit,
  ConversationRecord,
  EntryRange,
  EntryRecord,
  ListConversationsFilter,
  NewConversation,
  NewEntry,
} from "./types.js";
import { HEAD_KINDS } from "./types.js";
import {
  checkBytes,
  checkConversationId,
  checkEntries,
  checkId,
  checkLimit,
  checkSeq,
  checkState,
  checkTitle,
  CONVERSATION_LIMITS as L,
} from "./validate.js";

function checkNew(c: NewConversation): void {
  checkConversationId(c?.id);
  checkTitle(c.title);
  if (c.metadata !== null) checkBytes(c.metadata, L.metadataBytes, "conversation metadata");
  if (c.ownerTaskId !== null && !Number.isSafeInteger(c.ownerTaskId))
    throw new ValidationError("an owner task id must be an integer");
}

/**
 * An owned conversation needs a live, unmarked owner (spec §17.1, as for children, §12.1).
 * Invariant: ownership is written once, at creation, and never changes.
 */
function* checkOwner(ownerTaskId: number): Program<void> {
  const o = yield* one<{ status: string; abort_requested: number }>(
    `SELECT status, abort_requested FROM ${T} WHERE id = :id @share`,
    { id: ownerTaskId },
  );
  if (!o) throw new NotFoundError(`owner task ${ownerTaskId}`);
  if (o.status === "terminal" || o.status === "completing" || o.abort_requested === 1)
    throw new InvalidStateError(
      `task ${ownerTaskId} is finished or being aborted; it cannot own a new conversation`,
    );
}

/** spec §17.1: creates, or returns the existing conversation of that id unchanged. */
export function* createConversation(
  c: NewConversation,
): Program<{ conversation: ConversationRecord; created: boolean }> {
  checkNew(c);
  const found = yield* one<ConversationRow>(`SELECT * FROM ${C} WHERE id = :id`, { id: c.id });
  if (found) return { conversation: toConversation(found), created: false };
  if (c.ownerTaskId !== null) yield* checkOwner(c.ownerTaskId);
  const rows = yield* q<ConversationRow>(
    `INSERT INTO ${C} (id, title, metadata, owner_task_id, next_seq, created_at, updated_at)
     VALUES (:id, :title, :metadata, :owner, 0, :now, :now) ON CONFLICT (id) DO NOTHING RETURNING *`,
    { id: c.id, title: c.title, metadata: c.metadata, owner: c.ownerTaskId },
  );
  // Lost a race with another creator of the same id: theirs stands.
  if (rows.length === 0)
    return { conversation: toConversation(yield* lockConversation(c.id)), created: false };
  return { conversation: toConversation(rows[0]!), created: true };
}

export function* getConversation(id: string): Program<ConversationRecord | null> {
  checkConversationId(id);
  const r = yield* one<ConversationRow>(`SELECT * FROM ${C} WHERE id = :id`, { id });
  return r ? toConversation(r) : null;
}

/** Conversations in id order after `after` (paging), filtered by owner and by whether a run is in progress. */
export function* listConversations(f: ListConversationsFilter): Program<ConversationRecord[]> {
  const limit = checkLimit(f?.limit, L.listLimit);
  if (f.after !== undefined) checkId(f.after, "after");
  const where = ["id > :after"];
  if (f.ownerTaskId !== undefined) where.push("owner_task_id = :owner");
  if (f.busy === true) where.push("run_task_id IS NOT NULL");
  if (f.busy === false) where.push("run_task_id IS NULL");
  const rows = yield* q<ConversationRow>(
    `SELECT * FROM ${C} WHERE ${where.join(" AND ")} ORDER BY id LIMIT CAST(:limit AS bigint)`,
    { after: f.after ?? "", owner: f.ownerTaskId ?? null, limit },
  );
  return rows.map(toConversation);
}

/**
 * spec §17.9: a conversation lives until deleted; deleting takes its entries, state, keyed commits
 * and submissions with it (queued and placed ones are gone: their waiters see `deleted`).
 * Invariant: a conversation with a live run is never deleted under it.
 */
export function* deleteConversation(id: string): Program<boolean> {
  checkConversationId(id);
  const row = yield* one<ConversationRow>(`SELECT * FROM ${C} WHERE id = :id @update`, { id });
  if (!row) return false;
  if (row.run_task_id !== null) {
    const run = yield* one<{ status: string }>(`SELECT status FROM ${T} WHERE id = :id`, {
      id: row.run_task_id,
    });
    if (run && run.status !== "terminal")
      throw new InvalidStateError(
        `conversation "${id}" has a run in progress (task ${row.run_task_id}); abort it first`,
      );
  }
  for (const table of [E, ST, CM, SUB]) yield* q(`DELETE FROM ${table} WHERE conversation_id = :id`, { id });
  yield* q(`DELETE FROM ${C} WHERE id = :id`, { id });
  return true;
}

/**
 * spec §17.7: the fork holds copies of the parent's entries [0, atSeq] (same seqs, kinds, data and
 * writers) and of its current state; submissions and runs are not copied. Copies, not shared rows:
 * each conversation can then be read, extended and deleted on its own.
 */
export function* forkConversation(
  from: string,
  atSeq: number,
  into: NewConversation,
): Program<ConversationRecord> {
  checkConversationId(from);
  checkSeq(atSeq, "the fork's entry");
  checkNew(into);
  const parent = yield* lockConversation(from);
  if (atSeq >= Number(parent.next_seq))
    throw new ValidationError(`conversation "${from}" has no entry ${atSeq} (it holds ${parent.next_seq})`);
  const taken = yield* one(`SELECT id FROM ${C} WHERE id = :id`, { id: into.id });
  if (taken) throw new InvalidStateError(`conversation "${into.id}" already exists`);
  if (into.ownerTaskId !== null) yield* checkOwner(into.ownerTaskId);
  const [row] = yield* q<ConversationRow>(
    `INSERT INTO ${C} (id, title, metadata, owner_task_id, parent_id, parent_seq, next_seq, created_at, updated_at)
     VALUES (:id, :title, :metadata, :owner, :parent, :at, :n, :now, :now) ON CONFLICT (id) DO NOTHING RETURNING *`,
    {
      id: into.id,
      title: into.title,
      metadata: into.metadata,
      owner: into.ownerTaskId,
      parent: from,
      at: atSeq,
      n: atSeq + 1,
    },
  );
  // Another fork or create took the id since the check above (PostgreSQL): refused, not a driver error.
  if (!row) throw new InvalidStateError(`conversation "${into.id}" already exists`);
  yield* q(
    `INSERT INTO ${E} (conversation_id, seq, kind, name, data, task_id, submission_id, created_at)
     SELECT :id, seq, kind, name, data, task_id, NULL, created_at FROM ${E} WHERE conversation_id = :parent AND seq <= :at`,
    { id: into.id, parent: from, at: atSeq },
  );
  yield* q(
    `INSERT INTO ${ST} (conversation_id, key, value, updated_at)
     SELECT :id, key, value, :now FROM ${ST} WHERE conversation_id = :parent`,
    { id: into.id, parent: from },
  );
  return toConversation(row!);
}

/** Rows per INSERT of appendEntries (4 parameters each; SQLite allows 32,766 per statement). */
const INSERT_ROWS = 100;

/** Appends entries at the conversation's next seqs; the caller holds the conversation's lock. */
export function* appendEntries(
  row: ConversationRow,
  entries: readonly NewEntry[],
  taskId: number | null,
  submissionId: number | null,
): Program<number[]> {
  const first = Number(row.next_seq);
  if (first + entries.length > L.entriesPerConversation)
    throw new InvalidStateError(
      `conversation "${row.id}" holds ${first} entries; the most one conversation may hold is ${L.entriesPerConversation}`,
    );
  const seqs = entries.map((_, i) => first + i);
  // Up to INSERT_ROWS rows per statement: one round trip per hundred entries rather than per entry
  // on PostgreSQL (docs/benchmarks.md). The statement's text depends only on its row count.
  for (let at = 0; at < entries.length; at += INSERT_ROWS) {
    const part = entries.slice(at, at + INSERT_ROWS);
    const p: Record<string, unknown> = { c: row.id, task: taskId, sub: submissionId };
    const values = part.map((e, i) => {
      p[`s${i}`] = first + at + i;
      p[`k${i}`] = e.kind;
      p[`n${i}`] = e.name;
      p[`d${i}`] = e.data;
      return `(:c, :s${i}, :k${i}, :n${i}, :d${i}, :task, :sub, :now)`;
    });
    yield* q(
      `INSERT INTO ${E} (conversation_id, seq, kind, name, data, task_id, submission_id, created_at)
       VALUES ${values.join(", ")}`,
      p,
    );
  }
  if (entries.length > 0) {
    yield* q(`UPDATE ${C} SET next_seq = :n, updated_at = :now WHERE id = :id`, {
      id: row.id,
      n: first + entries.length,
    });
    row.next_seq = first + entries.length;
  }
  return seqs;
}

/**
 * spec §17.4: entries, state and tasks land together or not at all. A keyed commit applies once:
 * its repeat returns the first result. A fenced commit is a running task's (spec §3.7).
 * Invariant: a failure anywhere in the commit rolls all of it back.
 */
export function* commitConversation(c: ConversationCommit): Program<CommitResult> {
  checkConversationId(c?.conversationId);
  const bytes = checkEntries(c.entries) + checkState(c.state);
  if (bytes > L.commitBytes)
    throw new ValidationError(
      `a commit holds at most ${L.commitBytes} bytes of entries and state`,
      "RATCHET_PAYLOAD_TOO_LARGE",
    );
  if (!Array.isArray(c.tasks) || c.tasks.length > L.tasksPerCommit)
    throw new ValidationError(`a commit creates at most ${L.tasksPerCommit} tasks`);
  if (c.key !== null) checkId(c.key, "a commit key");
  const row = yield* lockConversation(c.conversationId);
  if (c.key !== null) {
    const done = yield* one<{ result: string }>(
      `SELECT result FROM ${CM} WHERE conversation_id = :c AND key = :k`,
      {
        c: c.conversationId,
        k: c.key,
      },
    );
    if (done) return { ...(JSON.parse(done.result) as Omit<CommitResult, "applied">), applied: false };
  }
  if (c.fence) yield* checkFence(c.fence);
  const seqs = yield* appendEntries(row, c.entries, c.fence?.taskId ?? null, null);
  for (const w of c.state) {
    if (w.value === null)
      yield* q(`DELETE FROM ${ST} WHERE conversation_id = :c AND key = :k`, { c: row.id, k: w.key });
    else
      yield* q(
        `INSERT INTO ${ST} (conversation_id, key, value, updated_at) VALUES (:c, :k, :v, :now)
         ON CONFLICT (conversation_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
        { c: row.id, k: w.key, v: w.value },
      );
  }
  const taskIds: number[] = [];
  for (const t of c.tasks) taskIds.push(yield* insertTask(t, row, c.maxDepth));
  if (c.entries.length === 0) yield* q(`UPDATE ${C} SET updated_at = :now WHERE id = :id`, { id: row.id });
  if (c.key !== null)
    yield* q(`INSERT INTO ${CM} (conversation_id, key, result) VALUES (:c, :k, :r)`, {
      c: row.id,
      k: c.key,
      r: JSON.stringify({ seqs, taskIds }),
    });
  return { seqs, taskIds, applied: true };
}

export function* entries(id: string, range: EntryRange): Program<EntryRecord[]> {
  checkConversationId(id);
  const limit = checkLimit(range?.limit, L.readLimit);
  const from = range.from === undefined ? 0 : checkSeq(range.from, "from");
  const to = range.to === undefined ? Number.MAX_SAFE_INTEGER : checkSeq(range.to, "to");
  const rows = yield* q<EntryRow>(
    `SELECT * FROM ${E} WHERE conversation_id = :id AND seq >= :from AND seq < :to ORDER BY seq LIMIT CAST(:limit AS bigint)`,
    { id, from, to, limit },
  );
  return rows.map(toEntry);
}

/** spec §17.3: what a model sees starts at the newest reset or compaction entry (inclusive). */
export function* contextEntries(id: string, limit: number): Program<EntryRecord[]> {
  checkConversationId(id);
  checkLimit(limit, L.readLimit);
  const head = yield* one<{ seq: number | null }>(
    `SELECT max(seq) AS seq FROM ${E} WHERE conversation_id = :id AND kind IN @texts(kinds)`,
    { id, kinds: HEAD_KINDS },
  );
  return yield* entries(id, {
    from: head?.seq === null || head?.seq === undefined ? 0 : Number(head.seq),
    limit,
  });
}

export function* entriesByTask(taskId: number, limit: number): Program<EntryRecord[]> {
  if (!Number.isSafeInteger(taskId)) throw new ValidationError("a task id must be an integer");
  checkLimit(limit, L.readLimit);
  const rows = yield* q<EntryRow>(
    `SELECT * FROM ${E} WHERE task_id = :t ORDER BY conversation_id, seq LIMIT CAST(:limit AS bigint)`,
    { t: taskId, limit },
  );
  return rows.map(toEntry);
}

export function* conversationState(id: string): Program<Record<string, unknown>> {
  checkConversationId(id);
  const rows = yield* q<{ key: string; value: string }>(
    `SELECT key, value FROM ${ST} WHERE conversation_id = :id ORDER BY key LIMIT ${L.readLimit}`,
    { id },
  );
  return Object.fromEntries(rows.map((r) => [r.key, JSON.parse(r.value)]));
}
