/**
 * A conversation's run (spec §17.5–§17.6): an ordinary task the application defines, wrapped so
 * that it owns its conversation for the span of one run and reaches it through a `RunContext`.
 *
 * Each run is one task with input `{ conversationId }`. It holds a seat of the group
 * `ratchet.conversation` keyed by the conversation with limit 1, and the store only creates a run
 * where none is in progress; the seat orders a successor after the run that created it. A run with
 * a tenant seat (spec §19.31) holds its tenant's seat instead and waits for its predecessor.
 *
 * Every write a run makes is fenced by its claim and keyed by the run's task id and a name the
 * code gives, so a rerun after a crash (which replays the code from the top, spec §4.2) gets the
 * first result of each commit and boundary back instead of writing it twice.
 * Invariant: one run per conversation executes at a time, across every process (spec §17.5).
 */
import { toStorableJson } from "../core/json.js";
import type { TaskContext } from "../engine/context.js";
import { defineTask, type TaskDefinition, type TaskSpec } from "../engine/definition.js";
import type { Ratchet } from "../engine/ratchet.js";
import { ConfigError, ValidationError } from "../errors.js";
import type {
  CommitResult,
  EntryRecord,
  FinishResult,
  SubmissionRecord,
} from "../store/conversations/types.js";
import type { CommitInput, Conversations, EntryInput } from "./conversations.js";

/** The seat group every run holds, keyed by conversation (spec §17.5). */
export const RUN_SEAT_GROUP = "ratchet.conversation";
/** The seat group of runs with a tenant seat, keyed by tenant (spec §19.31). */
export const RUN_TENANT_GROUP = "ratchet.tenant";

export interface RunInput {
  conversationId: string;
  /** The run whose final boundary created this one (spec §17.6), which it starts after (spec §19.31). */
  after?: number;
}

/**
 * A per-tenant limit on runs (spec §19.31): at most `limit` runs of one tenant's conversations
 * execute at once, across every worker and process; `key` maps a conversation id to its tenant
 * (1–200 characters). The limit can be changed per tenant at run time with
 * `ratchet.setConcurrencyLimit(group, n, { key: tenant })`.
 */
export interface TenantSeat {
  key: (conversationId: string) => string;
  limit: number;
  /** The seat group (default `ratchet.tenant`); agents sharing a group share its tenants' limits. */
  group?: string;
}

/**
 * A run's task options. `fairness` and `rateLimit` pass through to its task (spec §14.10, §14.12:
 * e.g. a tenant's key from the conversation id); its seat is the conversation's own (spec §17.5),
 * or with `tenant` its tenant's (spec §19.31).
 */
export interface RunSpec<O>
  extends Pick<
    TaskSpec<RunInput, O>,
    "name" | "version" | "maxMs" | "retry" | "queue" | "fairness" | "rateLimit"
  > {
  run(run: RunContext, ctx: TaskContext): Promise<O> | O;
  onAbort?(ctx: TaskContext, input: RunInput): Promise<unknown> | unknown;
  /** A per-tenant limit on runs, in place of the per-conversation seat (spec §19.31). */
  tenant?: TenantSeat;
}

export interface RunDefinition<O = unknown> {
  readonly name: string;
  /** The task to register with `Ratchet.open({ tasks })`. */
  readonly task: TaskDefinition<RunInput, O>;
  /** @internal The Conversations of this process that serves this run (set by `new Conversations`). */
  bound: Conversations | undefined;
  /** Called by `new Conversations` with its Ratchet: registers what the run needs besides its task. */
  attach?: (ratchet: Ratchet) => void;
}

/**
 * The runs defined in this process, by their task's `run` function (a host that loads definitions
 * may pass them through defineTask again, which keeps the function and makes a new object), so a
 * CLI or server finds the run among the definitions it loaded.
 */
const RUNS = new WeakMap<TaskDefinition["run"], RunDefinition>();

/** The run definitions among `defs` (e.g. `ratchet.definitions()`), in their order. */
export function runsAmong(defs: readonly TaskDefinition[]): RunDefinition[] {
  return defs.map((d) => RUNS.get(d.run)).filter((r) => r !== undefined);
}

/** Defines a conversation's run: application code driving one run of a conversation. */
export function defineRun<O = unknown>(spec: RunSpec<O>): RunDefinition<O> {
  if (spec === null || typeof spec !== "object" || typeof spec.run !== "function")
    throw new ConfigError("defineRun needs an object with a run function");
  const def: RunDefinition<O> = {
    name: spec.name,
    bound: undefined,
    task: undefined as unknown as TaskDefinition<RunInput, O>,
  };
  (def as { task: TaskDefinition<RunInput, O> }).task = defineTask<RunInput, O>({
    name: spec.name,
    version: spec.version,
    maxMs: spec.maxMs,
    retry: spec.retry,
    queue: spec.queue,
    fairness: spec.fairness,
    rateLimit: spec.rateLimit,
    concurrency: seatOf(spec),
    async run(ctx, input) {
      const conversations = def.bound;
      if (!conversations)
        throw new ConfigError(`run "${spec.name}" has no Conversations in this process: create one with it`);
      // spec §19.31: the tenant's seat does not order a successor after its predecessor; the wait does.
      if (spec.tenant && input.after !== undefined) await afterPredecessor(ctx, input.after);
      const rc = new RunContext(conversations, ctx, input.conversationId);
      const out = await spec.run(rc, ctx);
      // A run that returns without answering ends here: its inputs unanswered, follow-ups handed on.
      if (!rc.finished) await rc.answer(null);
      return out;
    },
    onAbort: spec.onAbort,
  });
  RUNS.set(def.task.run, def as RunDefinition);
  return def;
}

/**
 * The run's seat: its conversation's (spec §17.5), or with `tenant`, its tenant's (spec §19.31).
 * Invariant: either way at most one run of a conversation executes at a time — a tenant seat's
 * run waits for the run that created it before its code runs.
 */
function seatOf(spec: RunSpec<unknown>): TaskSpec<RunInput, unknown>["concurrency"] {
  const t = spec.tenant;
  if (t === undefined) return { group: RUN_SEAT_GROUP, key: (i) => i.conversationId, limit: 1 };
  if (t === null || typeof t !== "object" || typeof t.key !== "function")
    throw new ConfigError(`run "${spec.name}": tenant needs a key function of the conversation id`);
  if (!Number.isInteger(t.limit) || t.limit < 1)
    throw new ConfigError(`run "${spec.name}": tenant.limit must be an integer ≥ 1`);
  if (t.group !== undefined && (typeof t.group !== "string" || t.group === RUN_SEAT_GROUP))
    throw new ConfigError(
      `run "${spec.name}": tenant.group must be a group name other than ${RUN_SEAT_GROUP}`,
    );
  return { group: t.group ?? RUN_TENANT_GROUP, key: (i) => t.key(i.conversationId), limit: t.limit };
}

/**
 * Parks the run (freeing its tenant's place, spec §14.9) until the run that created it is terminal
 * (spec §12.3); a predecessor already pruned has ended long ago.
 */
async function afterPredecessor(ctx: TaskContext, id: number): Promise<void> {
  try {
    await ctx.waitFor([id]);
  } catch (e) {
    if ((e as { code?: string }).code !== "RATCHET_INVALID_WAIT") throw e;
  }
}

/** What a run's code uses to read and write its conversation (spec §17.6). */
export class RunContext {
  readonly conversationId: string;
  readonly taskId: number;
  readonly #c: Conversations;
  readonly #ctx: TaskContext;
  #finished = false;

  constructor(c: Conversations, ctx: TaskContext, conversationId: string) {
    this.#c = c;
    this.#ctx = ctx;
    this.conversationId = conversationId;
    this.taskId = ctx.taskId;
  }

  get finished(): boolean {
    return this.#finished;
  }

  #key(name: string): string {
    if (typeof name !== "string" || name.length === 0 || name.length > 150)
      throw new ValidationError("a run's commit or boundary name must be a string of 1–150 characters");
    return `run:${this.taskId}:${name}`;
  }

  /** The inputs placed in this run so far (the first, and steers placed at boundaries), in id order. */
  inputs(): Promise<SubmissionRecord[]> {
    return this.#c.store.conversations.runInputs(this.taskId);
  }

  /** The conversation's entries in a seq range (spec §17.4), e.g. what a compaction kept verbatim. */
  entries(range: { from?: number; to?: number; limit?: number } = {}): Promise<EntryRecord[]> {
    return this.#c.entries(this.conversationId, range);
  }

  /** The conversation's application state (spec §17.4), e.g. its agent configuration. */
  state(): Promise<Record<string, unknown>> {
    return this.#c.state(this.conversationId);
  }

  /** What a model sees: the entries from the newest reset or compaction on (spec §17.3). */
  context(limit = 10_000): Promise<EntryRecord[]> {
    return this.#c.context(this.conversationId, { limit });
  }

  /** A task's record, e.g. one this run started through a commit (null when pruned). */
  task(id: number) {
    return this.#c.ratchet.get(id);
  }

  /** Commits entries, state and tasks atomically, once per `name` (spec §17.4). */
  async commit(name: string, c: CommitInput): Promise<CommitResult> {
    return this.#c.commitAs(this.conversationId, c, this.#key(`commit:${name}`), this.#ctx);
  }

  /**
   * A turn boundary (spec §17.6), e.g. after a tool round: queued steers join this run now, their
   * user entries after everything the run committed. Returns them (none is common).
   */
  async boundary(name: string): Promise<SubmissionRecord[]> {
    const key = this.#key(`boundary:${name}`);
    // spec §4.8: fenced by the run's claim; a refusal ends the invocation.
    return this.#ctx.fenced((fence) =>
      this.#c.store.conversations.turnBoundary({
        fence,
        conversationId: this.conversationId,
        key,
        delivery: this.#c.delivery,
      }),
    );
  }

  /**
   * Ends the run at its final boundary (spec §17.6): writes the answer (null: none, so the inputs
   * end `unanswered`, `no_answer`), settles every input placed in the run, and hands queued
   * follow-ups and steers to the next run, created in the same commit.
   */
  async answer(entry: EntryInput | null): Promise<FinishResult> {
    const answer = entry === null ? null : this.#c.entryOf(entry);
    const run = await this.#c.runTask(this.conversationId, this.taskId);
    const r = await this.#ctx.fenced((fence) =>
      this.#c.store.conversations.finishRun({
        fence,
        conversationId: this.conversationId,
        key: this.#key("final"),
        delivery: this.#c.delivery,
        answer,
        run,
        maxDepth: this.#c.maxDepth,
      }),
    );
    this.#finished = true;
    if (r.successor !== null) this.#c.ratchet.wake();
    return r;
  }
}

export function inputText(value: unknown, maxBytes: number): string {
  return toStorableJson(value, "the input", maxBytes);
}
