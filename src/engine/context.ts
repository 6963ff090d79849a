/**
 * The `ctx` a task's code receives, and the invocation it belongs to.
 *
 * An invocation ends exactly once, for one of: the code returned or threw,
 * the deadline passed (spec §4.1), an abort mark was seen (spec §4.5), the
 * lease was lost (spec §3.7), or the code suspended on ctx.sleep (spec §4.4).
 * After the end every ctx write rejects and `ctx.signal` is aborted, so code
 * that outlives its invocation can change nothing.
 */
import type { Clock } from "../core/clock.js";
import type { StoredError } from "../core/json.js";
import { toStorableJson } from "../core/json.js";
import type { Outcome } from "../core/model.js";
import {
  AbortedError,
  DuplicateStepError,
  InvalidStateError,
  LeaseLostError,
  RatchetError,
  ValidationError,
} from "../errors.js";
import type {
  ClaimedTask,
  Fence,
  NewChild,
  SettleResult,
  StepWrite,
  Store,
  TaskRecord,
  WaitPolicy,
} from "../store/store.js";
import { eventResultKey } from "../store/tree/keys.js";
import { MAX_SPAWN_BATCH, MAX_WAIT_MEMBERS } from "../store/tree/ops.js";
import type { Batcher } from "./batcher.js";
import type { Deadline, Deadlines } from "./deadlines.js";
import { checkKeys, checkName, describe, MAX_MS, type TaskDefinition } from "./definition.js";
import { type ChildSpec, childOf, type SpawnOptions } from "./spawn.js";
import { commitStepWith, type StepCommits, type StepCommitWith } from "./step-commit.js";
import { retryStore } from "./store-retry.js";
import { InvocationStreams, type StreamDeps, type StreamWriter } from "./stream.js";
import { checkRead, readChunks, type StreamChunk, StreamWaiters } from "./stream-reader.js";

export interface TaskContext {
  readonly taskId: number;
  readonly name: string;
  readonly queue: string;
  readonly job: string | null;
  /** 1 for the first claim, counted at claim time. */
  readonly attempt: number;
  /** Aborts at the deadline, on an abort, on a lost lease and at shutdown. */
  readonly signal: AbortSignal;
  /** Epoch ms by which this invocation must end (moved by heartbeat). */
  readonly deadline: number;
  /**
   * Runs fn once per (task, name) and commits its JSON result; later runs return the committed result.
   * `opts.commit` commits the step's row together with a layer's own rows (spec §4.2).
   */
  step<T>(name: string, fn: () => Promise<T> | T, opts?: StepOptions): Promise<T>;
  /** Durably suspends the task for `ms`; no worker slot is held meanwhile. */
  sleep(name: string, ms: number): Promise<void>;
  /** Extends the lease and the deadline by maxMs from now. */
  heartbeat(): Promise<void>;
  progress(fraction: number, note?: string): Promise<void>;
  /**
   * The actual usage of the call this attempt made, e.g. `{ tokens: 1234 }`:
   * each rate limit of the task with that `unit` is corrected from the estimated
   * cost it was charged to this amount (spec §14.10). Report once per attempt.
   */
  reportUsage(usage: Readonly<Record<string, number>>): Promise<void>;
  log(...args: unknown[]): void;
  now(): number;

  // Task trees (spec §12).
  /** "run" for the task's code, "abort" while its abort handler runs. */
  readonly mode: "run" | "abort";
  /** The task that spawned this one, or null. */
  readonly ownerId: number | null;
  /** The ownership scope (given at enqueue, inherited by children). */
  readonly scope: string;
  /**
   * Creates a child owned by this task, once per name: a rerun of this task
   * (after a crash, a wait, a sleep) gets the same child's id back (spec §12.1).
   */
  spawn<I>(name: string, task: TaskDefinition<I> | string, input?: I, opts?: SpawnOptions): Promise<number>;
  /**
   * Spawns several children as ctx.spawn does, in one store transaction (spec §12.1): all are
   * checked first, then created (or found) together; ids in the order given.
   */
  spawnMany<I>(children: readonly ChildSpec<I>[]): Promise<number[]>;
  /**
   * Waits until every task in `ids` is terminal and returns their outcomes in
   * the order given. The task is parked meanwhile (no worker slot) and runs
   * again from the start when they are; committed steps replay (spec §12.3).
   */
  waitFor(ids: readonly number[], opts?: { policy?: WaitPolicy }): Promise<ChildOutcome[]>;
  /** Waits for `ratchet.signal(name, …)`, sent before or after; a timeout outcome after timeoutMs (spec §12.7). */
  waitForEvent<T = unknown>(name: string, opts?: { timeoutMs?: number }): Promise<EventOutcome<T>>;
  /**
   * The tasks this one spawned, in id order, as committed now. In an abort
   * handler they are all terminal (spec §12.5), so it can see their outcomes.
   */
  children(): Promise<TaskRecord[]>;

  /**
   * The durable output stream `name` of this task (spec §16): chunks written are committed in
   * batches at most every streamIntervalMs and at every boundary (step, wait, sleep, the end of
   * the run). A rerun gets the same stream back: `offset` says where it stopped.
   */
  stream(name: string): Promise<StreamWriter>;
  /**
   * The committed chunks of this task's own stream `name` from `from` (default 0), without
   * following (spec §16.1): what an earlier run of this task wrote, e.g. to report it after a crash.
   */
  readStream(name: string, opts?: { from?: number }): AsyncIterable<StreamChunk>;

  /**
   * A write of a layer built on the engine (conversations, usage), fenced by this invocation's
   * claim (spec §4.8): `write` gets the claim's fence and the store and calls a store operation
   * that checks the fence in the transaction that writes its rows. What this invocation streamed
   * commits first (spec §16.2); a refusal ("lease_lost" / "abort_marked" answered, or
   * LeaseLostError / AbortedError thrown) ends the invocation and rejects with the typed error.
   * Invariant: a write of a holder that lost its claim (or whose task is marked) changes nothing.
   */
  fenced<R>(write: FencedWrite<R>): Promise<Exclude<R, Refusal>>;
}

/** A store's answer that refuses a holder's write (spec §3.7, §4.5). */
export type Refusal = "lease_lost" | "abort_marked";

/** A store operation run under an invocation's claim (ctx.fenced, spec §4.8). */
export type FencedWrite<R> = (fence: Fence, store: Store) => Promise<R>;

export interface StepOptions {
  /**
   * Commits the step itself instead of the engine's step commit (spec §4.2): `w` is the claim's
   * fence, the step's stored name and its JSON text; the store operation writes that row (once per
   * task and name) and the layer's own rows in one fenced transaction, and answers as a step commit
   * does. Called only when fn ran in this invocation, never on a replay.
   */
  commit?: (w: StepWrite, store: Store) => Promise<SettleResult>;
  /**
   * Commits the step with the layer's own rows and the invocation's still-buffered stream chunks in
   * one transaction, group-committed by the engine with other invocations' (spec §18.10,
   * step-commit.ts). Called only when fn ran in this invocation; not with `commit`.
   */
  commitWith?: StepCommitWith<any>;
}

const STEP_KEYS: ReadonlySet<string> = new Set(["commit", "commitWith"]);

export type { ChildSpec, SpawnOptions };

const WAIT_KEYS: ReadonlySet<string> = new Set(["policy"]);
const EVENT_KEYS: ReadonlySet<string> = new Set(["timeoutMs"]);

/** What waitFor returns per member. */
export interface ChildOutcome {
  id: number;
  name: string;
  outcome: Outcome;
  result: unknown;
  error: StoredError | null;
}

export type EventOutcome<T> = { kind: "signal"; payload: T } | { kind: "timeout" };

/** Default and largest waitForEvent timeout. */
export const DEFAULT_EVENT_TIMEOUT_MS = 7 * 24 * 3600_000;
export const MAX_EVENT_TIMEOUT_MS = 366 * 24 * 3600_000;

/** What the worker hears about a run it started (executor.ts). */
export interface RunHooks {
  /** The worker slot is free again: the code returned (or threw), or the task suspended or parked. Once. */
  slotFree(inv: Invocation): void;
  /** What happened, once the settlement is committed (or could not be). Once. */
  settled(inv: Invocation, r: RunReport): void;
}

export type RunReport = "done" | "failed" | "retried" | "aborted" | "suspended" | "lost" | "released";

export type EndReason =
  | { kind: "returned"; value: unknown }
  | { kind: "threw"; error: unknown }
  | { kind: "timeout" }
  | { kind: "aborted" }
  | { kind: "lease_lost" }
  | { kind: "suspended"; step: string; delayMs: number }
  /** The store already moved the task (waitFor, waitForEvent, blocked): nothing to settle. */
  | { kind: "parked" }
  /** A phase boundary found a different definition registered: release for it (spec §12.8). */
  | { kind: "handover" }
  | { kind: "shutdown" };

/**
 * Why a signal aborted, one shared error per kind: building an Error (with its
 * stack) per invocation cost ~3% of a no-op drain in profiles.
 */
const END_REASONS: Record<EndReason["kind"], RatchetError> = {
  returned: new RatchetError("RATCHET_CLOSED", "invocation ended: the task returned"),
  threw: new RatchetError("RATCHET_CLOSED", "invocation ended: the task threw"),
  timeout: new RatchetError("RATCHET_TIMEOUT", "invocation ended: maxMs passed"),
  aborted: new RatchetError("RATCHET_ABORTED", "invocation ended: the task was aborted"),
  lease_lost: new RatchetError("RATCHET_LEASE_LOST", "invocation ended: the lease was lost"),
  suspended: new RatchetError("RATCHET_CLOSED", "invocation ended: the task suspended"),
  parked: new RatchetError("RATCHET_CLOSED", "invocation ended: the task is waiting"),
  handover: new RatchetError("RATCHET_CLOSED", "invocation ended: handed over to a new definition"),
  shutdown: new RatchetError("RATCHET_CLOSED", "invocation ended: the worker is shutting down"),
};

export interface InvocationDeps {
  store: Store;
  /** Resolves a definition for ctx.spawn (a definition object is registered on first use). */
  resolve(task: TaskDefinition | string): TaskDefinition;
  /** The definition registered for a name now, if any (for handover at phase boundaries). */
  current(name: string): TaskDefinition | undefined;
  maxPayloadBytes: number;
  maxDepth(queue: string): number;
  steps: Batcher<StepWrite, SettleResult>;
  /** Layers' group-committed steps (ctx.step's `commitWith`, spec §18.10). */
  stepCommits: StepCommits;
  clock: Clock;
  leaseGraceMs: number;
  maxStepBytes: number;
  log: (taskId: number, args: unknown[]) => void;
  /** The instance's invocation deadlines (one timer per distinct maxMs). */
  deadlines: Deadlines;
  /** Durable output streams (spec §16). */
  streams: StreamDeps;
}

/**
 * One run of a claimed task: its `ctx`, and the executor's state of the run.
 * What the claimed row already holds (name, queue, job, attempt, owner, scope) is read from it, not
 * copied: a worker keeps up to its settle backlog of finished invocations alive (spec §8.9), and
 * every field is copied by each scavenge they survive.
 * Invariant: ends once (end()); after that every ctx write rejects (spec §3.7, §4.5).
 */
export class Invocation implements TaskContext {
  readonly taskId: number;
  readonly fence: Fence;
  /** The phase checkpoint the invocation started from (set by the executor after migration). */
  checkpoint: unknown = null;
  /** Phase tasks: prefix of this turn's step keys, so each turn memoizes its own steps (spec §12.8). */
  stepPrefix = "";
  /** Phase tasks: the current phase, its turn, and the outcomes of the wait that led to it. */
  phase: string | null = null;
  turn = 0;
  outcomes: ChildOutcome[] | null = null;
  readonly mode: "run" | "abort";
  /** Created on first read of `signal`: most tasks never look at it, and each costs an allocation. */
  #controller: AbortController | undefined;
  readonly #deps: InvocationDeps;
  readonly #maxMs: number;
  #deadline: number;
  #timeout: Deadline | undefined;
  #steps: Map<string, unknown> | undefined;
  /** Step and event names this invocation used; made on first use (most tasks use none). */
  #used: Set<string> | undefined;
  #ended: EndReason | undefined;
  /** The invocation's stream writers; made by the first ctx.stream (spec §16). */
  #streams: InvocationStreams | undefined;
  /** Called once, with the first end reason, synchronously from end(). */
  readonly #onEnd: (inv: Invocation, r: EndReason) => void;

  // The executor's state of this run (executor.ts), kept here rather than in closures per task.
  /** The claimed row this invocation runs. */
  readonly task: ClaimedTask;
  /** Who hears when the slot frees and when the settlement committed. */
  readonly hooks: RunHooks;
  /** The task's code has returned or thrown. */
  codeDone = false;
  /** hooks.slotFree was called. */
  slotFreed = false;
  /** What the settlement being committed will report once it is. */
  report: RunReport = "done";

  readonly #def: TaskDefinition | undefined;

  constructor(
    task: ClaimedTask,
    maxMs: number,
    deps: InvocationDeps,
    def: TaskDefinition | undefined,
    onEnd: (inv: Invocation, r: EndReason) => void,
    hooks: RunHooks,
  ) {
    this.task = task;
    this.hooks = hooks;
    this.#def = def;
    this.taskId = task.id;
    this.mode = task.abortRequested ? "abort" : "run";
    this.fence = { taskId: task.id, token: task.epoch, claimedAt: task.claimedAt, mode: this.mode };
    this.#deps = deps;
    this.#maxMs = maxMs;
    this.#deadline = deps.clock.now() + maxMs;
    this.#onEnd = onEnd;
    this.#arm(maxMs);
  }

  get name(): string {
    return this.task.name;
  }

  get queue(): string {
    return this.task.queue;
  }

  get job(): string | null {
    return this.task.job;
  }

  get attempt(): number {
    return this.task.attempts;
  }

  get ownerId(): number | null {
    return this.task.ownerId;
  }

  get scope(): string {
    return this.task.scope ?? String(this.taskId);
  }

  /** The definition this invocation runs (the executor's). */
  get definition(): TaskDefinition | undefined {
    return this.#def;
  }

  /** The instance's services (the executor's). */
  get deps(): InvocationDeps {
    return this.#deps;
  }

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#ended) this.#controller.abort(END_REASONS[this.#ended.kind]);
    }
    return this.#controller.signal;
  }

  get deadline(): number {
    return this.#deadline;
  }

  get isEnded(): boolean {
    return this.#ended !== undefined;
  }

  #arm(ms: number): void {
    this.#timeout?.cancel();
    this.#timeout = this.#deps.deadlines.arm(Math.min(ms, MAX_MS), timedOut, this);
  }

  /** Ends the invocation once; later calls are ignored. */
  end(reason: EndReason): void {
    if (this.#ended) return;
    this.#ended = reason;
    this.#timeout?.cancel();
    // The controller exists only if someone read ctx.signal; nobody else can be listening.
    this.#controller?.abort(END_REASONS[reason.kind]);
    this.#onEnd(this, reason);
  }

  /** A fenced store call (retried on store errors); a refusal ends this invocation. */
  #holder<T>(fn: () => Promise<T>): Promise<T> {
    return this.#layer(() => retryStore(fn));
  }

  /**
   * Ends the invocation because the task suspends (parked, sleeping, handed
   * over): the caller's await never resolves, which is what frees the slot
   * without waiting for the code. If the invocation already ended for another
   * reason (an abort signal, a lost lease), this throws instead, so the code
   * unwinds and its slot frees — a promise that never settles would hold it for ever.
   */
  #stop(reason: EndReason): Promise<never> {
    this.#live();
    this.end(reason);
    return new Promise<never>(() => {});
  }

  #park(): Promise<never> {
    return this.#stop({ kind: "parked" });
  }

  /** spec §12.8: a phase boundary found a new definition; release the task for it. */
  handOver(): Promise<never> {
    return this.#stop({ kind: "handover" });
  }

  /** A store's answer to a holder write: a refusal ends this invocation and throws (spec §3.7, §4.5). */
  #answered(res: unknown): void {
    if (res === "abort_marked") this.#refused(new AbortedError(this.taskId));
    if (res === "lease_lost") this.#refused(new LeaseLostError(this.taskId, this.fence.token));
  }

  /** A layer's fenced store call (not retried: the layer's operation decides); a refusal ends this invocation. */
  async #layer<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      if (e instanceof AbortedError || e instanceof LeaseLostError) this.#refused(e);
      throw e;
    }
  }

  /** spec §4.8: a layer's write under this claim; streamed chunks commit first (spec §16.2). */
  async fenced<R>(write: FencedWrite<R>): Promise<Exclude<R, Refusal>> {
    this.#live();
    if (typeof write !== "function")
      throw new ValidationError("ctx.fenced needs a function (fence, store) => …");
    if (this.#streams?.dirty) await this.#boundary();
    const r = await this.#layer(() => write(this.fence, this.#deps.store));
    this.#answered(r);
    return r as Exclude<R, Refusal>;
  }

  /** Translates a store refusal into the end of this invocation. */
  #refused(err: unknown): never {
    if (err instanceof AbortedError) this.end({ kind: "aborted" });
    else if (err instanceof LeaseLostError) this.end({ kind: "lease_lost" });
    throw err;
  }

  #live(): void {
    if (!this.#ended) return;
    if (this.#ended.kind === "aborted") throw new AbortedError(this.taskId);
    throw new LeaseLostError(this.taskId, this.fence.token);
  }

  /** Returns the stored key of a step name: phase tasks prefix it with their turn (spec §12.8). */
  #claimName(name: unknown): string {
    const n = checkName(name, "step name");
    const key = this.stepPrefix + n;
    this.#used ??= new Set();
    if (this.#used.has(key)) throw new DuplicateStepError(n);
    this.#used.add(key);
    return key;
  }

  async #stepsLoaded(): Promise<Map<string, unknown>> {
    // A fresh task has none (ClaimedTask.fresh): one read transaction less per task of a durable
    // workflow; 1,000 tasks of 10 steps on SQLite spent ~4 % of their time in those reads.
    if (!this.#steps)
      this.#steps = this.task.fresh
        ? new Map()
        : await retryStore(() => this.#deps.store.loadSteps(this.taskId));
    return this.#steps;
  }

  /** spec §4.2–§4.3. */
  async step<T>(name: string, fn: () => Promise<T> | T, opts?: StepOptions): Promise<T> {
    this.#live();
    const n = this.#claimName(name);
    if (typeof fn !== "function") throw new ValidationError(`step "${n}": fn must be a function`);
    const { commit, commitWith } = opts === undefined ? NO_COMMIT : stepCommit(n, opts);
    // Awaits only what is not there yet: the loaded steps after the first call, a plain value from
    // fn. Each `await` of a ready value is a microtask turn and a promise; a 10-step task paid ~20.
    const steps = this.#steps ?? (await this.#stepsLoaded());
    if (steps.has(n)) return steps.get(n) as T;
    const out = fn();
    const value = isThenable(out) ? await out : out;
    this.#live();
    // Unstorable results are errors, never silently truncated (spec §4.6).
    const text = toStorableJson(value, `result of step "${n}"`, this.#deps.maxStepBytes);
    const w: StepWrite = { fence: this.fence, name: n, result: text };
    let res: SettleResult;
    if (commitWith) {
      // spec §18.10: what the step streamed and is still buffered commits in the step's transaction.
      const streams = this.#streams;
      res = await this.#layer(() => commitStepWith(this.#deps.stepCommits, commitWith, w, streams));
    } else {
      // spec §16.2: what the step streamed is committed before the step is.
      if (this.#streams?.dirty) await this.#boundary();
      // Group-committed with the steps of other invocations in this turn (one transaction), unless
      // the layer commits it with its own rows (spec §4.2).
      res = commit ? await this.#layer(() => commit(w, this.#deps.store)) : await this.#deps.steps.submit(w);
    }
    this.#answered(res);
    const stored = JSON.parse(text) as T;
    steps.set(n, stored);
    return stored;
  }

  /** spec §4.4. Suspending ends the invocation; the returned promise never settles. */
  async sleep(name: string, ms: number): Promise<void> {
    this.#live();
    const n = this.#claimName(name);
    if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) {
      throw new ValidationError(`sleep "${n}": ms must be a finite number ≥ 0 (got ${describe(ms)})`);
    }
    const steps = await this.#stepsLoaded();
    const now = this.#deps.clock.now();
    const done = steps.get(n) as { until: number } | undefined;
    if (done && now >= done.until) return;
    const delayMs = done ? done.until - now : ms;
    if (!done && delayMs === 0) return;
    if (this.#streams?.dirty) await this.#boundary();
    return this.#stop({ kind: "suspended", step: n, delayMs });
  }

  /** spec §3.8. */
  async heartbeat(): Promise<void> {
    this.#live();
    try {
      await retryStore(() => this.#deps.store.heartbeat(this.fence, this.#maxMs, this.#deps.leaseGraceMs));
    } catch (e) {
      this.#refused(e);
    }
    this.#live();
    this.#deadline = this.#deps.clock.now() + this.#maxMs;
    this.#arm(this.#maxMs);
  }

  async reportUsage(usage: Readonly<Record<string, number>>): Promise<void> {
    this.#live();
    if (usage === null || typeof usage !== "object" || Array.isArray(usage))
      throw new ValidationError("reportUsage needs an object such as { tokens: 1234 }");
    const entries = Object.entries(usage);
    if (entries.length === 0 || entries.length > 8) throw new ValidationError("reportUsage needs 1–8 units");
    for (const [unit, n] of entries)
      if (typeof n !== "number" || !Number.isFinite(n) || n < 0 || n > 1e12)
        throw new ValidationError(`reportUsage: ${unit} must be a number in [0, 1e12] (got ${describe(n)})`);
    await this.#deps.store.reportUsage(this.taskId, usage);
  }

  async progress(fraction: number, note?: string): Promise<void> {
    this.#live();
    if (typeof fraction !== "number" || !(fraction >= 0 && fraction <= 1)) {
      throw new ValidationError(`progress must be a number in [0, 1] (got ${describe(fraction)})`);
    }
    if (note !== undefined && (typeof note !== "string" || note.length > 1000)) {
      throw new ValidationError("progress note must be a string of at most 1000 characters");
    }
    try {
      await this.#deps.store.progress(this.fence, fraction, note ?? null);
    } catch (e) {
      this.#refused(e);
    }
  }

  log(...args: unknown[]): void {
    this.#deps.log(this.taskId, args);
  }

  /** spec §12.1. */
  async spawn<I>(
    name: string,
    task: TaskDefinition<I> | string,
    input?: I,
    opts: SpawnOptions = {},
  ): Promise<number> {
    const [id] = await this.spawnMany([{ name, task: task as TaskDefinition | string, input, opts }]);
    return id!;
  }

  /** spec §12.1: every child checked before anything is written, then one store transaction. */
  async spawnMany<I>(children: readonly ChildSpec<I>[]): Promise<number[]> {
    this.#live();
    if (this.mode === "abort") {
      throw new InvalidStateError("an abort handler cannot spawn children (spec §12.1)");
    }
    if (!Array.isArray(children) || children.length > MAX_SPAWN_BATCH)
      throw new ValidationError(`spawnMany needs an array of at most ${MAX_SPAWN_BATCH} children`);
    const made: NewChild[] = [];
    for (const c of children) made.push(await childOf(this.#deps, this.job, c as ChildSpec));
    this.#live();
    if (made.length === 0) return [];
    const r = await this.#holder(() =>
      this.#deps.store.spawnMany(this.fence, made, { maxDepth: this.#deps.maxDepth }),
    );
    return r.map((x) => x.id);
  }

  /** spec §12.3. */
  async waitFor(ids: readonly number[], opts: { policy?: WaitPolicy } = {}): Promise<ChildOutcome[]> {
    this.#live();
    // spec §12.3: 0 ids is a wait that is over at once (the store still checks the claim).
    if (!Array.isArray(ids) || ids.length > MAX_WAIT_MEMBERS)
      throw new ValidationError(`waitFor needs an array of at most ${MAX_WAIT_MEMBERS} task ids`);
    for (const id of ids)
      if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 1)
        throw new ValidationError(`waitFor: task ids must be positive integers (got ${describe(id)})`);
    checkKeys(opts, WAIT_KEYS, "waitFor options");
    const policy = opts?.policy ?? "allSettled";
    if (policy !== "allSettled" && policy !== "failFast")
      throw new ValidationError(
        `waitFor policy must be "allSettled" or "failFast" (got ${describe(policy)})`,
      );
    if (this.#streams?.dirty) await this.#boundary();
    const r = await this.#holder(() => this.#deps.store.waitTasks(this.fence, ids, policy));
    if (r.state === "waiting") return this.#park();
    const byId = new Map(r.members.map((m) => [m.id, m]));
    return ids.map((id) => {
      const m = byId.get(id)!;
      return { id, name: m.name, outcome: m.outcome!, result: m.result, error: m.error };
    });
  }

  /** spec §12.7. */
  async waitForEvent<T = unknown>(name: string, opts: { timeoutMs?: number } = {}): Promise<EventOutcome<T>> {
    this.#live();
    const n = checkName(name, "event name");
    const key = eventResultKey(n);
    this.#used ??= new Set();
    if (this.#used.has(key)) throw new DuplicateStepError(`waitForEvent:${n}`);
    this.#used.add(key);
    checkKeys(opts, EVENT_KEYS, "waitForEvent options");
    const timeoutMs = opts?.timeoutMs ?? DEFAULT_EVENT_TIMEOUT_MS;
    if (
      typeof timeoutMs !== "number" ||
      !Number.isInteger(timeoutMs) ||
      timeoutMs < 0 ||
      timeoutMs > MAX_EVENT_TIMEOUT_MS
    )
      throw new ValidationError(`waitForEvent timeoutMs must be an integer in [0, ${MAX_EVENT_TIMEOUT_MS}]`);
    const steps = await this.#stepsLoaded();
    if (steps.has(key)) return steps.get(key) as EventOutcome<T>;
    // (event keys are not turn-prefixed: a signal name is global, so its outcome is too)
    if (this.#streams?.dirty) await this.#boundary();
    const r = await this.#holder(() => this.#deps.store.waitEvent(this.fence, n, timeoutMs));
    if (r.state === "waiting") return this.#park();
    const out: EventOutcome<T> =
      r.state === "signalled" ? { kind: "signal", payload: r.payload as T } : { kind: "timeout" };
    // Memoized like a step: a rerun sees the same outcome even if the deadline moves past.
    this.#answered(
      await this.#deps.steps.submit({ fence: this.fence, name: key, result: JSON.stringify(out) }),
    );
    steps.set(key, out);
    return out;
  }

  /**
   * spec §12.8 (SEM B.11.4): at a phase boundary, is a different definition
   * registered for this name that can take the task (same version, or higher
   * with migrate)? Then the invocation hands over instead of running on.
   */
  handoverDue(): boolean {
    const now = this.#deps.current(this.name);
    if (!now || !this.#def || now === this.#def || this.mode !== "run") return false;
    const stored = Math.max(this.task.version, this.#def.version);
    return now.version === stored || (now.version > stored && now.migrate !== undefined);
  }

  async children(): Promise<TaskRecord[]> {
    this.#live();
    return retryStore(() => this.#deps.store.children(this.taskId));
  }

  /** The phase checkpoint (spec §12.8), fenced; step keys of earlier turns (not `keep`) are dropped with it. */
  async saveCheckpoint(text: string, keep: string): Promise<void> {
    this.#live();
    if (this.#streams?.dirty) await this.#boundary();
    await this.#holder(() => this.#deps.store.setCheckpoint(this.fence, text, keep));
  }

  now(): number {
    return this.#deps.clock.now();
  }

  /** spec §16.1. */
  async stream(name: string): Promise<StreamWriter> {
    this.#live();
    this.#streams ??= new InvocationStreams(
      this.fence,
      this.#deps.streams,
      () => this.#live(),
      () => this.end({ kind: "lease_lost" }),
      this.task.fresh,
    );
    return this.#streams.open(name);
  }

  /** spec §16.1: this task's own committed chunks; a writer of this invocation flushes first. */
  readStream(name: string, opts: { from?: number } = {}): AsyncIterable<StreamChunk> {
    this.#live();
    const args = checkRead(this.taskId, name, { ...opts, follow: false });
    const streams = this.#streams;
    const store = this.#deps.store;
    return (async function* () {
      if (streams?.dirty) await streams.commitAll();
      yield* readChunks(store, NO_WAITERS, args, undefined, () => false);
    })();
  }

  /** The writers with chunks not yet committed, for the executor's flush before the settlement. */
  get pendingStreams(): InvocationStreams | undefined {
    return this.#streams?.dirty ? this.#streams : undefined;
  }

  /** spec §16.2: commits every writer's buffered chunks before a boundary's own write. */
  async #boundary(): Promise<void> {
    await this.#streams!.commitAll();
    this.#live();
  }
}

const NO_COMMIT: StepOptions = {};

/** The checked commits of ctx.step's options (spec §4.2, §18.10, §2.1: no option is silently ignored). */
function stepCommit(n: string, opts: StepOptions): StepOptions {
  if (opts === null || typeof opts !== "object")
    throw new ValidationError(`step "${n}": options must be an object`);
  checkKeys(opts, STEP_KEYS, `step "${n}" options`);
  if (opts.commit !== undefined && typeof opts.commit !== "function")
    throw new ValidationError(`step "${n}": commit must be a function`);
  const cw = opts.commitWith;
  if (cw !== undefined && (typeof cw?.write !== "function" || typeof cw.rows !== "function"))
    throw new ValidationError(`step "${n}": commitWith needs write and rows functions`);
  if (cw !== undefined && opts.commit !== undefined)
    throw new ValidationError(`step "${n}": commit and commitWith exclude each other`);
  return opts;
}

/** A value `await` would treat as a promise (a `then` function). */
export function isThenable(v: unknown): v is PromiseLike<unknown> {
  return (
    (typeof v === "object" || typeof v === "function") &&
    v !== null &&
    typeof (v as PromiseLike<unknown>).then === "function"
  );
}

const TIMEOUT: EndReason = { kind: "timeout" };

/** A reader of a task's own stream never follows, so it never waits (spec §16.1). */
const NO_WAITERS = new StreamWaiters();

/** spec §4.1: the invocation's deadline passed. */
function timedOut(inv: Invocation): void {
  inv.end(TIMEOUT);
}
