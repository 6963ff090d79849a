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
import { toStorableJson } from "../core/json.js";
import {
  AbortedError,
  DuplicateStepError,
  LeaseLostError,
  RatchetError,
  ValidationError,
} from "../errors.js";
import type { ClaimedTask, Fence, SettleResult, StepWrite, Store } from "../store/store.js";
import type { Batcher } from "./batcher.js";
import { checkName, describe, MAX_MS } from "./definition.js";
import { retryStore } from "./store-retry.js";

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
  /** Runs fn once per (task, name) and commits its JSON result; later runs return the committed result. */
  step<T>(name: string, fn: () => Promise<T> | T): Promise<T>;
  /** Durably suspends the task for `ms`; no worker slot is held meanwhile. */
  sleep(name: string, ms: number): Promise<void>;
  /** Extends the lease and the deadline by maxMs from now. */
  heartbeat(): Promise<void>;
  progress(fraction: number, note?: string): Promise<void>;
  log(...args: unknown[]): void;
  now(): number;
}

export type EndReason =
  | { kind: "returned"; value: unknown }
  | { kind: "threw"; error: unknown }
  | { kind: "timeout" }
  | { kind: "aborted" }
  | { kind: "lease_lost" }
  | { kind: "suspended"; step: string; delayMs: number }
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
  shutdown: new RatchetError("RATCHET_CLOSED", "invocation ended: the worker is shutting down"),
};

export interface InvocationDeps {
  store: Store;
  steps: Batcher<StepWrite, SettleResult>;
  clock: Clock;
  leaseGraceMs: number;
  maxStepBytes: number;
  log: (taskId: number, args: unknown[]) => void;
}

export class Invocation implements TaskContext {
  readonly taskId: number;
  readonly name: string;
  readonly queue: string;
  readonly job: string | null;
  readonly attempt: number;
  readonly fence: Fence;
  /** Created on first read of `signal`: most tasks never look at it, and each costs an allocation. */
  #controller: AbortController | undefined;
  readonly #deps: InvocationDeps;
  readonly #maxMs: number;
  #deadline: number;
  #timer: NodeJS.Timeout | undefined;
  #steps: Map<string, unknown> | undefined;
  readonly #used = new Set<string>();
  #ended: EndReason | undefined;
  readonly #onEnd: (r: EndReason) => void;
  /** Resolves with the first end reason. */
  readonly ended: Promise<EndReason>;

  constructor(task: ClaimedTask, maxMs: number, deps: InvocationDeps) {
    this.taskId = task.id;
    this.name = task.name;
    this.queue = task.queue;
    this.job = task.job;
    this.attempt = task.attempts;
    this.fence = { taskId: task.id, token: task.epoch };
    this.#deps = deps;
    this.#maxMs = maxMs;
    this.#deadline = deps.clock.now() + maxMs;
    let resolve!: (r: EndReason) => void;
    this.ended = new Promise((r) => (resolve = r));
    this.#onEnd = resolve;
    this.#arm(maxMs);
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
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.end({ kind: "timeout" }), Math.min(ms, MAX_MS));
    this.#timer.unref?.();
  }

  /** Ends the invocation once; later calls are ignored. */
  end(reason: EndReason): void {
    if (this.#ended) return;
    this.#ended = reason;
    if (this.#timer) clearTimeout(this.#timer);
    // The controller exists only if someone read ctx.signal; nobody else can be listening.
    this.#controller?.abort(END_REASONS[reason.kind]);
    this.#onEnd(reason);
  }

  /** Translates a store refusal into the end of this invocation. */
  #refused(err: unknown): never {
    if (err instanceof AbortedError) this.end({ kind: "aborted" });
    else if (err instanceof LeaseLostError) this.end({ kind: "lease_lost" });
    throw err;
  }

  #live(): void {
    if (this.#ended) throw new LeaseLostError(this.taskId, this.fence.token);
  }

  #claimName(name: unknown): string {
    const n = checkName(name, "step name");
    if (this.#used.has(n)) throw new DuplicateStepError(n);
    this.#used.add(n);
    return n;
  }

  async #stepsLoaded(): Promise<Map<string, unknown>> {
    if (!this.#steps) this.#steps = await retryStore(() => this.#deps.store.loadSteps(this.taskId));
    return this.#steps;
  }

  /** spec §4.2–§4.3. */
  async step<T>(name: string, fn: () => Promise<T> | T): Promise<T> {
    this.#live();
    const n = this.#claimName(name);
    if (typeof fn !== "function") throw new ValidationError(`step "${n}": fn must be a function`);
    const steps = await this.#stepsLoaded();
    if (steps.has(n)) return steps.get(n) as T;
    const value = await fn();
    this.#live();
    // Unstorable results are errors, never silently truncated (spec §4.6).
    const text = toStorableJson(value, `result of step "${n}"`, this.#deps.maxStepBytes);
    // Group-committed with the steps of other invocations in this turn (one transaction).
    const res = await this.#deps.steps.submit({ fence: this.fence, name: n, result: text });
    if (res === "abort_marked") this.#refused(new AbortedError(this.taskId));
    if (res === "lease_lost") this.#refused(new LeaseLostError(this.taskId, this.fence.token));
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
    this.end({ kind: "suspended", step: n, delayMs });
    return new Promise<void>(() => {});
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

  now(): number {
    return this.#deps.clock.now();
  }
}
