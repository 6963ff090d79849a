import { afterEach, describe, expect, it, vi } from "vitest";
import { systemClock } from "../../src/core/clock.js";
import type { TaskContext } from "../../src/engine/context.js";
import { settleBacklog } from "../../src/engine/driver.js";
import { defineTask, Ratchet, type RatchetError } from "../../src/index.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { PG_URL } from "../pg-available.js";
import { overriding } from "../store-override.js";
import {
  aborted,
  createStore,
  deferred,
  drain,
  expectCode,
  FakeClock,
  forEachBackend,
  newTask,
  onCleanup,
  openRatchet,
  type StoreOptions,
  sharedStoreOptions,
  silentLogger,
  storeOptions,
  tempDbPath,
  until,
} from "./helpers.js";

afterEach(() => {
  vi.useRealTimers();
});

/** Lets real I/O (a PostgreSQL round trip) progress for about `ms` of real time, while fake time stands still. */
async function realPause(ms: number): Promise<void> {
  const end = performance.now() + ms;
  while (performance.now() < end) await new Promise((r) => setImmediate(r));
}

/** Opens another instance on shared storage (one SQLite file, or one PostgreSQL schema). */
async function openAt(loc: StoreOptions, tasks: Parameters<typeof openRatchet>[0], extra = {}) {
  return openRatchet(tasks, { ...loc, ...extra });
}

forEachBackend(() => {
  describe("drivers (spec §8)", () => {
    it("§8.2 stop() past shutdownTimeoutMs aborts the signal and releases the task: pending, attempt not counted, event 'released'; another instance claims it at once", async () => {
      const loc = sharedStoreOptions();
      const started = deferred();
      const gate = deferred();
      let signalReason: unknown;
      let staleDone = false;
      const slow1 = defineTask({
        name: "work",
        async run(ctx: TaskContext) {
          started.resolve();
          void aborted(ctx.signal).then((r) => {
            signalReason = r;
          });
          await gate.promise; // ignores the signal
          try {
            await ctx.step("late", () => 1);
          } catch {
            // refused: this invocation no longer holds the task
          }
          staleDone = true;
          return "from r1";
        },
      });
      const r1 = await openAt(loc, [slow1]);
      const id = await r1.enqueue(slow1);
      await r1.start({ concurrency: 1, shutdownTimeoutMs: 100 });
      await started.promise;
      await r1.stop();
      const rec = (await r1.get(id))!;
      expect(rec.status).toBe("pending");
      expect(rec.attempts).toBe(0);
      expect(rec.outcome).toBeNull();
      expect(rec.lockedBy).toBeNull();
      expect(rec.leaseUntil).toBeNull();
      expect((signalReason as RatchetError | undefined)?.code).toBeDefined();
      const events = await r1.store.events(id);
      expect(events.map((e) => e.kind)).toEqual(["released"]);

      const fast2 = defineTask({ name: "work", run: () => "from r2" });
      const r2 = await openAt(loc, [fast2]);
      const report = await drain(r2);
      expect(report.ran).toBe(1);
      const done = await r2.waitFor(id, { timeoutMs: 10_000 });
      expect(done.result).toBe("from r2");
      expect(done.attempts).toBe(1);
      expect(done.epoch).toBe(2);

      gate.resolve();
      await until(() => staleDone, "the stale handler to finish");
      expect((await r2.get(id))!.result).toBe("from r2");
      expect(await r2.store.steps(id)).toEqual([]);
    });

    it("§8.2 stop() waits for in-flight invocations that finish within shutdownTimeoutMs, and their outcome is committed", async () => {
      const started = deferred();
      const gate = deferred();
      const t = defineTask({
        name: "finishing",
        async run() {
          started.resolve();
          await gate.promise;
          return "finished";
        },
      });
      const r = await openRatchet([t]);
      const id = await r.enqueue(t);
      await r.start({ concurrency: 1, shutdownTimeoutMs: 30_000 });
      await started.promise;
      const stopping = r.stop();
      gate.resolve();
      await stopping;
      const rec = (await r.get(id))!;
      expect(rec.status).toBe("terminal");
      expect(rec.outcome).toBe("completed");
      expect(rec.result).toBe("finished");
    });

    it("§8.2 close() right after a task's code returns still commits its outcome", async () => {
      const loc = sharedStoreOptions();
      const returned = deferred();
      const t = defineTask({
        name: "quick",
        run() {
          returned.resolve();
          return "kept";
        },
      });
      const r = await Ratchet.open({ ...loc, tasks: [t], logger: silentLogger });
      const id = await r.enqueue(t);
      await r.start({ concurrency: 1 });
      await returned.promise;
      await r.close();
      const again = await openAt(loc, [t]);
      const rec = (await again.get(id))!;
      expect(rec.status).toBe("terminal");
      expect(rec.result).toBe("kept");
    });

    it("§8.1 a worker runs at most `concurrency` invocations at a time", async () => {
      let active = 0;
      let peak = 0;
      const gate = deferred();
      const t = defineTask({
        name: "gated",
        async run() {
          active++;
          peak = Math.max(peak, active);
          await gate.promise;
          active--;
          return null;
        },
      });
      const r = await openRatchet([t], { pollIntervalMs: 10 });
      const ids = await r.enqueueMany(Array.from({ length: 10 }, () => ({ task: t })));
      await r.start({ concurrency: 3 });
      await until(() => active === 3, "three invocations in flight");
      const stats = (await r.stats())[0]!;
      expect(stats.byStatus.running).toBe(3);
      expect(stats.byStatus.pending).toBe(7);
      expect(await r.depths()).toEqual([{ queue: "default", live: 10 }]);
      gate.resolve();
      for (const id of ids) await r.waitFor(id, { timeoutMs: 10_000 });
      expect(peak).toBe(3);
      // spec §9.5: settled tasks leave the count once their settlements commit.
      await until(async () => (await r.depths())[0]!.live === 0, "no live task in the depth count");
    });

    it("§8.1 an enqueue in the same process wakes an idle worker at once (no poll timer has to fire)", async () => {
      // Every timer is fake from the start, and never advanced: a worker that relied
      // on its poll timer would never see the task.
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
      const inner = await createStore(systemClock);
      let claims = 0;
      const store = overriding(inner, {
        claim: (req: Parameters<typeof inner.claim>[0]) => {
          claims++;
          return inner.claim(req);
        },
      });
      const t = defineTask({ name: "wake", run: () => "woken" });
      const r = await openRatchet([t], { store, pollIntervalMs: 600_000 });
      await r.start({ concurrency: 1 });
      const spin = async (cond: () => Promise<boolean> | boolean) => {
        for (let i = 0; i < 10_000; i++) {
          if (await cond()) return true;
          await new Promise((res) => setImmediate(res));
        }
        return false;
      };
      // An idle round (a claim that finds nothing), then quiet: the start-up wake-ups (on PostgreSQL
      // also the listener's, once it is connected) are used up and the worker waits on a (frozen) timer.
      expect(await spin(() => claims >= 1)).toBe(true);
      const quiet = async () => {
        let seen = -1;
        for (let i = 0; i < 50 && seen !== claims; i++) {
          seen = claims;
          await realPause(100);
        }
        expect(claims).toBe(seen);
        return seen;
      };
      await quiet();
      // A single enqueue beside a free slot is handed to the worker at once (§8.8)...
      const id = await r.enqueue(t);
      expect(await spin(async () => (await inner.get(id))?.status === "terminal")).toBe(true);
      expect((await inner.get(id))!.result).toBe("woken");
      // ...without a claim, so only a batch needs the wake-up this tests.
      const seen = await quiet();
      const ids = await r.enqueueMany([{ task: t }, { task: t }]);
      const done = async () => {
        for (const id of ids) if ((await inner.get(id))?.status !== "terminal") return false;
        return true;
      };
      expect(await spin(done)).toBe(true);
      for (const id of ids) expect((await inner.get(id))!.result).toBe("woken");
      // The enqueue's wake-up claimed them (claims after the quiet), not a timer: none can fire.
      expect(claims).toBeGreaterThan(seen);
      vi.useRealTimers();
    });

    it("§8.9 a worker stops claiming while 512 × (w + 1) settlements wait to be written (w: the store's settle writes at once), and claims again once half are", async () => {
      // Poll timers frozen, no LISTEN: once held back, only the settlements' progress wakes the worker.
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
      const inner = await createStore(systemClock);
      const gate = deferred();
      let held = 0;
      let writes = 0;
      let maxWrites = 0;
      let biggest = 0;
      // Settlements written so far, and how many were written when the worker claimed again.
      let committed = 0;
      let released = false;
      let waiting = 0;
      let resumedAt: number | undefined;
      const claimedAgain = deferred();
      const lanes = inner.settleLanes ?? 1;
      const backlog = settleBacklog(lanes);
      // One write at a time on both stores (PostgresStore.settleLanes): 1,024.
      expect(backlog).toBe(1_024);
      const store = overriding(inner, {
        subscribe: undefined,
        // The first settle batches (one per lane) wait at the gate.
        settle: async (items: Parameters<typeof inner.settle>[0]) => {
          held += items.length;
          biggest = Math.max(biggest, items.length);
          maxWrites = Math.max(maxWrites, ++writes);
          try {
            await gate.promise;
            // The write that would leave nothing waiting holds until the worker claims again (or 2 s
            // pass): a worker that waited for every settlement instead of half would not claim.
            if (released && committed + items.length >= waiting)
              await Promise.race([claimedAgain.promise, realPause(2_000)]);
            const out = await inner.settle(items);
            committed += items.length;
            return out;
          } finally {
            writes--;
          }
        },
        claim: async (req: Parameters<typeof inner.claim>[0]) => {
          if (released && resumedAt === undefined) {
            resumedAt = committed;
            claimedAgain.resolve();
          }
          return inner.claim(req);
        },
      });
      let runs = 0;
      const t = defineTask({
        name: "quick",
        run: () => {
          runs++;
          return null;
        },
      });
      const r = await openRatchet([t], { store, pollIntervalMs: 600_000 });
      const N = 2_500;
      for (let i = 0; i < N; i += 500) await r.enqueueMany(Array.from({ length: 500 }, () => ({ task: t })));
      await r.start({ concurrency: 50 });
      const spin = async (cond: () => boolean | Promise<boolean>) => {
        for (let i = 0; i < 2_000; i++) {
          if (await cond()) return true;
          await realPause(5);
        }
        return false;
      };
      // Runs stop once `backlog` finished tasks wait for their settlements: the claim before that took
      // at most 50 (the free slots), so fewer than backlog + 50 ran.
      expect(await spin(() => runs >= backlog)).toBe(true);
      let seen = -1;
      for (let i = 0; i < 50 && seen !== runs; i++) {
        seen = runs;
        await realPause(100);
      }
      expect(runs).toBe(seen);
      expect(runs).toBeGreaterThanOrEqual(backlog);
      expect(runs).toBeLessThan(backlog + 50);
      expect(held).toBeGreaterThan(0);
      // Every lane's write is in flight at the gate, and never more.
      expect(maxWrites).toBe(lanes);
      expect((await inner.stats())[0]!.byStatus.running).toBe(runs);
      // The writes go on: their progress wakes the worker, claims resume, every task completes once.
      waiting = seen;
      released = true;
      gate.resolve();
      expect(await spin(async () => (await inner.stats())[0]!.byOutcome.completed === N)).toBe(true);
      expect(runs).toBe(N);
      // It claimed again once no more than half the backlog waited (every finished task was waiting:
      // none ran while held), and before every waiting settlement was written.
      expect(resumedAt).toBeDefined();
      expect(seen - resumedAt!).toBeLessThanOrEqual(backlog / 2);
      expect(resumedAt!).toBeLessThan(seen);
      // Each write carries at most one batch of 512 (spec §8.9); with N finished tasks waiting, the
      // batches were full.
      expect(biggest).toBe(512);
      vi.useRealTimers();
      // The queue's live counter (spec §2.7) came back to zero through every lane's batches: with
      // the depth bound at N, N new tasks fit and one more does not.
      await r.stop();
      const depth = { maxDepth: () => N };
      for (let i = 0; i < N; i += 500)
        await inner.enqueue(
          Array.from({ length: 500 }, () => newTask({ name: "quick" })),
          depth,
        );
      await expectCode(() => inner.enqueue([newTask({ name: "quick" })], depth), "RATCHET_QUEUE_FULL");
    });

    it("§8.1 a claim that comes back short is not followed by another at once: the worker waits for a wake-up or its poll", async () => {
      // Poll timers frozen; no LISTEN (the store's subscribe hidden): only this process wakes the worker.
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
      const inner = await createStore(systemClock);
      const claims: number[] = [];
      const store = overriding(inner, {
        subscribe: undefined,
        claim: async (req: Parameters<typeof inner.claim>[0]) => {
          const got = await inner.claim(req);
          claims.push(got.length);
          return got;
        },
      });
      const gate = deferred();
      let active = 0;
      const t = defineTask({
        name: "held",
        run: async () => {
          active++;
          await gate.promise;
        },
      });
      const r = await openRatchet([t], { store, pollIntervalMs: 600_000 });
      await r.start({ concurrency: 4 });
      // Real time for the store's round trips (PostgreSQL), fake time frozen.
      const settle = () => realPause(300);
      await settle();
      const before = claims.length;
      expect(before).toBeGreaterThanOrEqual(1);
      // Two tasks in one batch (no hand-off to the worker): one wake-up, one claim of up to 4 that finds 2.
      await r.enqueueMany([{ task: t }, { task: t }]);
      await settle();
      expect(active).toBe(2);
      expect(claims.slice(before)).toEqual([2]);
      gate.resolve();
      vi.useRealTimers();
    });

    it("§10.5 §13.6 a worker subscribes to wake-ups at its first wait for work, not while its claims come back full; then another instance's enqueue wakes it", async () => {
      const loc = sharedStoreOptions();
      const at = String(loc.store);
      const inner =
        at === PG_URL
          ? new PostgresStore({ connectionString: PG_URL, schema: loc.postgres!.schema! })
          : new SqliteStore({ path: at.slice("sqlite:".length), clock: systemClock });
      onCleanup(() => inner.close());
      const log: string[] = [];
      const store = overriding(inner, {
        subscribe: async (onWake: () => void) => {
          log.push("subscribe");
          return inner.subscribe!(onWake);
        },
        claim: async (req: Parameters<typeof inner.claim>[0]) => {
          const got = await inner.claim(req);
          log.push(got.length < req.limit ? "short" : "full");
          return got;
        },
      });
      let runs = 0;
      const t = defineTask({
        name: "count",
        run: () => {
          runs++;
          return null;
        },
      });
      // The poll is ten minutes away: only a wake-up starts what another instance enqueues.
      const r = await openRatchet([t], { store, pollIntervalMs: 600_000 });
      await r.enqueueMany(Array.from({ length: 40 }, () => ({ task: t })));
      await r.start({ concurrency: 4 });
      await until(
        () => runs === 40 && log.includes("subscribe"),
        "the backlog to run and the worker to subscribe",
      );
      const first = log.indexOf("subscribe");
      // Full claims of the free slots while the backlog lasted, no subscription among them.
      expect(log.slice(0, first).filter((x) => x === "full").length).toBeGreaterThanOrEqual(5);
      expect(log[first - 1]).toBe("short");
      const other = await openAt(loc, [t]);
      await other.enqueue(t, undefined);
      await until(() => runs === 41, "the other instance's task to run on the wake-up");
      expect(log.filter((x) => x === "subscribe")).toEqual(["subscribe"]);
    });

    it("§13.6 a worker whose subscription to wake-ups fails polls instead: it logs the failure once and still runs what is enqueued", async () => {
      const inner = await createStore(systemClock);
      let subscribes = 0;
      const store = overriding(inner, {
        subscribe: async () => {
          subscribes++;
          throw new Error("no LISTEN for you");
        },
      });
      const errors: string[] = [];
      const logger = { ...silentLogger, error: (msg: string) => errors.push(msg) };
      const t = defineTask({ name: "polled", run: () => "ran" });
      const r = await openRatchet([t], { store, pollIntervalMs: 20, logger });
      await r.start({ concurrency: 2 });
      await until(() => subscribes === 1, "the worker's first wait for work");
      const id = await r.enqueue(t, undefined);
      expect((await r.waitFor(id, { timeoutMs: 5_000 })).result).toBe("ran");
      const later = await r.enqueue(t, undefined);
      expect((await r.waitFor(later, { timeoutMs: 5_000 })).result).toBe("ran");
      expect(subscribes).toBe(1);
      expect(errors).toEqual(["cannot subscribe to wake-ups; the worker polls"]);
      await r.stop();
    });

    it("§12.10 a worker's maintenance runs beside its claims: a reconcile that hangs holds no task back", async () => {
      const inner = await createStore(systemClock);
      const stuck = deferred();
      let hang = false;
      let reconciles = 0;
      const store = overriding(inner, {
        reconcile: async () => {
          if (hang) {
            reconciles++;
            await stuck.promise;
          }
          return inner.reconcile();
        },
      });
      const t = defineTask({ name: "through", run: () => "ran" });
      const r = await openRatchet([t], { store, pollIntervalMs: 10, maintenanceIntervalMs: 50 });
      hang = true;
      try {
        await r.start({ concurrency: 2 });
        await until(() => reconciles >= 1, "the worker's maintenance to begin");
        const ids = await r.enqueueMany([{ task: t }, { task: t }, { task: t }]);
        for (const id of ids) expect((await r.waitFor(id, { timeoutMs: 5_000 })).result).toBe("ran");
        // One maintenance at a time: the stuck one is not joined by another.
        expect(reconciles).toBe(1);
      } finally {
        stuck.resolve();
      }
    });

    it("§12.10 a worker started right after open makes its first maintenance pass an interval after the open's reconcile, not again at once", async () => {
      const inner = await createStore(systemClock);
      let reconciles = 0;
      const store = overriding(inner, {
        reconcile: async () => {
          reconciles++;
          return inner.reconcile();
        },
      });
      const t = defineTask({ name: "quick", run: () => "ran" });
      // Longer than this test, and no longer than this process has been up: a pass counted from the
      // process's start (performance.now() = 0) rather than from the open's would be due at once.
      const maintenanceIntervalMs = Math.max(5_000, Math.ceil(performance.now()));
      const r = await openRatchet([t], { store, pollIntervalMs: 10, maintenanceIntervalMs });
      expect(reconciles).toBe(1);
      await r.start({ concurrency: 2 });
      const id = await r.enqueue(t, undefined);
      expect((await r.waitFor(id, { timeoutMs: 5_000 })).result).toBe("ran");
      // stop() waits for a maintenance pass in flight.
      await r.stop();
      expect(reconciles).toBe(1);
    });

    it("§8.1 an idle worker never sleeps past the next due time (nextRunAt), whatever its poll backoff", async () => {
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
      const loc = sharedStoreOptions();
      const t = defineTask({ name: "due", run: () => "ran" });
      // Every instance and its store read the faked Date (on PostgreSQL too, instead of the database clock).
      const clock = { now: () => Date.now() };
      const worker = await openAt(loc, [t], { pollIntervalMs: 600_000, clock });
      const other = await openAt(loc, [t], { clock });
      await worker.start({ concurrency: 1 });
      // Idle for 10 simulated seconds: the poll delay has grown to seconds.
      for (let i = 0; i < 100; i++) await vi.advanceTimersByTimeAsync(100);
      // Another instance (no in-process wake-up) enqueues a task due in 30 s.
      const id = await other.enqueue(t, null, { delayMs: 30_000 });
      const due = (await other.get(id))!.runAfter;
      // Up to just before the due time in 100 ms steps, then in 1 ms steps: claimedAt then shows how late
      // the worker woke even when store calls are real I/O (PostgreSQL) that fake time would outrun.
      let rec = (await other.get(id))!;
      for (let i = 0; i < 1_000 && Date.now() + 100 <= due; i++) {
        await vi.advanceTimersByTimeAsync(100);
        rec = (await other.get(id))!;
      }
      for (let i = 0; i < 5_000 && rec.status !== "terminal"; i++) {
        await vi.advanceTimersByTimeAsync(1);
        await realPause(2);
        rec = (await other.get(id))!;
      }
      expect(rec.outcome).toBe("completed");
      // Claimed within moments of becoming due, not a whole poll interval (seconds by now) later.
      expect(rec.claimedAt! - due).toBeLessThan(200);
      vi.useRealTimers();
    });

    it("§8.1 start() rejects a second worker and a bad concurrency", async () => {
      const t = defineTask({ name: "x", run: () => null });
      const r = await openRatchet([t]);
      await expectCode(() => r.start({ concurrency: 0 }), "RATCHET_CONFIG");
      await expectCode(() => r.start({ concurrency: 1.5 }), "RATCHET_CONFIG");
      await r.start({ concurrency: 1 });
      await expectCode(() => r.start({ concurrency: 1 }), "RATCHET_CONFIG");
    });

    it("§8.3 tick skips (and counts) a task whose maxMs + reserve exceeds the budget that remains, and leaves it pending", async () => {
      const clock = new FakeClock();
      const order: string[] = [];
      const eats = defineTask({
        name: "eats",
        maxMs: 1_000,
        priority: 10,
        run() {
          order.push("eats");
          clock.advance(5_000); // uses half the budget
          return null;
        },
      });
      const big = defineTask({
        name: "big",
        maxMs: 3_000,
        run() {
          order.push("big");
          return null;
        },
      });
      const huge = defineTask({ name: "huge", maxMs: 8_000, run: () => null });
      const r = await openRatchet([eats, big, huge], { clock });
      const a = await r.enqueue(eats);
      const b = await r.enqueue(big);
      const c = await r.enqueue(huge);
      // budget 10 s, reserve 3 s: eats (4 s) and big (6 s) fit at the start, huge (11 s) never does.
      const report = await r.tick({ budgetMs: 10_000, concurrency: 1 });
      expect(order).toEqual(["eats"]);
      expect(report.ran).toBe(1);
      expect(report.skipped).toBe(2);
      expect(report.ms).toBe(5_000);
      expect(report.budgetLeft).toBe(5_000);
      await until(async () => (await r.get(a))!.status === "terminal", "eats to settle");
      expect((await r.get(b))!.status).toBe("pending");
      expect((await r.get(c))!.status).toBe("pending");
    });

    it("§8.3 tick returns {ran, done, failed, retried, skipped, ms, budgetLeft} with every settlement already committed", async () => {
      const clock = new FakeClock();
      const ok = defineTask({ name: "ok", maxMs: 1_000, run: () => 1 });
      const bad = defineTask({
        name: "bad",
        maxMs: 1_000,
        retry: { maxAttempts: 1 },
        run() {
          throw new Error("x");
        },
      });
      const flaky = defineTask({
        name: "flaky",
        maxMs: 1_000,
        retry: { maxAttempts: 2 },
        run() {
          throw new Error("y");
        },
      });
      const r = await openRatchet([ok, bad, flaky], { clock });
      const ids = await r.enqueueMany([
        { task: ok },
        { task: ok },
        { task: ok },
        { task: bad },
        { task: flaky },
      ]);
      const report = await r.tick({ budgetMs: 60_000 });
      expect(report).toEqual({
        ran: 5,
        done: 3,
        failed: 1,
        retried: 1,
        skipped: 0,
        ms: 0,
        budgetLeft: 60_000,
      });
      const statuses = await Promise.all(ids.map(async (id) => (await r.get(id))!.status));
      expect(statuses).toEqual(["terminal", "terminal", "terminal", "terminal", "waiting"]);
    });

    it("§8.3 tick defaults to max 50 tasks", async () => {
      const t = defineTask({ name: "many", maxMs: 1_000, run: () => null });
      const r = await openRatchet([t], { clock: new FakeClock() });
      await r.enqueueMany(Array.from({ length: 60 }, () => ({ task: t })));
      const report = await r.tick({ budgetMs: 60_000 });
      expect(report.ran).toBe(50);
    });

    it("§8.3 tick honours max and defaults to concurrency 6", async () => {
      let active = 0;
      let peak = 0;
      const gate = deferred();
      const t = defineTask({
        name: "conc",
        maxMs: 10_000,
        async run() {
          active++;
          peak = Math.max(peak, active);
          await gate.promise;
          active--;
          return null;
        },
      });
      const r = await openRatchet([t]);
      await r.enqueueMany(Array.from({ length: 12 }, () => ({ task: t })));
      const ticking = r.tick({ budgetMs: 600_000, max: 9 });
      await until(() => active === 6, "six invocations");
      gate.resolve();
      const report = await ticking;
      expect(peak).toBe(6);
      expect(report.ran).toBe(9);
    });

    it("§8.3 a tick with no budget left for the reserve starts nothing", async () => {
      const t = defineTask({ name: "tiny", maxMs: 1, run: () => null });
      const r = await openRatchet([t], { clock: new FakeClock() });
      await r.enqueue(t);
      const report = await r.tick({ budgetMs: 3_000 });
      expect(report.ran).toBe(0);
      expect(report.skipped).toBe(1);
      await expectCode(() => r.tick({ budgetMs: -1 }), "RATCHET_INVALID_INPUT");
    });

    it("§8.4 with tickBudgetMs, a definition that can never fit is rejected at open() and at register() with RATCHET_CONFIG 'can never fit'", async () => {
      const big = defineTask({ name: "big", maxMs: 60_000, run: () => null });
      const fits = defineTask({ name: "fits", maxMs: 57_000, run: () => null });
      const err = await expectCode(
        () => Ratchet.open({ ...storeOptions(), tasks: [big], tickBudgetMs: 62_999, logger: silentLogger }),
        "RATCHET_CONFIG",
      );
      expect(err.message).toContain("can never fit");
      const r = await openRatchet([fits], { tickBudgetMs: 60_000 });
      const e2 = await expectCode(() => r.register(big), "RATCHET_CONFIG");
      expect(e2.message).toContain("can never fit");
      expect(r.definitions().map((d) => d.name)).toEqual(["fits"]);
    });

    it("§8.4 a definition first seen at enqueue is registered, so it is checked against tickBudgetMs too", async () => {
      const big = defineTask({ name: "big", maxMs: 60_000, run: () => null });
      const r = await openRatchet([], { tickBudgetMs: 30_000 });
      await expectCode(() => r.enqueue(big), "RATCHET_CONFIG");
    });

    it("§8.4 a smaller tick only skips a task that the largest tick can run", async () => {
      const t = defineTask({ name: "mid", maxMs: 20_000, run: () => "ran" });
      const r = await openRatchet([t], { tickBudgetMs: 60_000, clock: new FakeClock() });
      const id = await r.enqueue(t);
      const small = await r.tick({ budgetMs: 10_000 });
      expect(small.skipped).toBe(1);
      expect((await r.get(id))!.status).toBe("pending");
      await drain(r);
      expect((await r.get(id))!.outcome).toBe("completed");
    });

    it("§8.5 / §3.2 two workers and a tick sharing one file run every task exactly once", async () => {
      const loc = sharedStoreOptions();
      const runs = new Map<number, number>();
      const t = defineTask({
        name: "once",
        run(ctx: TaskContext) {
          runs.set(ctx.taskId, (runs.get(ctx.taskId) ?? 0) + 1);
          return null;
        },
      });
      const a = await openAt(loc, [t], { pollIntervalMs: 5 });
      const b = await openAt(loc, [t], { pollIntervalMs: 5 });
      const c = await openAt(loc, [t]);
      const ids = await c.enqueueMany(Array.from({ length: 300 }, () => ({ task: t })));
      await a.start({ concurrency: 4 });
      await b.start({ concurrency: 4 });
      await c.tick({ budgetMs: 3_600_000 });
      for (const id of ids) await c.waitFor(id, { timeoutMs: 20_000 });
      expect(runs.size).toBe(300);
      expect([...runs.values()].every((n) => n === 1)).toBe(true);
      const stats = await c.stats();
      expect(stats[0]!.byOutcome).toEqual({ completed: 300 });
    });

    it("§1.3 a worker without a task's definition leaves it live (never terminal); registering it later lets it run", async () => {
      const loc = sharedStoreOptions();
      const t = defineTask({ name: "later", run: () => "finally" });
      const producer = await openAt(loc, [t]);
      const id = await producer.enqueue(t);
      const consumer = await openAt(loc, []);
      const report = await drain(consumer);
      expect(report.ran).toBe(0);
      expect((await consumer.get(id))!.status).toBe("pending");
      // An unregistered name is not claimed either.
      producer.unregister("later");
      expect((await drain(producer)).ran).toBe(0);
      expect((await producer.get(id))!.status).toBe("pending");
      consumer.register(t);
      await drain(consumer);
      expect((await consumer.get(id))!.result).toBe("finally");
    });

    it("§8.1 a worker serves only the queues it was started with", async () => {
      const t = defineTask({ name: "q", run: () => null });
      const r = await openRatchet([t], { pollIntervalMs: 5 });
      const inA = await r.enqueue(t, null, { queue: "a" });
      const inB = await r.enqueue(t, null, { queue: "b" });
      await r.start({ concurrency: 2, queues: ["a"] });
      await r.waitFor(inA, { timeoutMs: 10_000 });
      await r.stop();
      expect((await r.get(inB))!.status).toBe("pending");
      onCleanup(() => r.close());
    });
  });
});

describe("a claim of a task the worker still runs (spec §8.10, §13.8)", () => {
  it("§8.10 / §13.8 ends the old invocation as a lost lease, runs the new claim, and counts the old one's slot until its code returns", async () => {
    const releaseOld = deferred();
    const releaseNew = deferred();
    const started: string[] = [];
    const signals: AbortSignal[] = [];
    const held = defineTask({
      name: "held",
      run: async (ctx) => {
        signals.push(ctx.signal);
        const n = signals.length;
        started.push(`held${n}`);
        await (n === 1 ? releaseOld.promise : releaseNew.promise);
        return n;
      },
    });
    const other = defineTask({
      name: "other",
      run: () => {
        started.push("other");
        return "done";
      },
    });
    const r = await openRatchet([held, other], { store: `sqlite:${tempDbPath()}`, pollIntervalMs: 5 });
    const db = (r.store as SqliteStore).db;
    const id = await r.enqueue(held);
    const cols = "status, epoch, attempts, lease_until, locked_by, started_at, claimed_at";
    const before = db.prepare(`SELECT ${cols} FROM ratchet_tasks WHERE id = ?`).get(id) as Record<
      string,
      unknown
    >;
    await r.start({ concurrency: 2 });
    await until(() => started.length === 1);
    // The claim as if it never committed (a claim lost in a crash, §13.8): the worker claims the task again.
    db.prepare(`UPDATE ratchet_tasks SET (${cols}) = (?, ?, ?, ?, ?, ?, ?) WHERE id = ?`).run(
      ...Object.values(before),
      id,
    );
    await until(() => started.length === 2);
    expect(started).toEqual(["held1", "held2"]);
    await aborted(signals[0]!);
    expect((signals[0]!.reason as RatchetError).code).toBe("RATCHET_LEASE_LOST");
    expect(signals[1]!.aborted).toBe(false);
    // The old code still runs: with the new invocation, both slots are taken and nothing else starts.
    const otherId = await r.enqueue(other);
    await new Promise((res) => setTimeout(res, 200));
    expect(started).toEqual(["held1", "held2"]);
    releaseOld.resolve();
    await r.waitFor(otherId, { timeoutMs: 10_000 });
    releaseNew.resolve();
    await r.waitFor(id, { timeoutMs: 10_000 });
    expect((await r.get(id))!.result).toBe(2);
    await r.stop();
  });
});
