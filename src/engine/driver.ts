/**
 * The claim loop shared by the long-lived worker (`start`) and the budgeted
 * drain (`tick`).
 *
 * Modes:
 * - claiming: while slots are free, claim up to the free slots in one store
 *   transaction and start each claimed task. With `prefetch` P > 0 (a worker
 *   only, spec §8.7), a claim takes up to concurrency + P − held tasks once the
 *   local buffer is down to P/2; claimed tasks that find no free slot wait in the
 *   buffer (running, leased to this worker) and start as slots free.
 * - busy: every slot is taken; wait until one frees.
 * - held back: the settle backlog waits to be written; no claims until half of it is (spec §8.9),
 *   and the settlement that gets there wakes the loop.
 * - idle (worker only): nothing ready; wait for an in-process enqueue, a freed
 *   slot, or a poll timer. The poll delay doubles from pollMinMs up to
 *   pollIntervalMs, and is never longer than the time to nextRunAt().
 * - draining: stop() was called; no more claims; in-flight work gets up to
 *   shutdownTimeoutMs, then its signals abort and its leases are released
 *   (spec §8.2).
 * A tick leaves the loop when nothing that fits is ready and nothing runs,
 * or its budget or task cap is used up (spec §8.3).
 */
import { CLAIM_STEP, type ClaimedTask, type ClaimLimits, type Store } from "../store/store.js";
import type { EndReason, Invocation } from "./context.js";
import type { TaskDefinition } from "./definition.js";
import { type ExecutorDeps, execute, type RunHooks, type RunReport } from "./executor.js";
import type { Wakeup } from "./wakeup.js";

export interface DriverOptions {
  store: Store;
  workerId: string;
  concurrency: number;
  queues: () => readonly string[];
  /** Names this driver may claim now (registered, and for a tick: fitting the budget). */
  names: () => readonly string[];
  definition: (name: string) => TaskDefinition | undefined;
  leaseGraceMs: number;
  /** Seat and rate limits of the definitions (spec §14.9, §14.10). */
  limits: () => ClaimLimits;
  deps: ExecutorDeps;
  wakeup: Wakeup;
  onReport?: (r: RunReport, task: ClaimedTask) => void;
  onClaimed?: (claimed: readonly ClaimedTask[]) => void;
  /** Tasks claimed ahead of free slots (spec §8.7). 0: claims take only the free slots. */
  prefetch?: number;
  /** spec §8.9: settleBacklog(store's settle lanes); SETTLE_BACKLOG when unset. */
  settleBacklog?: number;
}

/**
 * spec §8.9: settlements not yet committed, of invocations whose code has returned, at which a
 * driver stops claiming; it claims again once at most half as many remain. A settle batch (the
 * settle Batcher writes up to SETTLE_BATCH per transaction) for each write the store takes at once,
 * and one filling, so the writes never wait for claims: with one write at a time (both stores, see
 * PostgresStore.settleLanes), 1,024; with two, 1,536. Without a bound a worker whose claims outpaced its
 * settlements held ever more finished tasks: on PostgreSQL, in-process drains at c16 with prefetch
 * 500 ended with 5,500 of 20,000 and ~15,000 of 200,000 tasks still to settle when their last
 * handler returned, each still `running` under a lease that its settlement might outlive.
 */
export function settleBacklog(lanes: number): number {
  return SETTLE_BATCH * (lanes + 1);
}
/**
 * Settlements in one write of the settle Batcher (512): a multiple of CLAIM_STEP, so that the tasks of
 * a refill settle in whole writes. At 500, a prefetching worker's refills of 512 (500 + 16 rounded down
 * to CLAIM_STEP) settled as a write of 500 and one of 12, twice the statements and commits. Cold
 * drains of 20,000 at c16 with prefetch 500, alternating with the build before (`node
 * dist/bench/drain.js --store pg --cold --tasks 20000 --pairs 6 --base …`), two sets: 18,988 →
 * 19,834 and 20,062 → 20,743 tasks/s, the server's CPU 49.3 → 43.3 and 48.3 → 45.0 µs per task;
 * SQLite (`--store sqlite`, four pairs) 48,045 → 49,805. 1,024 against 512 (six pairs): 22,308 →
 * 22,947 tasks/s, the server 39.3 → 38.8 µs, within the noise, for twice the backlog (spec §8.9).
 */
export const SETTLE_BATCH = 8 * CLAIM_STEP;
/** The backlog with one settle write at a time. */
export const SETTLE_BACKLOG = settleBacklog(1);

/**
 * A buffered task not started within this share of its maxMs is given back instead: its lease
 * (maxMs + grace from the claim) is not extended while it waits, and a start that late could be
 * overtaken by a reclaim (spec §8.7).
 */
const STALE_SHARE = 0.5;

const LOST: EndReason = { kind: "lease_lost" };

/**
 * The invocations running in one driver, by task id: a null-prototype object, not a Map. A Map
 * that keeps about `concurrency` entries while every task adds and deletes one is rehashed every
 * few dozen tasks, and V8 links each old (obsolete) table to its successor, still holding the
 * entries it had. Once one table is promoted to the old generation, each scavenge finds the next
 * through it, so every table and the invocations, closures and claimed rows it points at survived
 * and were promoted in turn. A 20,000-task SQLite drain at concurrency 16 promoted ~3 MB per
 * scavenge and spent 2× the scavenge time of concurrency 1: 41k against 51k tasks/s in one
 * process (`node --trace-gc-nvp`, promoted=… per scavenge). With this object both drain at ~51k.
 */
class Running {
  #by: Record<number, Invocation> = Object.create(null);
  #size = 0;

  get size(): number {
    return this.#size;
  }

  get(id: number): Invocation | undefined {
    return this.#by[id];
  }

  /**
   * Counts `inv` until its slot frees (delete). A newer invocation of the same task takes its place in
   * the lookup (see Driver.#start), and the older one still counts until its code has returned.
   */
  set(id: number, inv: Invocation): void {
    this.#by[id] = inv;
    this.#size++;
  }

  /** `inv`'s slot freed (once per invocation, see executor.ts freeSlot). */
  delete(inv: Invocation): void {
    this.#size--;
    const id = inv.taskId;
    if (this.#by[id] === inv) delete this.#by[id];
  }

  ids(): number[] {
    return Object.keys(this.#by).map(Number);
  }

  values(): Invocation[] {
    return Object.values(this.#by);
  }

  /**
   * Drops the lookup (a drained driver starts nothing more). The count stays: an invocation whose
   * code still runs after the shutdown counts until it returns, and its slotFree takes it off then.
   */
  clear(): void {
    this.#by = Object.create(null);
  }
}

export class Driver {
  readonly #o: DriverOptions;
  readonly #running = new Running();
  /**
   * Settlements not yet committed (a count, not a set of promises: see execute); a task leaves
   * #running when its slot frees, which can be earlier.
   */
  #unsettled = 0;
  /** allSettled() callers, woken when #unsettled drops to 0. */
  #onSettled: (() => void)[] = [];
  /** Claimed ahead of free slots (spec §8.7), oldest first, with the local time of the claim. */
  #buffer: { task: ClaimedTask; at: number }[] = [];
  #stopping = false;
  #short = false;
  /**
   * fill() holds back its claims for the settle backlog (settleBacklog, spec §8.9) until it is down
   * to half; the settlement that gets it there wakes the loop.
   */
  #backedUp = false;

  /** spec §8.9: the settle backlog at which claims stop. */
  readonly #backlog: number;

  /** What every run this driver starts reports to (one object for all, not two closures per task). */
  readonly #hooks: RunHooks;

  constructor(o: DriverOptions) {
    this.#o = o;
    this.#backlog = o.settleBacklog ?? SETTLE_BACKLOG;
    this.#hooks = {
      slotFree: (inv) => {
        this.#running.delete(inv);
        // A buffered task takes the slot at once, without waiting for the loop (spec §8.7).
        if (!this.#stopping) this.#startBuffered();
        this.#o.wakeup.notify();
      },
      settled: (inv, r) => {
        this.#settledOne();
        this.#o.onReport?.(r, inv.task);
      },
    };
  }

  get concurrency(): number {
    return this.#o.concurrency;
  }

  get inFlight(): number {
    return this.#running.size;
  }

  /** The invocation of a task running in this driver. */
  active(taskId: number): Invocation | undefined {
    return this.#running.get(taskId);
  }

  /**
   * The last fill() claimed fewer tasks than it asked for: nothing more was ready when its claim
   * ran, so another claim at once would find only what arrived since (which wakes the worker).
   * False when the last fill() claimed its all, or did not claim.
   */
  get short(): boolean {
    return this.#short;
  }

  /**
   * fill() holds back its claims for the settle backlog (spec §8.9): nothing to claim until a
   * settlement wakes the loop, so the loop waits for that instead of reading the store.
   */
  get backedUp(): boolean {
    return this.#backedUp;
  }

  /** Finished invocations whose settlements are not committed (#unsettled counts the running ones too, and releases). */
  get #settling(): number {
    return this.#unsettled - this.#running.size;
  }

  /** Settlements started but not yet committed. */
  get unsettled(): number {
    return this.#unsettled;
  }

  /** A settlement (or a release) of this driver committed, or failed. */
  #settledOne(): void {
    this.#unsettled--;
    // Computed whether or not the claims are held back, so that its loads and comparison have type
    // feedback before the first backlog of a fresh worker (see fill).
    const relieved = this.#settling <= this.#backlog / 2;
    if (this.#backedUp && relieved) {
      this.#backedUp = false;
      this.#o.wakeup.notify();
    }
    if (this.#unsettled > 0) return;
    const waiters = this.#onSettled;
    this.#onSettled = [];
    for (const w of waiters) w();
  }

  activeIds(): number[] {
    return this.#running.ids();
  }

  /**
   * Claims and starts up to `limit` tasks; returns how many it started or buffered. With prefetch,
   * buffered tasks start first, and a claim runs only once the buffer is down to half.
   */
  async fill(limit: number): Promise<number> {
    this.#short = false;
    if (this.#stopping) return 0;
    let started = 0;
    while (started < limit && this.#running.size < this.#o.concurrency && this.#startBuffered()) started++;
    const free = Math.min(limit - started, this.#o.concurrency - this.#running.size);
    const prefetch = this.#o.prefetch ?? 0;
    let room =
      prefetch === 0
        ? free
        : this.#buffer.length <= prefetch / 2
          ? Math.min(
              limit - started,
              this.#o.concurrency + prefetch - this.#running.size - this.#buffer.length,
            )
          : 0;
    // A refill in a few sizes (CLAIM_STEP); the rest waits for the next one.
    if (room > CLAIM_STEP && prefetch > 0) room -= room % CLAIM_STEP;
    if (room <= 0) return started;
    // spec §8.9. The flag is written whenever it is clear, not only when the backlog is reached:
    // a store that no call had reached before V8 optimized fill() deoptimized it the first time the
    // settlements fell behind in a fresh worker ("Insufficient type feedback", `--trace-deopt`).
    if (!this.#backedUp) this.#backedUp = this.#settling >= this.#backlog;
    if (this.#backedUp) return started;
    const names = this.#o.names();
    const queues = this.#o.queues();
    if (names.length === 0) return started;
    const claimed = await this.#o.store.claim({
      workerId: this.#o.workerId,
      queues,
      names,
      limit: room,
      leaseGraceMs: this.#o.leaseGraceMs,
      limits: this.#o.limits(),
    });
    this.#short = claimed.length < room;
    if (claimed.length === 0) return started;
    this.#o.onClaimed?.(claimed);
    const at = performance.now();
    for (const task of claimed) {
      // stop() may have begun during the claim: what cannot start now goes back at once (spec §8.2).
      if (!this.#stopping && this.#running.size < this.#o.concurrency) this.#start(task);
      else if (!this.#stopping) this.#buffer.push({ task, at });
      else this.#release(task);
    }
    return started + claimed.length;
  }

  /**
   * A free slot and nothing buffered: a task claimed for this worker by an enqueue (spec §8.8)
   * would start at once, and no task claimed earlier waits for that slot.
   */
  canAdopt(): boolean {
    return !this.#stopping && this.#buffer.length === 0 && this.#running.size < this.#o.concurrency;
  }

  /** Runs a task an enqueue claimed for this worker (spec §8.8), as if this driver had claimed it. */
  adopt(task: ClaimedTask): void {
    this.#o.onClaimed?.([task]);
    if (this.#stopping) this.#release(task);
    else if (this.#running.size < this.#o.concurrency) this.#start(task);
    // A slot filled between the enqueue's check and its commit: the task waits like a prefetched one.
    else this.#buffer.push({ task, at: performance.now() });
  }

  /** Starts the oldest buffered task that is still fresh; gives back stale ones. False when none. */
  #startBuffered(): boolean {
    for (;;) {
      const next = this.#buffer.shift();
      if (!next) return false;
      if (performance.now() - next.at <= next.task.maxMs * STALE_SHARE) {
        this.#start(next.task);
        return true;
      }
      this.#release(next.task);
    }
  }

  /** Gives a claimed task back without counting the attempt (spec §8.2, §8.7). */
  #release(task: ClaimedTask): void {
    this.#unsettled++;
    // Whatever the answer (a refused fence means the task is no longer ours anyway).
    this.#o.deps.settler.send(
      { kind: "release", fence: { taskId: task.id, token: task.epoch, claimedAt: task.claimedAt } },
      Driver.#releaseDone,
      this,
    );
  }

  #start(task: ClaimedTask): void {
    const def = this.#o.definition(task.name);
    if (!def) {
      // The registry changed between the claim and now: give the task back.
      this.#release(task);
      return;
    }
    // spec §8.10. The store gave a task this driver still runs to a new claim: the old claim no
    // longer holds (its lease ran out, or it was lost in a server crash, §13.8), and its writes would
    // be refused (§3.7). It ends as a lost lease; its slot frees once its code has returned.
    this.#running.get(task.id)?.end(LOST);
    this.#unsettled++;
    this.#running.set(task.id, execute(task, def, this.#o.deps, this.#hooks));
  }

  /** A release's settle batch committed or failed: either way the task is no longer this driver's. */
  static #releaseDone(d: Driver): void {
    d.#settledOne();
  }

  /** Resolves when some slot frees or after ms. */
  waitForSlot(ms: number): Promise<boolean> {
    return this.#o.wakeup.wait(ms);
  }

  /** spec §8.2: stop claiming; give in-flight work up to timeoutMs; then end it and release its leases. */
  async drain(timeoutMs: number): Promise<void> {
    this.#stopping = true;
    // Buffered tasks never started: back at once, so other workers need not wait for their leases.
    for (const b of this.#buffer.splice(0)) this.#release(b.task);
    const deadline = performance.now() + timeoutMs;
    while (this.#running.size > 0 && performance.now() < deadline) {
      await this.#o.wakeup.wait(Math.min(50, deadline - performance.now()));
    }
    const left = this.#running.values();
    for (const inv of left) inv.end({ kind: "shutdown" });
    // Wait for every settlement, including those of tasks whose code returned just before (spec §8.2).
    await this.allSettled();
    this.#running.clear();
  }

  /** Settlement of everything already started (used by tick). */
  async allSettled(): Promise<void> {
    while (this.#unsettled > 0) await new Promise<void>((resolve) => this.#onSettled.push(resolve));
  }
}
