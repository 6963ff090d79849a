/**
 * The public engine: open a store, register definitions, enqueue, run
 * workers or ticks, read and steer tasks.
 * Data flows one way: API → engine → core decides → store applies.
 */
import { hostname } from "node:os";
import { toStorableJson } from "../core/json.js";
import { isLive } from "../core/model.js";
import { canEverFit } from "../core/tick.js";
import {
  ClosedError,
  ConfigError,
  NotFoundError,
  TimeoutError,
  UnknownTaskError,
  ValidationError,
} from "../errors.js";
import type { ServerOptions } from "../server/server.js";
import { KEY_SEP, keyLabel } from "../store/gates.js";
import type { ScheduleRow } from "../store/schedules.js";
import type {
  AbortResult,
  ClaimLimits,
  EndedTask,
  JobStatus,
  ListFilter,
  QueueDepth,
  QueueStats,
  Settlement,
  SettleResult,
  StepRecord,
  StepWrite,
  Store,
  TaskEvent,
  TaskId,
  TaskRecord,
} from "../store/store.js";
import type { StreamInfo } from "../store/streams/ops.js";
import { Batcher } from "./batcher.js";
import { CALL_KEYS, checkListFilter } from "./calls.js";
import { Deadlines } from "./deadlines.js";
import { checkKeys, checkName, describe, MAX_MS, type TaskDefinition, validateInput } from "./definition.js";
import { Driver, SETTLE_BATCH, settleBacklog } from "./driver.js";
import { type BatchEntry, ENQUEUE_KEYS, type EnqueueOptions, prepareBatch } from "./enqueue.js";
import type { ExecutorDeps, RunReport } from "./executor.js";
import { type Explanation, explain } from "./explain.js";
import { claimLimits } from "./gates.js";
import { buildTree, type Inspection, inspection, type TaskTree } from "./inspect.js";
import { type OpenOptions, openStore, type ResolvedOptions, resolveOptions } from "./options.js";
import {
  DEFAULT_GRACE_MS,
  decideTick,
  nextTick,
  parseCron,
  type ScheduleOptions,
  tickKey,
} from "./schedule.js";
import { StepCommits } from "./step-commit.js";
import { retryStore } from "./store-retry.js";
import {
  checkRead,
  type ReadStreamOptions,
  readChunks,
  type StreamChunk,
  StreamWaiters,
  streamsOf,
} from "./stream-reader.js";
import { Wakeup } from "./wakeup.js";

export type { BatchEntry, EnqueueOptions } from "./enqueue.js";

export interface StartOptions {
  concurrency?: number;
  /**
   * Tasks to claim ahead of free slots (spec §8.7), so that claims and settlements go in big
   * batches: a claimed task waits in this worker, leased to it, until a slot frees. Default 0.
   * Faster under a deep backlog; the cost is that this worker holds up to this many tasks that
   * another worker with a free slot cannot take until it releases them (at stop, or when they have
   * waited half their maxMs).
   */
  prefetch?: number;
  queues?: string[];
  /** How long stop()/close() waits for in-flight work before releasing it. Default 10 s. */
  shutdownTimeoutMs?: number;
  /**
   * Also serve the HTTP API, live stream, metrics and dashboard from this process (as `ratchet
   * serve` does); stopped with the worker. The bound address is `ratchet.serving()`.
   */
  serve?: ServerOptions;
}

export interface WorkerCounters {
  claims: number;
  reclaims: number;
  reports: Partial<Record<RunReport, number>>;
}

export interface TickOptions {
  budgetMs: number;
  concurrency?: number;
  /** Most tasks to start in this tick. Default 50. */
  max?: number;
  queues?: string[];
}

export interface TickReport {
  ran: number;
  done: number;
  failed: number;
  retried: number;
  skipped: number;
  ms: number;
  budgetLeft: number;
}

export interface TaskDetails {
  task: TaskRecord;
  needs: TaskId[];
  steps: StepRecord[];
  events: TaskEvent[];
}

/** The names a worker claims and their queues ("default" always among them), from a registry. */
function claimableOf(registry: ReadonlyMap<string, TaskDefinition>): {
  names: readonly string[];
  queues: readonly string[];
} {
  const defs = [...registry.values()];
  return {
    names: defs.map((d) => d.name),
    queues: [...new Set(["default", ...defs.map((d) => d.queue)])],
  };
}

/** The worker start() runs in an instance (spec §8.1). */
interface StartedWorker {
  driver: Driver;
  loop: Promise<void>;
  stop: boolean;
  shutdownTimeoutMs: number;
  queues: string[] | undefined;
  /** The wake-up subscription (spec §10.5, §13.6), made at the worker's first wait for work. */
  listening: Promise<(() => Promise<void>) | undefined> | undefined;
  server?: { close(): Promise<void>; url: string };
}

export class Ratchet {
  readonly store: Store;
  readonly workerId: string;
  readonly #o: ResolvedOptions;
  readonly #registry = new Map<string, TaskDefinition>();
  /** Names registered since the store last heard of them. */
  readonly #unflushed = new Set<string>();
  readonly #wakeup = new Wakeup();
  readonly #settler: Batcher<Settlement, SettleResult>;
  readonly #deps: ExecutorDeps;
  readonly #settledListeners = new Set<(id: TaskId) => void>();
  #worker: StartedWorker | undefined;
  #ticks = new Set<Driver>();
  /** What this instance's drivers did since open (for /metrics of a serving worker). */
  readonly #counters: WorkerCounters = { claims: 0, reclaims: 0, reports: {} };
  /** Seat and rate limits of the registered definitions, sent with every claim. */
  #limits: ClaimLimits = { seats: {}, rates: {} };
  #closed = false;
  /**
   * When open's reconcile ended (performance.now()): a worker's first maintenance pass comes one
   * interval after it (spec §12.10), not again at once.
   */
  #reconciledAt = Number.NEGATIVE_INFINITY;
  /** Live stream readers of this instance, woken by its own appends (spec §16.5). */
  readonly #streamWaiters = new StreamWaiters();

  private constructor(store: Store, o: ResolvedOptions, workerId: string) {
    this.store = store;
    this.#o = o;
    this.workerId = workerId;
    // Engine commits are retried on store errors (spec F.10): every item is fenced or idempotent.
    this.#settler = new Batcher(
      (items) => retryStore(() => store.settle(items)),
      SETTLE_BATCH,
      store.settleLanes ?? 1,
    );
    const steps = new Batcher<StepWrite, SettleResult>((items) => retryStore(() => store.commitSteps(items)));
    this.#deps = {
      store,
      resolve: (task) => this.#resolve(task),
      current: (name) => this.#registry.get(name),
      maxPayloadBytes: o.maxPayloadBytes,
      maxDepth: o.maxDepth,
      clock: o.clock,
      random: o.random,
      leaseGraceMs: o.leaseGraceMs,
      maxStepBytes: o.maxResultBytes,
      maxResultBytes: o.maxResultBytes,
      deadlines: new Deadlines(),
      streams: {
        store,
        appends: new Batcher((items) => retryStore(() => store.appendStreams(items))),
        intervalMs: o.streamIntervalMs,
        maxChunkBytes: o.maxStreamChunkBytes,
        maxBytes: o.maxStreamBytes,
        appended: (taskId, name) => this.#streamWaiters.appended(taskId, name),
      },
      settler: this.#settler,
      steps,
      stepCommits: new StepCommits(store),
      log: (taskId, args) =>
        o.logger.info(
          `task ${taskId}: ${args.map((a) => (typeof a === "string" ? a : describe(a))).join(" ")}`,
        ),
      onError: (err, taskId) => o.logger.error(`task ${taskId}: could not settle`, err),
    };
  }

  /** Opens (and migrates) a store. Misconfiguration fails here, not later. */
  static async open(options: OpenOptions = {}): Promise<Ratchet> {
    const o = resolveOptions(options);
    const store =
      typeof options.store === "object" && options.store !== null
        ? options.store
        : await openStore(options.store ?? "sqlite:./ratchet.db", o.clock, options.synchronous, {
            ...options.postgres,
            // PostgreSQL uses the database clock unless a clock was given explicitly (tests).
            clock: options.clock,
          });
    const r = new Ratchet(
      store,
      o,
      options.workerId ?? `${hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 8)}`,
    );
    try {
      for (const def of options.tasks ?? []) r.register(def);
      await store.migrate();
      await r.#flushDefinitions();
      for (const sc of options.schedules ?? []) {
        const { name, cron, task, input, ...rest } = sc;
        await r.schedule(name, cron, task, input, rest);
      }
      // Recovery at open (spec §12.10): cascades a crash left unapplied, held outcomes to finalize, waiters to wake.
      await store.reconcile();
      r.#reconciledAt = performance.now();
    } catch (err) {
      await store.close().catch(() => {});
      throw err;
    }
    return r;
  }

  // ------------------------------------------------------------- registry

  /** The definition for a name or object; an unregistered object is registered on first use. */
  #resolve(task: TaskDefinition | string): TaskDefinition {
    const def = typeof task === "string" ? this.#registry.get(task) : task;
    if (typeof task === "string" && !def) throw new UnknownTaskError(task);
    if (!def || typeof def.run !== "function")
      throw new ValidationError("task must be a definition or a registered name");
    if (typeof task !== "string" && this.#registry.get(def.name) !== def) this.register(def);
    return def;
  }

  /**
   * Records registered definitions in the store (spec §12.6, §12.9): which
   * names have code (a task without is orphaned when aborted), and wakes tasks
   * blocked for those names — a new definition object gets another try.
   */
  async #flushDefinitions(): Promise<void> {
    if (this.#unflushed.size === 0) return;
    const defs = [...this.#unflushed].map((n) => this.#registry.get(n)).filter((d) => d !== undefined);
    this.#unflushed.clear();
    await retryStore(() =>
      this.store.registerDefinitions(
        defs.map((d) => ({ name: d.name, version: d.version, hasAbort: !!d.onAbort })),
      ),
    );
    if ((await retryStore(() => this.store.unblock(defs.map((d) => d.name)))) > 0) this.#wakeup.notify();
  }

  /** Registers or replaces a definition; takes effect at the next claim. */
  register(def: TaskDefinition): void {
    if (!def || typeof def !== "object" || typeof def.run !== "function" || typeof def.name !== "string") {
      throw new ConfigError("register needs a definition made by defineTask");
    }
    if (!canEverFit(def.maxMs, this.#o.tickBudgetMs, this.#o.tickReserveMs)) {
      throw new ConfigError(
        `task "${def.name}" can never fit: maxMs ${def.maxMs} + reserve ${this.#o.tickReserveMs} > tickBudgetMs ${this.#o.tickBudgetMs}; split it into smaller steps`,
      );
    }
    // Definitions that share a concurrency group or rate limit must agree on it (spec §14.9, §14.10).
    const next = new Map(this.#registry);
    next.set(def.name, def);
    this.#limits = claimLimits(next.values());
    this.#registry.set(def.name, def);
    this.#claimable = claimableOf(this.#registry);
    this.#unflushed.add(def.name);
    this.#wakeup.notify();
  }

  unregister(name: string): boolean {
    const had = this.#registry.delete(name);
    this.#claimable = claimableOf(this.#registry);
    this.#limits = claimLimits(this.#registry.values());
    return had;
  }

  definitions(): TaskDefinition[] {
    return [...this.#registry.values()];
  }

  #live(): void {
    if (this.#closed) throw new ClosedError();
  }

  // -------------------------------------------------------------- enqueue

  async enqueue(task: TaskDefinition | string, input?: unknown, opts: EnqueueOptions = {}): Promise<TaskId> {
    checkKeys(opts, ENQUEUE_KEYS, "enqueue options"); // spec §2.1: no option is silently ignored
    const [id] = await this.enqueueMany([{ ...(opts ?? {}), task, input }]);
    return id!;
  }

  /** Enqueues a job: every entry gets `job`; one transaction (spec §2.2). */
  async enqueueJob(job: string, entries: readonly BatchEntry[]): Promise<TaskId[]> {
    checkName(job, "job name");
    if (!Array.isArray(entries)) throw new ValidationError("enqueueJob needs an array of entries");
    entries.forEach((e, i) => {
      // spec §2.1: an entry's own job would be overwritten, never honoured: refuse it rather than ignore it.
      if (e?.job !== undefined && e.job !== job)
        throw new ValidationError(`entry ${i}: job ${describe(e.job)} differs from enqueueJob's "${job}"`);
    });
    return this.enqueueMany(entries.map((e) => ({ ...e, job })));
  }

  /** spec §2.1–§2.8: validates everything first, then writes the batch in one transaction. */
  async enqueueMany(entries: readonly BatchEntry[]): Promise<TaskId[]> {
    this.#live();
    const { batch, position } = await prepareBatch(entries, {
      now: this.#o.clock.now(),
      maxPayloadBytes: this.#o.maxPayloadBytes,
      resolve: (task) => this.#resolve(task),
    });
    await this.#flushDefinitions();
    // spec §8.8: one task, beside this process's worker with a free slot, may be claimed for it at once.
    const w = this.#worker;
    const handoff =
      batch.length === 1 && w && !w.stop && w.driver.canAdopt()
        ? {
            workerId: this.workerId,
            queues: this.#queues(w.queues),
            names: this.#names(),
            leaseGraceMs: this.#o.leaseGraceMs,
          }
        : undefined;
    const res = await this.store.enqueue(batch, { maxDepth: this.#o.maxDepth, handoff });
    const claimed = res[0]?.claimed;
    // The driver outlives stop(): a task claimed as it stopped is released by it (spec §8.2).
    if (claimed && w) w.driver.adopt(claimed);
    this.#wakeup.notify();
    return position ? entries.map((_, i) => res[position[i]!]!.id) : res.map((e) => e.id);
  }

  // --------------------------------------------------------------- drivers

  /**
   * The registered names and their queues, made at each change of the registry (as #limits is): a
   * worker asks for both at every claim. Rebuilt there (spreads, a map, a Set), they were garbage per claim, and
   * the optimized claim path was thrown away when V8 first met the Set's arrays there (a deopt
   * "wrong map", `node --trace-deopt-verbose`, in a fresh worker's drain), to be compiled again.
   * With this, the Wakeup that allocates only when someone waits, and claims built as one kind of
   * array (claim.ts): cold drains of 20,000 on PostgreSQL at c16, twelve alternating pairs (`node
   * dist/bench/drain.js --store pg --cold --tasks 20000 --pairs 12 --base …`), 15.6 → 14.5 µs of
   * the worker's CPU per task (its compiler threads 7.0 → 6.5), 39.0k → 39.8k tasks/s.
   * Shared: callers only read them.
   */
  #claimable = claimableOf(this.#registry);

  #names(): readonly string[] {
    return this.#claimable.names;
  }

  #queues(given: string[] | undefined): readonly string[] {
    return given ?? this.#claimable.queues;
  }

  #driver(
    concurrency: number,
    queues: () => readonly string[],
    names: () => readonly string[],
    onReport?: (r: RunReport) => void,
    prefetch = 0,
  ): Driver {
    return new Driver({
      store: this.store,
      workerId: this.workerId,
      concurrency,
      prefetch,
      settleBacklog: settleBacklog(this.#settler.lanes),
      queues,
      names,
      definition: (n) => this.#registry.get(n),
      leaseGraceMs: this.#o.leaseGraceMs,
      limits: () => this.#limits,
      deps: this.#deps,
      wakeup: this.#wakeup,
      onClaimed: (claimed) => {
        this.#counters.claims += claimed.length;
        for (const t of claimed) if (t.reclaimed) this.#counters.reclaims++;
      },
      onReport: (r, task) => {
        this.#counters.reports[r] = (this.#counters.reports[r] ?? 0) + 1;
        onReport?.(r);
        if (r === "done" || r === "failed" || r === "aborted")
          for (const l of this.#settledListeners) l(task.id);
      },
    });
  }

  /** Starts a long-lived worker in this process (spec §8.1). */
  async start(opts: StartOptions = {}): Promise<void> {
    this.#live();
    if (this.#worker) throw new ConfigError("a worker is already running in this Ratchet instance");
    checkKeys(opts, CALL_KEYS.start, "start options");
    const concurrency = opts.concurrency ?? 16;
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 10_000) {
      throw new ConfigError(`concurrency must be an integer in [1, 10000] (got ${describe(concurrency)})`);
    }
    const prefetch = opts.prefetch ?? 0;
    if (!Number.isInteger(prefetch) || prefetch < 0 || prefetch > 10_000) {
      throw new ConfigError(`prefetch must be an integer in [0, 10000] (got ${describe(prefetch)})`);
    }
    const queues = opts.queues?.map((q) => checkName(q, "queue"));
    await this.#flushDefinitions();
    const driver = this.#driver(
      concurrency,
      () => this.#queues(queues),
      () => this.#names(),
      undefined,
      prefetch,
    );
    const w: StartedWorker = {
      driver,
      loop: Promise.resolve(),
      stop: false,
      shutdownTimeoutMs: opts.shutdownTimeoutMs ?? 10_000,
      queues,
      listening: undefined,
    };
    this.#worker = w;
    w.loop = this.#workerLoop(w);
    if (opts.serve) {
      try {
        // Loaded on demand: a worker that serves nothing does not load the HTTP stack.
        const { createServer } = await import("../server/server.js");
        const srv = createServer(this, { logger: this.#o.logger, ...opts.serve });
        const addr = await srv.listen();
        w.server = { close: () => srv.close(), url: addr.url };
      } catch (err) {
        await this.stop();
        throw err;
      }
    }
  }

  /**
   * What this instance's worker and ticks did since it opened: claims (and how many were reclaims
   * of expired leases) and how each invocation ended (done, failed, retried, aborted, suspended,
   * lost, released). In-process counters; they restart at zero with the process.
   */
  workerCounters(): WorkerCounters {
    return { ...this.#counters, reports: { ...this.#counters.reports } };
  }

  /** The URL of the HTTP server started with `start({ serve })`, while it runs. */
  serving(): string | undefined {
    return this.#worker?.server?.url;
  }

  /**
   * Tree upkeep (spec §12.5, §12.10): the periodic global reconcile repairs
   * what a crashed process left half-done, and running invocations whose task
   * got a mark elsewhere (another process, a cascade) are signalled now
   * rather than at their next commit.
   */
  async #maintain(drivers: readonly Driver[]): Promise<void> {
    await this.#flushDefinitions();
    await this.#fireSchedules();
    const marked = await this.store.reconcile();
    if ((await this.store.maintainGates(this.#limits)) > 0) this.#wakeup.notify();
    const active = drivers.flatMap((d) => d.activeIds());
    const seen = active.length ? await this.store.markedAmong(active) : [];
    this.#signal([...marked, ...seen]);
  }

  // --------------------------------------------------------- flow control

  /**
   * Sets the concurrency limit of a group (or of one key of it) for every
   * worker of the store, overriding the limit in code; null removes the
   * override (spec §14.9). Tasks parked on the seat that now fit are woken.
   * Returns how many were woken.
   */
  async setConcurrencyLimit(
    group: string,
    limit: number | null,
    opts: { key?: string } = {},
  ): Promise<number> {
    this.#live();
    checkKeys(opts, CALL_KEYS.concurrency, "setConcurrencyLimit options");
    if (typeof group !== "string" || !/^[A-Za-z0-9_.-]{1,100}$/.test(group))
      throw new ValidationError(
        `concurrency group must be 1–100 letters, digits, '_', '.' or '-' (got ${describe(group)})`,
      );
    if (limit !== null && (!Number.isInteger(limit) || limit < 0 || limit > 1_000_000))
      throw new ValidationError(
        `concurrency limit must be an integer in [0, 1000000] or null (got ${describe(limit)})`,
      );
    const seat =
      opts?.key === undefined ? group : `${group}${KEY_SEP}${checkName(opts.key, "concurrency key")}`;
    const woken = await this.store.setSeatLimit(seat, limit);
    if (woken > 0) this.#wakeup.notify();
    return woken;
  }

  /** Run-time concurrency limits ("group" or "group:key") and the limits in this process's code. */
  async concurrencyLimits(): Promise<{
    overrides: { seat: string; limit: number }[];
    code: Record<string, number>;
  }> {
    this.#live();
    const rows = await this.store.seatLimits();
    return {
      overrides: rows.map((r) => ({ seat: keyLabel(r.seat), limit: r.limit })),
      code: { ...this.#limits.seats },
    };
  }

  // ------------------------------------------------------------ schedules

  /**
   * Creates or replaces the schedule `name` (spec §14.1): every tick of `cron`
   * enqueues one task of `task` with `input`. Re-declaring an unchanged cron
   * keeps its pending tick; a changed one starts from the next tick after now.
   */
  async schedule(
    name: string,
    cron: string,
    task: TaskDefinition | string,
    input?: unknown,
    opts: ScheduleOptions = {},
  ): Promise<ScheduleRow> {
    this.#live();
    const n = checkName(name, "schedule name");
    if (n.length > 100) throw new ValidationError("schedule name must be at most 100 characters");
    if (opts === null || typeof opts !== "object")
      throw new ValidationError("schedule options must be an object");
    const timezone = opts.timezone ?? null;
    if (timezone !== null && typeof timezone !== "string")
      throw new ValidationError(`schedule timezone must be a string (got ${describe(timezone)})`);
    const missed = opts.missed ?? "once";
    if (missed !== "once" && missed !== "skip")
      throw new ValidationError(`schedule missed must be "once" or "skip" (got ${describe(missed)})`);
    const graceMs = opts.graceMs ?? DEFAULT_GRACE_MS;
    if (!Number.isInteger(graceMs) || graceMs < 0 || graceMs > MAX_MS)
      throw new ValidationError(`schedule graceMs must be an integer in [0, ${MAX_MS}]`);
    const queue = opts.queue === undefined ? null : checkName(opts.queue, "queue");
    const priority = opts.priority ?? null;
    if (priority !== null && (!Number.isInteger(priority) || priority < -1000 || priority > 1000))
      throw new ValidationError("schedule priority must be an integer in [-1000, 1000]");
    const c = parseCron(cron, timezone);
    const def = this.#resolve(task);
    const { value } = await validateInput(def, input);
    const text = toStorableJson(value ?? null, `input of schedule "${n}"`, this.#o.maxPayloadBytes);
    const now = await this.store.now();
    return this.store.upsertSchedule({
      name: n,
      cron,
      timezone,
      task: def.name,
      input: text,
      queue,
      priority,
      missed,
      graceMs,
      nextAt: nextTick(c, now),
    });
  }

  /** Deletes a schedule; returns whether it existed. Tasks it already enqueued are not touched. */
  async unschedule(name: string): Promise<boolean> {
    this.#live();
    return this.store.deleteSchedule(checkName(name, "schedule name"));
  }

  async schedules(): Promise<ScheduleRow[]> {
    this.#live();
    return this.store.listSchedules();
  }

  /**
   * Enqueues the due ticks this process has code for (spec §14.2–§14.3): wins
   * each tick by a conditional write, then enqueues its task under the tick's
   * dedupe key; a tick won by a process that died before enqueueing is
   * enqueued by the next pass (the key makes that idempotent). Returns how
   * many tasks were enqueued.
   */
  async #fireSchedules(): Promise<number> {
    const { rows, now } = await this.store.dueSchedules(100);
    let fired = 0;
    for (const row of rows) {
      const def = this.#registry.get(row.task);
      if (!def) continue; // a process with this code will fire it
      let tick = row.firingAt;
      if (tick === null) {
        const d = decideTick(parseCron(row.cron, row.timezone), row, now);
        if (!(await this.store.claimTick(row.name, row.nextAt, d.next, d.fire ? row.nextAt : null))) continue;
        if (!d.fire) continue;
        tick = row.nextAt;
      }
      const [id] = await this.enqueueMany([
        {
          task: def,
          input: JSON.parse(row.input) as unknown,
          dedupe: tickKey(row.name, tick),
          ...(row.queue !== null ? { queue: row.queue } : {}),
          ...(row.priority !== null ? { priority: row.priority } : {}),
        },
      ]);
      await this.store.firedTick(row.name, tick, id!);
      fired++;
    }
    return fired;
  }

  /** Ends this process's run-mode invocations of marked tasks (spec §12.5). */
  #signal(ids: readonly TaskId[]): void {
    for (const id of ids)
      for (const d of [this.#worker?.driver, ...this.#ticks]) {
        const inv = d?.active(id);
        if (inv && inv.mode === "run") inv.end({ kind: "aborted" });
      }
  }

  /**
   * Subscribes the worker to wake-ups (spec §10.5, §13.6) the first time it waits for work: a
   * claim came back short and a slot is free. A worker busy from its start (a deploy or a restart
   * with a backlog, the peers harness's W2) needs none until then, and on PostgreSQL the
   * subscription is a connection of its own: its start cost the server ~12 ms of CPU and the
   * worker a connect beside its first claims, in every worker process. Fresh worker processes
   * draining 20,000 no-ops at c16 with prefetch 500, alternating with the build before (2026-12-07,
   * issue 43, medians): one process, eight pairs, first job 86 → 69 ms and 25.7k → 26.6k tasks/s;
   * two processes, five pairs, the drain 912 → 883 ms. What is enqueued between the empty claim
   * and the subscription is not missed: a new subscription wakes the worker once (the stores'
   * subscribe), and the poll (spec §8.1) stays. A subscription that fails leaves the worker
   * polling, logged once.
   */
  #listen(w: StartedWorker): void {
    if (w.listening || !this.store.subscribe) return;
    w.listening = this.store
      .subscribe(() => this.#wakeup.notify())
      .catch((err) => {
        this.#o.logger.error("cannot subscribe to wake-ups; the worker polls", err);
        return undefined;
      });
  }

  async #workerLoop(w: StartedWorker): Promise<void> {
    const pollMin = Math.min(5, this.#o.pollIntervalMs);
    let delay = pollMin;
    // spec §12.10: the first pass an interval after open's reconcile, which a worker started right
    // after open would otherwise repeat at once. A pass is five to ten statements, and a worker's
    // first ones in each new connection are planned there: ~28 ms of the server's CPU at the start of
    // a drain (per-statement CPU of the backend, /proc/<pid>/schedstat, 2026-12-07), while the
    // first claims and settlements open and plan on theirs.
    let maintained = this.#reconciledAt;
    // Maintenance runs beside the claims, not before them (spec §12.10): five to eight statements,
    // 8–14 ms on PostgreSQL at W3's 200 tasks/s (timed in a worker); awaited at the top of the loop,
    // it ran as a wake-up came in, once a second, and the task that woke the worker waited for it.
    // One run at a time; the loop's end waits for the last one.
    let maintaining: Promise<void> | undefined;
    while (!w.stop) {
      if (!maintaining && performance.now() - maintained >= this.#o.maintenanceIntervalMs) {
        maintained = performance.now();
        maintaining = this.#maintain([w.driver])
          .catch((err) => this.#o.logger.error("reconcile failed; retrying at the next interval", err))
          .finally(() => {
            maintaining = undefined;
          });
      }
      let started = 0;
      // Let queued settlements commit first (they flush on setImmediate, and a loop of claims
      // resolved by microtasks would starve them): a claim then sees the seats they free (spec §14.9).
      if (w.driver.unsettled > 0) await new Promise((res) => setImmediate(res));
      try {
        started = await w.driver.fill(Number.POSITIVE_INFINITY);
      } catch (err) {
        this.#o.logger.error("claim failed; retrying", err);
        await this.#wakeup.wait(delay);
        delay = Math.min(delay * 2, this.#o.pollIntervalMs);
        continue;
      }
      if (w.stop) break;
      if (started > 0) delay = pollMin;
      // Claim again at once only after a claim that came back full (spec §8.1). One that came back
      // short found all that was ready: what arrives after it wakes the worker (an enqueue here, a
      // NOTIFY on PostgreSQL, a freed slot), and a worker enqueued to from elsewhere without
      // notifications polls after pollMin. An idle PostgreSQL worker at W3's 200 tasks/s made three
      // claims per task, two of them empty (5,900 claims for 2,000 tasks, now 4,060), and a task
      // whose NOTIFY came in during one waited for it to end.
      if (started > 0 && !w.driver.short) continue;
      if (w.driver.inFlight >= w.driver.concurrency || w.driver.backedUp) {
        // Busy, or held back by the settle backlog (spec §8.9): a freed slot, or the settlement that
        // ends the hold, notifies the wakeup; no store read needed.
        await this.#wakeup.wait(this.#o.pollIntervalMs);
        continue;
      }
      // Woken while the claim ran (its snapshot may predate what woke us): claim again now, without
      // the read of the next timer first.
      if (this.#wakeup.take()) {
        delay = pollMin;
        continue;
      }
      let wait = delay;
      // The next timer can only shorten the wait, and never below pollMin: at pollMin (right after
      // a claim that started work, or a wake-up) the read cannot change it. An idle PostgreSQL worker
      // at W3's 200 tasks/s read it once per task (1,986 reads for 2,000 tasks, counted per statement
      // in an in-process W3), each a statement that a task arriving during it waited for; now 53.
      // The W3 tail did not move beyond its spread (`node --import tsx peers/w3trace.ts`, bench/,
      // four alternating runs: p99 5.8–7.0 ms before, 6.1–6.8 after; the slowest 1 % are mostly
      // their own enqueue's commit).
      if (delay > pollMin) {
        try {
          const next = await this.store.nextRunAt();
          if (next !== null) wait = Math.min(delay, Math.max(pollMin, next - this.#o.clock.now()));
        } catch {
          // A failed read only means we poll at the current delay.
        }
      }
      wait = Math.min(
        wait,
        Math.max(pollMin, this.#o.maintenanceIntervalMs - (performance.now() - maintained)),
      );
      this.#listen(w);
      const woken = await this.#wakeup.wait(wait);
      delay = woken ? pollMin : Math.min(delay * 2, this.#o.pollIntervalMs);
    }
    await maintaining;
  }

  /** Stops the worker gracefully (spec §8.2). */
  async stop(): Promise<void> {
    const w = this.#worker;
    if (!w) return;
    // The server goes first: nothing new arrives through it while the worker winds down.
    await w.server?.close().catch((err) => this.#o.logger.error("closing the HTTP server failed", err));
    w.stop = true;
    this.#wakeup.notify();
    await w.loop;
    await (await w.listening)?.();
    await w.driver.drain(w.shutdownTimeoutMs);
    this.#worker = undefined;
  }

  /** Drains what fits in budgetMs (spec §8.3). */
  async tick(opts: TickOptions): Promise<TickReport> {
    this.#live();
    if (
      !opts ||
      typeof opts.budgetMs !== "number" ||
      !Number.isInteger(opts.budgetMs) ||
      opts.budgetMs < 0 ||
      opts.budgetMs > MAX_MS
    ) {
      throw new ValidationError(
        `tick needs budgetMs, an integer in [0, ${MAX_MS}] (got ${describe(opts?.budgetMs)})`,
      );
    }
    checkKeys(opts, CALL_KEYS.tick, "tick options");
    const concurrency = opts.concurrency ?? 6;
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 10_000)
      throw new ValidationError("tick concurrency must be an integer in [1, 10000]");
    const max = opts.max ?? 50;
    if (!Number.isInteger(max) || max < 0) throw new ValidationError("tick max must be an integer ≥ 0");
    const clock = this.#o.clock;
    const reserve = this.#o.tickReserveMs;
    const started = clock.now();
    const deadline = started + opts.budgetMs;
    const report: TickReport = { ran: 0, done: 0, failed: 0, retried: 0, skipped: 0, ms: 0, budgetLeft: 0 };
    const queues = opts.queues?.map((q) => checkName(q, "queue"));
    const fitting = () => {
      const remaining = deadline - clock.now();
      return this.definitions()
        .filter((d) => d.maxMs + reserve <= remaining)
        .map((d) => d.name);
    };
    const driver = this.#driver(
      concurrency,
      () => this.#queues(queues),
      fitting,
      (r) => {
        if (r === "done") report.done++;
        else if (r === "failed" || r === "aborted") report.failed++;
        else if (r === "retried") report.retried++;
      },
    );
    this.#ticks.add(driver);
    try {
      await this.#maintain([driver]);
      while (deadline - clock.now() > reserve && report.ran < max) {
        const n = await driver.fill(max - report.ran);
        report.ran += n;
        if (n === 0 && driver.inFlight === 0) {
          // A settlement still committing may make work due (a released dependent, a woken
          // waiter, a child's owner), or hold a row lock a claim skipped: settle, then look again.
          if (driver.unsettled === 0) break;
          await driver.allSettled();
          continue;
        }
        if (n === 0 || driver.inFlight >= concurrency)
          await driver.waitForSlot(Math.max(1, Math.min(50, deadline - clock.now() - reserve)));
      }
      await driver.allSettled();
      const notFitting = this.#names().filter((n) => !fitting().includes(n));
      report.skipped = await this.store.countReady(this.#queues(queues), notFitting, 10_000);
    } finally {
      this.#ticks.delete(driver);
    }
    report.ms = clock.now() - started;
    report.budgetLeft = Math.max(0, deadline - clock.now());
    return report;
  }

  // ---------------------------------------------------------- operations

  /**
   * spec §7, §12.5. The mark is durable and cascades to owned work; in this
   * process running invocations of every marked task are signalled at once.
   */
  async abort(id: TaskId): Promise<AbortResult> {
    this.#live();
    await this.#flushDefinitions();
    const { marked = [], ...res } = await this.store.abort(checkId(id));
    // The task itself too: it may have been parked or ended by this call while its code still runs here.
    this.#signal([id, ...marked]);
    this.#wakeup.notify();
    if (res.state !== "marked") for (const l of this.#settledListeners) l(id);
    return res as AbortResult;
  }

  /**
   * Aborts every live task of a scope (spec §12.5). Background subtrees are
   * left alone unless `background: true`. Returns how many tasks were marked.
   */
  async abortScope(scope: string, opts: { background?: boolean } = {}): Promise<{ marked: number }> {
    this.#live();
    const s = checkName(scope, "scope");
    checkKeys(opts, CALL_KEYS.abortScope, "abortScope options");
    const background = opts?.background ?? false;
    if (typeof background !== "boolean") throw new ValidationError("abortScope background must be a boolean");
    await this.#flushDefinitions();
    const ids = await this.store.abortScope(s, background);
    this.#signal(ids);
    this.#wakeup.notify();
    return { marked: new Set(ids).size };
  }

  /**
   * Sends a named signal (spec §12.7). The first signal per name is kept and
   * wakes every task waiting for it now or later; `first` is false when the
   * name had been signalled before (the payload is then ignored).
   */
  async signal(name: string, payload: unknown = null): Promise<{ first: boolean; woken: number }> {
    this.#live();
    const n = checkName(name, "event name");
    const text = toStorableJson(payload ?? null, `payload of signal "${n}"`, this.#o.maxPayloadBytes);
    const r = await this.store.signal(n, text);
    if (r.woken > 0) this.#wakeup.notify();
    return r;
  }

  /**
   * Tells this process's workers that due work may have appeared, for layers that create tasks
   * through store operations of their own (a conversation's run, spec §17.5): otherwise an idle
   * worker here would find it only at its next poll. Other processes hear of it as ever (PostgreSQL
   * NOTIFY, or their poll). Writes nothing.
   */
  wake(): void {
    this.#wakeup.notify();
  }

  /** The task and everything it owns, as a tree (spec §12.10). At most `limit` tasks (default 1000). */
  async tree(id: TaskId, opts: { limit?: number } = {}): Promise<TaskTree & { truncated: boolean }> {
    this.#live();
    checkKeys(opts, CALL_KEYS.limit, "tree options");
    const limit = opts?.limit ?? 1000;
    if (!Number.isInteger(limit) || limit < 1 || limit > 100_000)
      throw new ValidationError("tree limit must be an integer in [1, 100000]");
    const rows = await this.store.subtree(checkId(id), limit);
    if (rows.length === 0) throw new NotFoundError(`task ${id}`);
    return buildTree(rows, limit);
  }

  /**
   * What every live task is doing and why (spec §12.10): ready, running,
   * waiting on which tasks or event, completing, or blocked with a reason.
   * Writes nothing and runs no task code.
   */
  async inspect(opts: { limit?: number } = {}): Promise<Inspection> {
    this.#live();
    checkKeys(opts, CALL_KEYS.limit, "inspect options");
    const limit = opts?.limit ?? 1000;
    if (!Number.isInteger(limit) || limit < 1 || limit > 100_000)
      throw new ValidationError("inspect limit must be an integer in [1, 100000]");
    const rows = await this.store.inspectRows(limit);
    return inspection(rows, this.#registry, {
      scheduling: this.#closed ? "closing" : this.#worker ? "running" : "paused",
      now: await this.store.now(),
    });
  }

  /**
   * Why a task is where it is (spec §14.5), from the scheduler's side: ended,
   * running on W until T, not due until T, waiting on …, blocked (reason),
   * no definition registered, or due behind N tasks. Writes nothing.
   */
  async explain(id: TaskId): Promise<Explanation> {
    this.#live();
    const rows = await this.store.explainRows(checkId(id));
    if (!rows) throw new NotFoundError(`task ${id}`);
    return explain(rows, this.#registry.get(rows.task.name));
  }

  /**
   * Resolves once no live task of the scope is reachable by ordinary traversal
   * (background subtrees do not count; blocked, waiting and completing tasks
   * do). TimeoutError after timeoutMs (default 5 min). spec §12.10. Without a
   * scope: once no such task is live in the whole store (spec §12.12).
   */
  async waitForIdle(opts?: { timeoutMs?: number }): Promise<void>;
  async waitForIdle(scope: string, opts?: { timeoutMs?: number }): Promise<void>;
  async waitForIdle(
    scopeOrOpts?: string | { timeoutMs?: number },
    scopeOpts: { timeoutMs?: number } = {},
  ): Promise<void> {
    this.#live();
    const everywhere = scopeOrOpts === undefined || (typeof scopeOrOpts === "object" && scopeOrOpts !== null);
    const s = everywhere ? null : checkName(scopeOrOpts, "scope");
    const opts = everywhere ? (scopeOrOpts as { timeoutMs?: number } | undefined) : scopeOpts;
    checkKeys(opts, CALL_KEYS.wait, "waitForIdle options");
    const timeoutMs = opts?.timeoutMs ?? 300_000;
    if (!Number.isInteger(timeoutMs) || timeoutMs < 0 || timeoutMs > MAX_MS)
      throw new ValidationError(`waitForIdle timeoutMs must be an integer in [0, ${MAX_MS}]`);
    const deadline = performance.now() + timeoutMs;
    let delay = 5;
    const local = new Wakeup();
    const listener = () => local.notify();
    this.#settledListeners.add(listener);
    try {
      for (;;) {
        const live = s === null ? await this.#liveOrdinary() : await this.store.scopeLive(s);
        if (live === 0) return;
        const left = deadline - performance.now();
        if (left <= 0)
          throw new TimeoutError(
            `${s === null ? "the store" : `scope "${s}"`} still has ${live} live tasks after ${timeoutMs} ms`,
          );
        await local.wait(Math.min(delay, left));
        delay = Math.min(delay * 2, 250);
        if (this.#closed) throw new ClosedError();
      }
    } finally {
      this.#settledListeners.delete(listener);
    }
  }

  /**
   * spec §12.12: live, non-detached tasks in the whole store. The depth counters (§9.5) answer
   * "nothing live" without reading a task; only when some task is live does the store count them.
   */
  async #liveOrdinary(): Promise<number> {
    const depths = await this.store.depths();
    if (depths.every((d) => d.live === 0)) return 0;
    return this.store.scopeLive(null);
  }

  /** spec §6.3. */
  async retry(id: TaskId): Promise<TaskRecord> {
    this.#live();
    const rec = await this.store.retry(checkId(id));
    this.#wakeup.notify();
    return rec;
  }

  async get(id: TaskId): Promise<TaskRecord | null> {
    this.#live();
    return this.store.get(checkId(id));
  }

  // ------------------------------------------------------------ streams

  /**
   * spec §16.5: the committed chunks of a task's stream from `from` (default 0), then — unless
   * `follow: false` — the ones committed later, until the stream is closed or the task ends.
   * Reconnecting with the last offset seen plus one gives exactly the rest. Bad arguments throw here.
   */
  readStream(taskId: TaskId, name: string, opts: ReadStreamOptions = {}): AsyncIterable<StreamChunk> {
    const args = checkRead(taskId, name, opts);
    return readChunks(this.store, this.#streamWaiters, args, opts.signal, () => this.#closed);
  }

  /** The streams of a task (name, length, bytes, closed), by name. */
  async streams(taskId: TaskId): Promise<StreamInfo[]> {
    return streamsOf(this.store, taskId);
  }

  async details(id: TaskId): Promise<TaskDetails> {
    this.#live();
    const task = await this.store.get(checkId(id));
    if (!task) throw new NotFoundError(`task ${id}`);
    const [needs, steps, events] = await Promise.all([
      this.store.needsOf(id),
      this.store.steps(id),
      this.store.events(id),
    ]);
    return { task, needs, steps, events };
  }

  /** spec §9.1; the filter is validated here, the same for every store (spec §9.6). */
  async list(filter: Partial<ListFilter> = {}): Promise<TaskRecord[]> {
    this.#live();
    return this.store.list(checkListFilter(filter));
  }

  async jobStatus(job: string): Promise<JobStatus> {
    this.#live();
    return this.store.jobStatus(checkName(job, "job name"));
  }

  async stats(): Promise<QueueStats[]> {
    this.#live();
    return this.store.stats();
  }

  /**
   * Each queue's live tasks (every status but terminal), by queue name, from the counters admission
   * keeps (spec §2.7, §9.5): it reads one row per queue, never the tasks, so a frequent poll (a
   * drain's "is anything left?", a depth gauge) costs the same on a table of millions of ended tasks.
   * Writes nothing.
   */
  async depths(): Promise<QueueDepth[]> {
    this.#live();
    return this.store.depths();
  }

  /**
   * The tasks that ended last, newest first, with the times latency metrics
   * need (`ratchet serve`'s /metrics). At most `limit` (default 100, at most 1000). Writes nothing.
   */
  async recentlyEnded(opts: { limit?: number } = {}): Promise<EndedTask[]> {
    this.#live();
    checkKeys(opts, CALL_KEYS.limit, "recentlyEnded options");
    const limit = opts?.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
      throw new ValidationError("recentlyEnded limit must be an integer in [1, 1000]");
    return this.store.recentlyEnded(limit);
  }

  async nextRunAt(): Promise<number | null> {
    this.#live();
    return this.store.nextRunAt();
  }

  /** Resolves with the task once it is terminal (spec §9.4); TimeoutError after timeoutMs (default 5 min). */
  async waitFor(id: TaskId, opts: { timeoutMs?: number } = {}): Promise<TaskRecord> {
    this.#live();
    checkId(id);
    checkKeys(opts, CALL_KEYS.wait, "waitFor options");
    const timeoutMs = opts?.timeoutMs ?? 300_000;
    if (!Number.isInteger(timeoutMs) || timeoutMs < 0 || timeoutMs > MAX_MS)
      throw new ValidationError(`waitFor timeoutMs must be an integer in [0, ${MAX_MS}]`);
    const deadline = performance.now() + timeoutMs;
    const local = new Wakeup();
    const listener = (t: TaskId) => t === id && local.notify();
    this.#settledListeners.add(listener);
    try {
      let delay = 5;
      for (;;) {
        const t = await this.store.get(id);
        if (!t) throw new NotFoundError(`task ${id}`);
        if (!isLive(t.status)) return t;
        const left = deadline - performance.now();
        if (left <= 0) throw new TimeoutError(`task ${id} is still ${t.status} after ${timeoutMs} ms`);
        await local.wait(Math.min(delay, left));
        delay = Math.min(delay * 2, 250);
        if (this.#closed) throw new ClosedError();
      }
    } finally {
      this.#settledListeners.delete(listener);
    }
  }

  /** Stops workers (gracefully) and closes the store. Writes no outcome (spec §8.2). */
  async close(): Promise<void> {
    if (this.#closed) return;
    await this.stop();
    for (const d of this.#ticks) await d.drain(0);
    this.#closed = true;
    await this.store.close();
  }
}

function checkId(id: unknown): TaskId {
  if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 1)
    throw new ValidationError(`task id must be a positive integer (got ${describe(id)})`);
  return id;
}
