/**
 * Conversations (spec §17): transcripts of immutable entries with per-conversation state, and the
 * submissions and inbox through which input reaches their runs. Built on the engine's public API
 * (tasks, seats, scopes, waits, abort) and the conversation operations of the Store contract; the
 * engine never imports this layer.
 */
import { randomUUID } from "node:crypto";
import { DEFAULT_MAX_PAYLOAD_BYTES, toStorableJson } from "../core/json.js";
import type { TaskContext } from "../engine/context.js";
import type { TaskDefinition } from "../engine/definition.js";
import { type BatchEntry, prepareBatch } from "../engine/enqueue.js";
import type { Ratchet } from "../engine/ratchet.js";
import { ConfigError, UnknownTaskError, ValidationError } from "../errors.js";
import { conversationScope } from "../store/conversations/tasks.js";
import type {
  CommitResult,
  ConversationRecord,
  DeliveryMode,
  EntryKind,
  EntryRecord,
  NewEntry,
  SubmissionRecord,
  WhenBusy,
} from "../store/conversations/types.js";
import {
  CONVERSATION_LIMITS,
  checkConversationId,
  checkKind,
  checkTitle,
} from "../store/conversations/validate.js";
import type { NewTask, Store, TaskId } from "../store/store.js";
import { inputText, type RunDefinition, type RunInput, runsAmong } from "./run.js";
import { Submission } from "./submission.js";

export interface ConversationsOptions {
  /** The run this process serves: a task made by `defineRun`. */
  run: RunDefinition;
  /** Steers a turn boundary places: the oldest one, or all queued (spec §17.6). Default "one". */
  steeringMode?: DeliveryMode;
  /** Follow-ups a final boundary places: the oldest one, or all queued. Default "one". */
  followUpMode?: DeliveryMode;
  /** Largest input, entry or state value. Default 1 MiB. */
  maxPayloadBytes?: number;
  /** Admission bound for the queues of tasks created by commits (spec §2.7). Default 1,000,000. */
  maxDepth?: number;
}

/** An entry as an application writes it: a kind (a custom one by `name`) and any JSON data. */
export interface EntryInput {
  kind: EntryKind;
  name?: string;
  data?: unknown;
}

/** What one atomic commit writes (spec §17.4). A state value of `null` deletes the key. */
export interface CommitInput {
  entries?: readonly EntryInput[];
  state?: Readonly<Record<string, unknown>>;
  tasks?: readonly BatchEntry[];
}

export interface CreateOptions {
  title?: string;
  metadata?: unknown;
  /** The task that owns the conversation (a subagent's driver); immutable (spec §17.1). */
  ownerTaskId?: TaskId;
}

export interface SubmitOptions {
  /** Idempotency key per conversation: a repeat returns the first submission (spec §17.5). */
  requestId?: string;
  /** What to do while a run is in progress. Default "follow-up". */
  whenBusy?: WhenBusy;
}

/**
 * The conversations of one store, served with one run definition. Every write is one store
 * operation (one transaction); every wait is bounded by `timeoutMs`. `maxPayloadBytes` and
 * `maxDepth` are this layer's own options: give the values the Ratchet was opened with when those
 * differ from the defaults.
 * Invariant: a conversation changes only through the store's conversation operations (spec §17),
 * so every process sees the same rules whichever one wrote.
 */
export class Conversations {
  readonly ratchet: Ratchet;
  readonly store: Store;
  readonly run: RunDefinition;
  readonly delivery: { steer: DeliveryMode; followUp: DeliveryMode };
  readonly maxPayloadBytes: number;
  readonly maxDepth: number;

  constructor(ratchet: Ratchet, opts: ConversationsOptions) {
    if (!opts?.run?.task) throw new ConfigError("Conversations needs a run made by defineRun");
    const modes = [opts.steeringMode ?? "one", opts.followUpMode ?? "one"];
    if (!modes.every((m) => m === "one" || m === "all"))
      throw new ConfigError('steeringMode and followUpMode must be "one" or "all"');
    this.ratchet = ratchet;
    this.store = ratchet.store;
    this.run = opts.run;
    this.delivery = { steer: modes[0] as DeliveryMode, followUp: modes[1] as DeliveryMode };
    this.maxPayloadBytes = opts.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
    this.maxDepth = opts.maxDepth ?? 1_000_000;
    if (!ratchet.definitions().includes(opts.run.task)) ratchet.register(opts.run.task);
    opts.run.attach?.(ratchet);
    opts.run.bound = this;
  }

  /**
   * The Conversations of the run registered with `ratchet` (by `defineRun`): the one named `run`,
   * or the only one. For hosts that load definitions from a module (the CLI, the server).
   */
  static of(
    ratchet: Ratchet,
    opts: Omit<ConversationsOptions, "run"> & { run?: string } = {},
  ): Conversations {
    const runs = runsAmong(ratchet.definitions());
    const run = opts.run === undefined ? runs : runs.filter((r) => r.name === opts.run);
    if (run.length !== 1) {
      const names = runs.map((r) => r.name).join(", ") || "none";
      throw new ConfigError(
        opts.run === undefined
          ? `a conversation needs exactly one run definition (defineRun) among the tasks loaded; found ${names}`
          : `no run definition "${opts.run}" among the tasks loaded (runs: ${names})`,
      );
    }
    return new Conversations(ratchet, { ...opts, run: run[0]! });
  }

  // ------------------------------------------------------------ conversations

  /** Creates the conversation, or returns the one that has this id (spec §17.1). */
  async create(id: string, opts: CreateOptions = {}): Promise<ConversationRecord> {
    const r = await this.store.conversations.createConversation(this.#newConversation(id, opts));
    return r.conversation;
  }

  get(id: string): Promise<ConversationRecord | null> {
    return this.store.conversations.getConversation(id);
  }

  list(
    f: { after?: string; ownerTaskId?: TaskId; busy?: boolean; limit?: number } = {},
  ): Promise<ConversationRecord[]> {
    return this.store.conversations.listConversations({ ...f, limit: f.limit ?? 100 });
  }

  /** Deletes it and everything it holds (spec §17.9); refused while a run is in progress. */
  delete(id: string): Promise<boolean> {
    return this.store.conversations.deleteConversation(id);
  }

  /**
   * Closes it (spec §17.8): later submissions are refused (`RATCHET_INVALID_STATE`) and queued
   * inputs end `unanswered` with `closed`; the run in progress may finish, unless `abort` is set.
   */
  async close(id: string, opts: { abort?: boolean; timeoutMs?: number } = {}): Promise<boolean> {
    const closed = await this.store.conversations.closeConversation(id);
    if (opts.abort) await this.abort(id, { timeoutMs: opts.timeoutMs });
    return closed;
  }

  /** A new conversation with copies of the entries up to `atSeq` and of the state (spec §17.7). */
  fork(from: string, atSeq: number, opts: CreateOptions & { id?: string } = {}): Promise<ConversationRecord> {
    const id = opts.id ?? randomUUID();
    return this.store.conversations.forkConversation(from, atSeq, this.#newConversation(id, opts));
  }

  #newConversation(id: string, o: CreateOptions) {
    checkConversationId(id);
    return {
      id,
      title: checkTitle(o.title ?? null),
      metadata:
        o.metadata === undefined
          ? null
          : toStorableJson(o.metadata, "conversation metadata", CONVERSATION_LIMITS.metadataBytes),
      ownerTaskId: o.ownerTaskId ?? null,
    };
  }

  // -------------------------------------------------------------- entries

  /** An application commit (spec §17.4); with `key`, applied once per key. */
  commit(id: string, c: CommitInput, opts: { key?: string } = {}): Promise<CommitResult> {
    return this.commitAs(id, c, opts.key ?? null, null);
  }

  /**
   * A commit by any running task, e.g. a tool task writing its own result entry: fenced by the
   * task's claim and keyed by its id and `name`, so its rerun writes nothing twice (spec §17.4);
   * its entries record the task (`entriesByTask`).
   */
  commitFromTask(ctx: TaskContext, id: string, name: string, c: CommitInput): Promise<CommitResult> {
    if (typeof name !== "string" || name.length === 0 || name.length > 150)
      throw new ValidationError("a task commit's name must be a string of 1–150 characters");
    return this.commitAs(id, c, `task:${ctx.taskId}:${name}`, ctx);
  }

  /** @internal A commit; a running task's is fenced by its claim through ctx.fenced (spec §4.8). */
  async commitAs(
    id: string,
    c: CommitInput,
    key: string | null,
    ctx: TaskContext | null,
  ): Promise<CommitResult> {
    if (c === null || typeof c !== "object") throw new ValidationError("a commit must be an object");
    const entries = (c.entries ?? []).map((e) => this.entryOf(e));
    const state = Object.entries(c.state ?? {}).map(([k, v]) => ({
      key: k,
      value: v === null ? null : toStorableJson(v, `state "${k.slice(0, 40)}"`, this.maxPayloadBytes),
    }));
    const tasks = c.tasks && c.tasks.length > 0 ? await this.#prepare(c.tasks) : [];
    const req = { conversationId: id, entries, state, tasks, key, maxDepth: this.maxDepth };
    const r = ctx
      ? await ctx.fenced((fence) => this.store.conversations.commitConversation({ ...req, fence }))
      : await this.store.conversations.commitConversation({ ...req, fence: null });
    if (r.applied && r.taskIds.length > 0) this.ratchet.wake();
    return r;
  }

  /** @internal An entry in the store's form, checked. */
  entryOf(e: EntryInput): NewEntry {
    if (e === null || typeof e !== "object") throw new ValidationError("an entry must be an object");
    const { kind, name } = checkKind(e.kind, e.name);
    return { kind, name, data: toStorableJson(e.data ?? null, `a ${kind} entry`, this.maxPayloadBytes) };
  }

  entries(id: string, range: { from?: number; to?: number; limit?: number } = {}): Promise<EntryRecord[]> {
    return this.store.conversations.entries(id, { ...range, limit: range.limit ?? 1_000 });
  }

  /** What a model sees: entries from the newest reset or compaction on (spec §17.3). */
  context(id: string, opts: { limit?: number } = {}): Promise<EntryRecord[]> {
    return this.store.conversations.contextEntries(id, opts.limit ?? 10_000);
  }

  entriesByTask(taskId: TaskId, opts: { limit?: number } = {}): Promise<EntryRecord[]> {
    return this.store.conversations.entriesByTask(taskId, opts.limit ?? 1_000);
  }

  state(id: string): Promise<Record<string, unknown>> {
    return this.store.conversations.conversationState(id);
  }

  // ---------------------------------------------------------- submissions

  /**
   * Submits input (spec §17.5): placed at once with a new run when the conversation is idle,
   * queued as a follow-up or steer while it is busy, or refused (`reject`: ConversationBusyError,
   * nothing written). A repeated `requestId` returns the first submission.
   */
  async submit(id: string, input: unknown, opts: SubmitOptions = {}): Promise<Submission> {
    const r = await this.store.conversations.submit({
      conversationId: id,
      requestId: opts.requestId ?? null,
      input: inputText(input, this.maxPayloadBytes),
      whenBusy: opts.whenBusy ?? "follow-up",
      run: await this.runTask(id),
      delivery: this.delivery,
      maxDepth: this.maxDepth,
    });
    // A new run is due now; this process's worker need not wait for its poll to find it.
    if (r.created && r.submission.status === "placed") this.ratchet.wake();
    return new Submission(this, r.submission, r.created);
  }

  /** Reacquires a submission by id, e.g. to wait for it after a restart. */
  async submission(id: number): Promise<Submission | null> {
    const s = await this.store.conversations.submission(id);
    return s ? new Submission(this, s, false) : null;
  }

  /** Queued submissions, oldest first. */
  inbox(id: string, opts: { limit?: number } = {}): Promise<SubmissionRecord[]> {
    return this.store.conversations.inbox(id, opts.limit ?? 1_000);
  }

  /**
   * Stops the conversation (spec §17.8): in one commit, withdraws its queued inputs (unanswered,
   * `aborted`) and marks its run's task tree for the engine's abort (bottom-up: each task's abort
   * handler after the work it owns); resolves once the conversation is idle. Entries already
   * written stay. With `background`, the background tasks of the conversation's scope are marked
   * too, and awaited until they end.
   */
  async abort(
    id: string,
    opts: { background?: boolean; timeoutMs?: number } = {},
  ): Promise<{ withdrawn: number; marked: number }> {
    const background = opts.background ?? false;
    const timeoutMs = opts.timeoutMs ?? 300_000;
    const deadline = performance.now() + timeoutMs;
    const r = await this.store.conversations.abortConversation(id, background);
    // Marks nothing more; lets this process's engine record its definitions, signal and wake up.
    await this.ratchet.abortScope(conversationScope(id), { background });
    await this.ratchet.waitForIdle(conversationScope(id), { timeoutMs });
    if (background)
      for (const t of r.marked)
        await this.ratchet.waitFor(t, { timeoutMs: Math.max(0, Math.floor(deadline - performance.now())) });
    await this.store.conversations.settleEndedRun(id);
    return { withdrawn: r.withdrawn, marked: new Set(r.marked).size };
  }

  /** Resolves once no task of the conversation that ordinary traversal reaches is live (spec §12.12). */
  async waitForIdle(id: string, opts: { timeoutMs?: number } = {}): Promise<void> {
    checkConversationId(id);
    await this.ratchet.waitForIdle(conversationScope(id), { timeoutMs: opts.timeoutMs ?? 300_000 });
    await this.store.conversations.settleEndedRun(id);
  }

  // ------------------------------------------------------------- internals

  /** @internal The run task a submission or final boundary creates, in the store's form. */
  async runTask(conversationId: string, after?: number): Promise<NewTask> {
    checkConversationId(conversationId);
    // spec §19.31: a successor names its predecessor, for a run whose seat is its tenant's.
    const input: RunInput = after === undefined ? { conversationId } : { conversationId, after };
    const { batch } = await this.#prepareWith([{ task: this.run.task, input }]);
    return batch[0]!;
  }

  #prepare(entries: readonly BatchEntry[]): Promise<NewTask[]> {
    if (!Array.isArray(entries)) throw new ValidationError("tasks must be an array");
    return this.#prepareWith(entries).then((r) => r.batch);
  }

  #prepareWith(entries: readonly BatchEntry[]) {
    return prepareBatch(entries, {
      now: Date.now(),
      maxPayloadBytes: this.maxPayloadBytes,
      resolve: (task) => this.#resolve(task),
    });
  }

  #resolve(task: TaskDefinition | string): TaskDefinition {
    const defs = this.ratchet.definitions();
    if (typeof task === "string") {
      const d = defs.find((x) => x.name === task);
      if (!d) throw new UnknownTaskError(task);
      return d;
    }
    if (!task || typeof task.run !== "function")
      throw new ValidationError("a task must be a definition or a registered name");
    if (!defs.includes(task)) this.ratchet.register(task);
    return task;
  }
}
