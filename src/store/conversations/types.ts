/**
 * The conversation operations of the Store contract (spec §17): conversations, their immutable
 * entries, per-conversation state, submissions and the inbox. Written once as programs
 * (conversations.ts, submissions.ts) that both stores drive inside one transaction each, so the
 * rules cannot drift apart between SQLite and PostgreSQL.
 *
 * Values cross this seam as JSON text the caller produced (like `NewTask.input`); every operation
 * still checks ids, kinds and sizes itself before its first write (spec §17.10).
 */
import type { Fence, NewTask, TaskId } from "../store.js";

export type ConversationId = string;

/** The entry kinds every layer knows (spec §17.2); anything else is `custom` with a `name`. */
export const ENTRY_KINDS = [
  "user",
  "assistant",
  "tool-call",
  "tool-result",
  "system",
  "reset",
  "compaction",
  "custom",
] as const;
export type EntryKind = (typeof ENTRY_KINDS)[number];

/** Kinds a model's context starts at: the newest of them heads the context (spec §17.3). */
export const HEAD_KINDS: readonly EntryKind[] = ["reset", "compaction"];

export interface ConversationRecord {
  id: ConversationId;
  title: string | null;
  metadata: unknown;
  /** The task that owns this conversation (a subagent's driver); immutable (spec §17.1). */
  ownerTaskId: TaskId | null;
  /** Where it was forked from (spec §17.7). */
  parent: { conversationId: ConversationId; seq: number } | null;
  /** Entries it holds: the next entry's seq. */
  length: number;
  /** The run in progress, or null when none (spec §17.5). */
  runTaskId: TaskId | null;
  /** When it was closed: it takes no more input (spec §17.8). */
  closedAt: number | null;
  createdAt: number;
  updatedAt: number;
}

export interface NewConversation {
  id: ConversationId;
  title: string | null;
  /** JSON text or null. */
  metadata: string | null;
  ownerTaskId: TaskId | null;
}

export interface NewEntry {
  kind: EntryKind;
  /** The app-defined name of a `custom` entry; null otherwise. */
  name: string | null;
  /** JSON text. */
  data: string;
}

export interface EntryRecord {
  conversationId: ConversationId;
  seq: number;
  kind: EntryKind;
  name: string | null;
  data: unknown;
  /** The task whose commit wrote it, if any (spec §17.8). */
  taskId: TaskId | null;
  /** The submission it placed, for user entries (spec §17.6). */
  submissionId: number | null;
  createdAt: number;
}

/** One key of a conversation's application state: JSON text, or null to delete the key. */
export interface StateWrite {
  key: string;
  value: string | null;
}

/**
 * An atomic commit (spec §17.4): entries, state writes and new tasks in one transaction. With a
 * `key`, a repeat of the same key returns the first commit's result and writes nothing; with a
 * `fence`, the commit is a running task's and is refused once that task lost its claim.
 */
export interface ConversationCommit {
  conversationId: ConversationId;
  entries: readonly NewEntry[];
  state: readonly StateWrite[];
  /** Top-level tasks, created in the conversation's scope. */
  tasks: readonly NewTask[];
  key: string | null;
  fence: Fence | null;
  /** Admission bound for the tasks' queues (spec §2.7). */
  maxDepth: number;
}

export interface CommitResult {
  /** The seq of each entry, in order. */
  seqs: number[];
  taskIds: TaskId[];
  /** False when a keyed commit had already been applied. */
  applied: boolean;
}

export type WhenBusy = "follow-up" | "steer" | "reject";
export type DeliveryMode = "one" | "all";
export type SubmissionStatus = "queued" | "placed" | "done" | "unanswered";

export interface SubmissionRecord {
  id: number;
  conversationId: ConversationId;
  requestId: string | null;
  mode: "follow-up" | "steer";
  input: unknown;
  status: SubmissionStatus;
  /** Why it was not answered: `aborted`, `closed`, `run_failed`, `no_answer`, `deleted` (spec §17.6). */
  reason: string | null;
  /** Its user entry, once placed. */
  entrySeq: number | null;
  /** The entry that answered it. */
  answerSeq: number | null;
  /** The run it was placed in. */
  runTaskId: TaskId | null;
  createdAt: number;
  settledAt: number | null;
}

export interface SubmitRequest {
  conversationId: ConversationId;
  requestId: string | null;
  /** JSON text of the input (the user entry's data). */
  input: string;
  whenBusy: WhenBusy;
  /** The run task to create when this submission starts a run. */
  run: NewTask;
  delivery: { steer: DeliveryMode; followUp: DeliveryMode };
  maxDepth: number;
}

export interface SubmitResult {
  submission: SubmissionRecord;
  /** False when the requestId found an earlier submission (spec §17.5). */
  created: boolean;
}

/** A run's turn boundary or final boundary (spec §17.6). */
export interface BoundaryRequest {
  fence: Fence;
  conversationId: ConversationId;
  /** Applied once per key: a rerun of the run gets the first result back (spec §17.6). */
  key: string;
  delivery: { steer: DeliveryMode; followUp: DeliveryMode };
}

export interface FinishRequest extends BoundaryRequest {
  /** The answer entry; null ends the run with its inputs unanswered (`no_answer`). */
  answer: NewEntry | null;
  run: NewTask;
  maxDepth: number;
}

export interface FinishResult {
  answerSeq: number | null;
  /** The run that took over with the follow-ups selected at the final boundary, or null. */
  successor: TaskId | null;
}

export interface ListConversationsFilter {
  ownerTaskId?: TaskId;
  /** Conversations whose id is greater than this, for paging. */
  after?: ConversationId;
  /** Only conversations with a run in progress (true) or without (false). */
  busy?: boolean;
  limit: number;
}

export interface EntryRange {
  /** First seq (inclusive); default 0. */
  from?: number;
  /** Last seq (exclusive); default the end. */
  to?: number;
  limit: number;
}

/** The conversation operations every Store implements (spec §17). */
export interface ConversationOps {
  /** Creates a conversation, or returns the existing one with that id (`created: false`). */
  createConversation(c: NewConversation): Promise<{ conversation: ConversationRecord; created: boolean }>;
  getConversation(id: ConversationId): Promise<ConversationRecord | null>;
  listConversations(f: ListConversationsFilter): Promise<ConversationRecord[]>;
  /** Deletes a conversation with everything it holds; refused while a run is live (spec §17.9). */
  deleteConversation(id: ConversationId): Promise<boolean>;
  /** A new conversation holding copies of the entries [0, atSeq] and of the state (spec §17.7). */
  forkConversation(from: ConversationId, atSeq: number, into: NewConversation): Promise<ConversationRecord>;
  commitConversation(c: ConversationCommit): Promise<CommitResult>;
  entries(id: ConversationId, range: EntryRange): Promise<EntryRecord[]>;
  /** Entries from the newest reset or compaction on (spec §17.3), at most `limit`, oldest first. */
  contextEntries(id: ConversationId, limit: number): Promise<EntryRecord[]>;
  entriesByTask(taskId: TaskId, limit: number): Promise<EntryRecord[]>;
  conversationState(id: ConversationId): Promise<Record<string, unknown>>;
  submit(r: SubmitRequest): Promise<SubmitResult>;
  submission(id: number): Promise<SubmissionRecord | null>;
  /** Queued submissions, oldest first (the inbox), at most `limit`. */
  inbox(id: ConversationId, limit: number): Promise<SubmissionRecord[]>;
  /** The inputs placed in a run, in id order. */
  runInputs(runTaskId: TaskId): Promise<SubmissionRecord[]>;
  /** A turn boundary: places queued steers in the fenced run; returns them (spec §17.6). */
  turnBoundary(r: BoundaryRequest): Promise<SubmissionRecord[]>;
  /** The final boundary: answers the run's inputs and hands follow-ups to a successor (spec §17.6). */
  finishRun(r: FinishRequest): Promise<FinishResult>;
  /**
   * Settles a run that ended without its final boundary (failed, aborted, crashed out of
   * attempts): its inputs become unanswered and the conversation idle; the inbox stays (spec §17.8).
   */
  settleEndedRun(id: ConversationId): Promise<boolean>;
  /** Live tasks of a conversation's scope, background ones included (spec §17.8, abort with background). */
  liveInScope(scope: string): Promise<number>;
  /**
   * Closes the conversation: later submissions are refused and queued inputs withdrawn
   * (`unanswered`, `closed`); the run in progress may finish. False when it was closed already.
   */
  closeConversation(id: ConversationId): Promise<boolean>;
  /**
   * Withdraws the queued inputs and marks the live tasks of the conversation's scope (background
   * ones too with `background`) in one commit; the ids marked (spec §17.8).
   */
  abortConversation(
    id: ConversationId,
    background: boolean,
  ): Promise<{ withdrawn: number; marked: TaskId[] }>;
  /** Withdraws every queued input (unanswered, `reason`); returns how many (spec §17.8). */
  withdrawQueued(id: ConversationId, reason: string): Promise<number>;
}
