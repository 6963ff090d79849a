/**
 * Submissions and the inbox (spec §17.5–§17.8), written once as programs for both stores.
 *
 * A submission is `queued` (in the inbox), `placed` (its user entry is written and a run owns it),
 * `done` (the run answered: `answerSeq`) or `unanswered` (with a reason). The conversation's
 * `run_task_id` is the one run in progress: it is set only by the commit that creates the run and
 * cleared only by the run's final boundary or by the settlement of a run that ended without one.
 */
import { ConversationBusyError, InvalidStateError, ValidationError } from "../../errors.js";
import type { NewTask, TaskId } from "../store.js";
import { abortScope } from "../tree/ops.js";
import { one, type Program, q } from "../tree/program.js";
import { appendEntries } from "./conversations.js";
import {
  C,
  CM,
  type ConversationRow,
  checkFence,
  checkRunOwner,
  lockConversation,
  SUB,
  type SubmissionRow,
  T,
  toSubmission,
} from "./rows.js";
import { conversationScope, insertTask } from "./tasks.js";
import type {
  BoundaryRequest,
  DeliveryMode,
  FinishRequest,
  FinishResult,
  SubmissionRecord,
  SubmitRequest,
  SubmitResult,
} from "./types.js";
import {
  checkBytes,
  checkConversationId,
  checkEntries,
  checkId,
  checkLimit,
  CONVERSATION_LIMITS as L,
} from "./validate.js";

const MODES = ["follow-up", "steer", "reject"];
const DELIVERY = ["one", "all"];

function checkDelivery(d: { steer: DeliveryMode; followUp: DeliveryMode }): void {
  if (!DELIVERY.includes(d?.steer) || !DELIVERY.includes(d?.followUp))
    throw new ValidationError('delivery modes must be "one" or "all"');
}

function* byId(id: number): Program<SubmissionRecord> {
  const r = yield* one<SubmissionRow>(`SELECT * FROM ${SUB} WHERE id = :id`, { id });
  return toSubmission(r!);
}

/** A keyed boundary's recorded result, if it was applied before (spec §17.6). */
function* recorded<R>(conversationId: string, key: string): Program<R | undefined> {
  const r = yield* one<{ result: string }>(
    `SELECT result FROM ${CM} WHERE conversation_id = :c AND key = :k`,
    {
      c: conversationId,
      k: key,
    },
  );
  return r ? (JSON.parse(r.result) as R) : undefined;
}

function* record(conversationId: string, key: string, result: unknown): Program<void> {
  yield* q(`INSERT INTO ${CM} (conversation_id, key, result) VALUES (:c, :k, :r)`, {
    c: conversationId,
    k: key,
    r: JSON.stringify(result),
  });
}

/** The reason a run that ended without its final boundary leaves its inputs unanswered (spec §17.8). */
function endedReason(outcome: string | null): string {
  if (outcome === "aborted" || outcome === "orphaned") return "aborted";
  if (outcome === "completed") return "no_answer";
  return "run_failed";
}

/**
 * If the conversation's run is terminal, its placed inputs become unanswered and the
 * conversation idle; queued items stay in the inbox (spec §17.8). The caller holds the lock.
 * Invariant: no conversation stays busy behind a run that can no longer answer.
 */
export function* settleIfEnded(row: ConversationRow): Program<boolean> {
  if (row.run_task_id === null) return false;
  const run = yield* one<{ status: string; outcome: string | null; owner_id: number | null }>(
    `SELECT status, outcome, owner_id FROM ${T} WHERE id = :id`,
    { id: row.run_task_id },
  );
  if (run && run.status !== "terminal") return false;
  yield* q(
    `UPDATE ${SUB} SET status = 'unanswered', reason = :reason, settled_at = :now
     WHERE run_task_id = :run AND status = 'placed'`,
    { run: row.run_task_id, reason: endedReason(run?.outcome ?? null) },
  );
  // The run was owned by the conversation's owner task and that owner is being aborted: the
  // cascade reached this conversation, so its queued inputs are withdrawn too (spec §17.1, §12.5).
  if (run?.owner_id !== null && run?.owner_id !== undefined) {
    const owner = yield* one<{ abort_requested: number }>(`SELECT abort_requested FROM ${T} WHERE id = :id`, {
      id: run.owner_id,
    });
    if (owner?.abort_requested === 1)
      yield* q(
        `UPDATE ${SUB} SET status = 'unanswered', reason = 'aborted', settled_at = :now
         WHERE conversation_id = :c AND status = 'queued'`,
        { c: row.id },
      );
  }
  yield* q(`UPDATE ${C} SET run_task_id = NULL, updated_at = :now WHERE id = :id`, { id: row.id });
  row.run_task_id = null;
  return true;
}

/** Places submissions: writes their user entries and gives them to `run` (spec §17.6). */
function* place(row: ConversationRow, items: readonly SubmissionRow[], run: TaskId): Program<void> {
  for (const s of items) {
    const [seq] = yield* appendEntries(
      row,
      [{ kind: "user", name: null, data: s.input }],
      null,
      Number(s.id),
    );
    yield* q(`UPDATE ${SUB} SET status = 'placed', entry_seq = :seq, run_task_id = :run WHERE id = :id`, {
      id: s.id,
      seq,
      run,
    });
  }
}

/** The queued items a boundary selects, in id order: first or all of each mode (spec §17.6). */
function* select(
  conversationId: string,
  modes: readonly { mode: "steer" | "follow-up"; delivery: DeliveryMode }[],
): Program<SubmissionRow[]> {
  const out: SubmissionRow[] = [];
  for (const m of modes) {
    const rows = yield* q<SubmissionRow>(
      `SELECT * FROM ${SUB} WHERE conversation_id = :c AND status = 'queued' AND mode = :mode
       ORDER BY id LIMIT CAST(:n AS bigint)`,
      { c: conversationId, mode: m.mode, n: m.delivery === "one" ? 1 : L.readLimit },
    );
    out.push(...rows);
  }
  return out.sort((a, b) => Number(a.id) - Number(b.id));
}

/**
 * The final boundary (spec §17.6): selects steers and follow-ups, and if any, starts one run with
 * them as its inputs. Sets the conversation's run to that run, or to none.
 */
function* finalBoundary(
  row: ConversationRow,
  delivery: SubmitRequest["delivery"],
  runTask: NewTask,
  maxDepth: number,
): Program<TaskId | null> {
  const items = yield* select(row.id, [
    { mode: "steer", delivery: delivery.steer },
    { mode: "follow-up", delivery: delivery.followUp },
  ]);
  let run: TaskId | null = null;
  if (items.length > 0) {
    run = yield* insertTask(runTask, row, maxDepth);
    yield* place(row, items, run);
  }
  yield* q(`UPDATE ${C} SET run_task_id = :run, updated_at = :now WHERE id = :id`, { id: row.id, run });
  row.run_task_id = run;
  return run;
}

/**
 * spec §17.5: a repeat of a requestId returns the first submission and writes nothing; an idle
 * conversation with an empty inbox places the input and starts a run in the same commit; a busy
 * one queues it (follow-up, steer) or refuses it (reject, ConversationBusy, nothing written).
 * Invariant: at most one run per conversation — a run is created only where none is in progress.
 */
export function* submit(r: SubmitRequest): Program<SubmitResult> {
  checkConversationId(r?.conversationId);
  if (r.requestId !== null) checkId(r.requestId, "a request id");
  if (typeof r.input !== "string") throw new ValidationError("an input must be JSON text");
  checkBytes(r.input, L.inputBytes, "the input");
  if (!MODES.includes(r.whenBusy))
    throw new ValidationError('whenBusy must be "follow-up", "steer" or "reject"');
  checkDelivery(r.delivery);
  const row = yield* lockConversation(r.conversationId);
  if (r.requestId !== null) {
    const found = yield* one<SubmissionRow>(
      `SELECT * FROM ${SUB} WHERE conversation_id = :c AND request_id = :r`,
      { c: row.id, r: r.requestId },
    );
    if (found) return { submission: toSubmission(found), created: false };
  }
  if (row.closed_at !== null)
    throw new InvalidStateError(`conversation "${row.id}" is closed; it takes no more input`);
  yield* settleIfEnded(row);
  const waiting = yield* one(
    `SELECT id FROM ${SUB} WHERE conversation_id = :c AND status = 'queued' LIMIT 1`,
    {
      c: row.id,
    },
  );
  const busy = row.run_task_id !== null;
  if ((busy || waiting) && r.whenBusy === "reject") throw new ConversationBusyError(row.id);
  const mode = r.whenBusy === "steer" ? "steer" : "follow-up";
  const [inserted] = yield* q<{ id: number }>(
    `INSERT INTO ${SUB} (conversation_id, request_id, mode, input, status, created_at)
     VALUES (:c, :r, :mode, :input, 'queued', :now) RETURNING id`,
    { c: row.id, r: r.requestId, mode, input: r.input },
  );
  const id = Number(inserted!.id);
  if (!busy) {
    if (waiting) yield* finalBoundary(row, r.delivery, r.run, r.maxDepth);
    else {
      const run = yield* insertTask(r.run, row, r.maxDepth);
      const sub = yield* one<SubmissionRow>(`SELECT * FROM ${SUB} WHERE id = :id`, { id });
      yield* place(row, [sub!], run);
      yield* q(`UPDATE ${C} SET run_task_id = :run WHERE id = :id`, { id: row.id, run });
    }
  }
  return { submission: yield* byId(id), created: true };
}

export function* submission(id: number): Program<SubmissionRecord | null> {
  if (!Number.isSafeInteger(id)) throw new ValidationError("a submission id must be an integer");
  const r = yield* one<SubmissionRow>(`SELECT * FROM ${SUB} WHERE id = :id`, { id });
  return r ? toSubmission(r) : null;
}

export function* inbox(conversationId: string, limit: number): Program<SubmissionRecord[]> {
  checkConversationId(conversationId);
  checkLimit(limit, L.readLimit);
  const rows = yield* q<SubmissionRow>(
    `SELECT * FROM ${SUB} WHERE conversation_id = :c AND status = 'queued' ORDER BY id LIMIT CAST(:n AS bigint)`,
    { c: conversationId, n: limit },
  );
  return rows.map(toSubmission);
}

export function* runInputs(runTaskId: TaskId): Program<SubmissionRecord[]> {
  if (!Number.isSafeInteger(runTaskId)) throw new ValidationError("a task id must be an integer");
  const rows = yield* q<SubmissionRow>(
    `SELECT * FROM ${SUB} WHERE run_task_id = :run ORDER BY id LIMIT ${L.readLimit}`,
    { run: runTaskId },
  );
  return rows.map(toSubmission);
}

/**
 * A turn boundary (spec §17.6): the queued steers (first or all) join the fenced run, their user
 * entries written after everything the run committed so far; follow-ups wait for the final one.
 */
export function* turnBoundary(r: BoundaryRequest): Program<SubmissionRecord[]> {
  checkConversationId(r?.conversationId);
  checkDelivery(r.delivery);
  checkId(r.key, "a boundary key");
  const row = yield* lockConversation(r.conversationId);
  let ids = yield* recorded<number[]>(row.id, r.key);
  if (ids === undefined) {
    yield* checkFence(r.fence);
    checkRunOwner(row, r.fence);
    const items = yield* select(row.id, [{ mode: "steer", delivery: r.delivery.steer }]);
    yield* place(row, items, r.fence.taskId);
    ids = items.map((s) => Number(s.id));
    yield* record(row.id, r.key, ids);
  }
  const out: SubmissionRecord[] = [];
  for (const id of ids) out.push(yield* byId(id));
  return out;
}

/**
 * The final boundary of a run (spec §17.6): writes the answer, settles every input placed in the
 * run (`done`, or `unanswered` with `no_answer` when there is no answer), then hands the selected
 * steers and follow-ups to one successor run created in the same commit.
 * Invariant: the run's inputs settle exactly once, in the commit that ends the run.
 */
export function* finishRun(r: FinishRequest): Program<FinishResult> {
  checkConversationId(r?.conversationId);
  checkDelivery(r.delivery);
  if (r.answer) checkEntries([r.answer]);
  checkId(r.key, "a boundary key");
  const row = yield* lockConversation(r.conversationId);
  const before = yield* recorded<FinishResult>(row.id, r.key);
  if (before) return before;
  yield* checkFence(r.fence);
  checkRunOwner(row, r.fence);
  let answerSeq: number | null = null;
  if (r.answer) [answerSeq] = (yield* appendEntries(row, [r.answer], r.fence.taskId, null)) as [number];
  yield* q(
    `UPDATE ${SUB} SET status = :status, answer_seq = :answer, reason = :reason, settled_at = :now
     WHERE run_task_id = :run AND status = 'placed'`,
    {
      run: r.fence.taskId,
      status: answerSeq === null ? "unanswered" : "done",
      answer: answerSeq,
      reason: answerSeq === null ? "no_answer" : null,
    },
  );
  const successor = yield* finalBoundary(row, r.delivery, r.run, r.maxDepth);
  yield* record(row.id, r.key, { answerSeq, successor });
  return { answerSeq, successor };
}

export function* settleEndedRun(conversationId: string): Program<boolean> {
  checkConversationId(conversationId);
  return yield* settleIfEnded(yield* lockConversation(conversationId));
}

/** spec §17.8: queued inputs become unanswered with `reason`; the entries already written stay. */
export function* withdrawQueued(conversationId: string, reason: string): Program<number> {
  checkConversationId(conversationId);
  checkId(reason, "a reason");
  const row = yield* lockConversation(conversationId);
  const rows = yield* q(
    `UPDATE ${SUB} SET status = 'unanswered', reason = :reason, settled_at = :now
     WHERE conversation_id = :c AND status = 'queued' RETURNING id`,
    { c: row.id, reason },
  );
  return rows.length;
}

/** spec §17.8: seals the inbox; the queued inputs are withdrawn with the reason `closed`. */
export function* closeConversation(conversationId: string): Program<boolean> {
  checkConversationId(conversationId);
  const row = yield* lockConversation(conversationId);
  if (row.closed_at !== null) return false;
  yield* q(`UPDATE ${C} SET closed_at = :now, updated_at = :now WHERE id = :id`, { id: row.id });
  yield* q(
    `UPDATE ${SUB} SET status = 'unanswered', reason = 'closed', settled_at = :now
     WHERE conversation_id = :c AND status = 'queued'`,
    { c: row.id },
  );
  return true;
}

/**
 * spec §17.8: in one commit, withdraws the queued inputs (`aborted`) and marks every live task of
 * the conversation's scope (background ones too with `background`) with the engine's abort (spec
 * §12.5), whose cascade reaches what they own. Returns the ids marked.
 * Invariant: no queued input of the conversation can be placed after the marks.
 */
export function* abortConversation(
  conversationId: string,
  background: boolean,
): Program<{ withdrawn: number; marked: TaskId[] }> {
  checkConversationId(conversationId);
  if (typeof background !== "boolean") throw new ValidationError("background must be a boolean");
  const row = yield* lockConversation(conversationId);
  const rows = yield* q(
    `UPDATE ${SUB} SET status = 'unanswered', reason = 'aborted', settled_at = :now
     WHERE conversation_id = :c AND status = 'queued' RETURNING id`,
    { c: row.id },
  );
  const marked = yield* abortScope(conversationScope(row.id), background);
  return { withdrawn: rows.length, marked };
}
