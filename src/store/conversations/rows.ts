/** Rows of the conversation tables and their records (spec §17). */
import { fromJson } from "../../core/json.js";
import { InvalidStateError, NotFoundError } from "../../errors.js";
import { type Fence, type FencedFields, holds } from "../store.js";
import { FenceRefused } from "../tree/ops.js";
import { one, type Program } from "../tree/program.js";
import type { ConversationRecord, EntryKind, EntryRecord, SubmissionRecord } from "./types.js";

export const C = "{s}.ratchet_conversations";
export const E = "{s}.ratchet_entries";
export const ST = "{s}.ratchet_conversation_state";
export const CM = "{s}.ratchet_conversation_commits";
export const SUB = "{s}.ratchet_submissions";
export const T = "{s}.ratchet_tasks";

export interface ConversationRow {
  id: string;
  title: string | null;
  metadata: string | null;
  owner_task_id: number | null;
  parent_id: string | null;
  parent_seq: number | null;
  next_seq: number;
  run_task_id: number | null;
  closed_at: number | null;
  created_at: number;
  updated_at: number;
}

export function toConversation(r: ConversationRow): ConversationRecord {
  return {
    id: r.id,
    title: r.title,
    metadata: fromJson(r.metadata),
    ownerTaskId: r.owner_task_id === null ? null : Number(r.owner_task_id),
    parent: r.parent_id === null ? null : { conversationId: r.parent_id, seq: Number(r.parent_seq) },
    length: Number(r.next_seq),
    runTaskId: r.run_task_id === null ? null : Number(r.run_task_id),
    closedAt: r.closed_at === null || r.closed_at === undefined ? null : Number(r.closed_at),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

export interface EntryRow {
  conversation_id: string;
  seq: number;
  kind: string;
  name: string | null;
  data: string;
  task_id: number | null;
  submission_id: number | null;
  created_at: number;
}

export function toEntry(r: EntryRow): EntryRecord {
  return {
    conversationId: r.conversation_id,
    seq: Number(r.seq),
    kind: r.kind as EntryKind,
    name: r.name,
    data: fromJson(r.data),
    taskId: r.task_id === null ? null : Number(r.task_id),
    submissionId: r.submission_id === null ? null : Number(r.submission_id),
    createdAt: Number(r.created_at),
  };
}

export interface SubmissionRow {
  id: number;
  conversation_id: string;
  request_id: string | null;
  mode: string;
  input: string;
  status: string;
  reason: string | null;
  entry_seq: number | null;
  answer_seq: number | null;
  run_task_id: number | null;
  created_at: number;
  settled_at: number | null;
}

const num = (v: number | null): number | null => (v === null ? null : Number(v));

export function toSubmission(r: SubmissionRow): SubmissionRecord {
  return {
    id: Number(r.id),
    conversationId: r.conversation_id,
    requestId: r.request_id,
    mode: r.mode as SubmissionRecord["mode"],
    input: fromJson(r.input),
    status: r.status as SubmissionRecord["status"],
    reason: r.reason,
    entrySeq: num(r.entry_seq),
    answerSeq: num(r.answer_seq),
    runTaskId: num(r.run_task_id),
    createdAt: Number(r.created_at),
    settledAt: num(r.settled_at),
  };
}

/**
 * The conversation's row, locked for the rest of the transaction (PostgreSQL; SQLite's IMMEDIATE
 * transaction already serialises writers). Every writing operation takes this lock first and
 * only then a task row, so two of them cannot deadlock on each other or on the engine's writes.
 */
export function* lockConversation(id: string): Program<ConversationRow> {
  const row = yield* one<ConversationRow>(`SELECT * FROM ${C} WHERE id = :id @update`, { id });
  if (!row) throw new NotFoundError(`conversation "${id}"`);
  return row;
}

/**
 * A running task's write holds only while its claim does (spec §3.7), and a run-mode write is
 * refused once the task carries an abort mark (spec §12.5).
 * Invariant: a fenced-out holder's conversation writes change nothing.
 */
export function* checkFence(fence: Fence): Program<void> {
  const r = yield* one<FencedFields>(
    `SELECT status, epoch, claimed_at, abort_requested FROM ${T} WHERE id = :id @update`,
    { id: fence.taskId },
  );
  if (!holds(r, fence)) throw new FenceRefused("lease_lost", fence);
  if (fence.mode !== "abort" && r.abort_requested === 1) throw new FenceRefused("abort_marked", fence);
}

/** The conversation's run must be the fenced task (spec §17.6). */
export function checkRunOwner(row: ConversationRow, fence: Fence): void {
  if (row.run_task_id === null || Number(row.run_task_id) !== fence.taskId)
    throw new InvalidStateError(
      `task ${fence.taskId} is not the run of conversation "${row.id}" (its run is ${row.run_task_id ?? "none"})`,
    );
}
