/**
 * The claim loop shared by the long-lived worker (`start`) and the budgeted
 * drain (`tick`).
 *
 * Modes:
 * - claiming: while slots are free, claim up to the free slots in one store
 *   transaction and start each claimed task.
 * - busy: every slot is taken; wait until one frees.
 * - idle (worker only): nothing ready; wait for an in-process enqueue, a freed
 *   slot, or a poll timer. The poll delay doubles from pollMinMs up to
 *   pollIntervalMs, and is never longer than the time to nextRunAt().
 * - draining: stop() was called; no more claims; in-flight work gets up to
 *   shutdownTimeoutMs, then its signals abort and its leases are released
 *   (spec §8.2).
 * A tick leaves the loop when nothing that fits is ready and nothing runs,
 * or its budget or task cap is used up (spec §8.3).
 */
import type { ClaimedTask, ClaimLimits, Store } from "../store/store.js";
import type { TaskDefinition } from "./definition.js";
import { type ExecutorDeps, execute, type Running, type RunReport } from "./executor.js";
import type { Wakeup } from "./wakeup.js";

export interface DriverOptions {
  store: Store;
  workerId: string;
  concurrency: number;
  queues: () => string[];
  /** Names this driver may claim now (registered, and for a tick: fitting the budget). */
  names: () => string[];
  definition: (name: string) => TaskDefinition | undefined;
  leaseGraceMs: number;
  /** Seat and rate limits of the definitions (spec §14.9, §14.10). */
  limits: () => ClaimLimits;
  deps: ExecutorDeps;
  wakeup: Wakeup;
  onReport?: (r: RunReport, task: ClaimedTask) => void;
  onClaimed?: (claimed: readonly ClaimedTask[]) => void;
}

export class Driver {
  readonly #o: DriverOptions;
  readonly #running = new Map<number, Running>();
  /** Settlements not yet committed; a task leaves #running when its slot frees, which can be earlier. */
  readonly #unsettled = new Set<Promise<RunReport>>();
  #stopping = false;

  constructor(o: DriverOptions) {
    this.#o = o;
  }

  get concurrency(): number {
    return this.#o.concurrency;
  }

  get inFlight(): number {
    return this.#running.size;
  }

  active(taskId: number): Running | undefined {
    return this.#running.get(taskId);
  }

  /** Settlements started but not yet committed. */
  get unsettled(): number {
    return this.#unsettled.size;
  }

  activeIds(): number[] {
    return [...this.#running.keys()];
  }

  /** Claims and starts up to `limit` tasks; returns how many started. */
  async fill(limit: number): Promise<number> {
    const free = Math.min(limit, this.#o.concurrency - this.#running.size);
    if (free <= 0 || this.#stopping) return 0;
    const names = this.#o.names();
    const queues = this.#o.queues();
    if (names.length === 0) return 0;
    const claimed = await this.#o.store.claim({
      workerId: this.#o.workerId,
      queues,
      names,
      limit: free,
      leaseGraceMs: this.#o.leaseGraceMs,
      limits: this.#o.limits(),
    });
    this.#o.onClaimed?.(claimed);
    for (const task of claimed) this.#start(task);
    return claimed.length;
  }

  #start(task: ClaimedTask): void {
    const def = this.#o.definition(task.name);
    if (!def) {
      // The registry changed between the claim and now: give the task back.
      void this.#o.deps.settler.submit({ kind: "release", fence: { taskId: task.id, token: task.epoch } });
      return;
    }
    const run = execute(task, def, this.#o.deps);
    this.#running.set(task.id, run);
    this.#unsettled.add(run.report);
    void run.report.then((r) => {
      this.#unsettled.delete(run.report);
      this.#o.onReport?.(r, task);
    });
    void run.slotFree.then(() => {
      this.#running.delete(task.id);
      this.#o.wakeup.notify();
    });
  }

  /** Resolves when some slot frees or after ms. */
  waitForSlot(ms: number): Promise<boolean> {
    return this.#o.wakeup.wait(ms);
  }

  /** spec §8.2: stop claiming; give in-flight work up to timeoutMs; then end it and release its leases. */
  async drain(timeoutMs: number): Promise<void> {
    this.#stopping = true;
    const deadline = performance.now() + timeoutMs;
    while (this.#running.size > 0 && performance.now() < deadline) {
      await this.#o.wakeup.wait(Math.min(50, deadline - performance.now()));
    }
    const left = [...this.#running.values()];
    for (const r of left) r.invocation.end({ kind: "shutdown" });
    // Wait for every settlement, including those of tasks whose code returned just before (spec §8.2).
    await this.allSettled();
    this.#running.clear();
  }

  /** Settlement of everything already started (used by tick). */
  async allSettled(): Promise<void> {
    while (this.#unsettled.size > 0) await Promise.all([...this.#unsettled]);
  }
}
