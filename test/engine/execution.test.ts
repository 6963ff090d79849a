import { describe, expect, it } from "vitest";
import type { TaskContext } from "../../src/engine/context.js";
import { defineTask, type Logger, NonRetryableError, type RatchetError } from "../../src/index.js";
import {
  aborted,
  claimReq,
  deferred,
  drain,
  FakeClock,
  forEachBackend,
  openRatchet,
  sharedStoreOptions,
  until,
  untilStatus,
} from "./helpers.js";

const fixedRetry = { maxAttempts: 3, baseMs: 1_000, floorMs: 1_000, capMs: 1_000 };

forEachBackend(() => {
  describe("execution (spec §4)", () => {
    it("§4.2 a step's committed result is returned on the rerun without calling its body again", async () => {
      const clock = new FakeClock();
      let bodies = 0;
      const seen: unknown[] = [];
      const t = defineTask({
        name: "memo",
        retry: fixedRetry,
        async run(ctx: TaskContext) {
          const v = await ctx.step("one", () => {
            bodies++;
            return { n: 41 };
          });
          seen.push(v);
          if (ctx.attempt === 1) throw new Error("crash after step one");
          return v.n + 1;
        },
      });
      const r = await openRatchet([t], { clock });
      const id = await r.enqueue(t);
      await drain(r);
      expect((await r.get(id))!.status).toBe("waiting");
      clock.advance(1_000);
      await drain(r);
      const rec = (await r.get(id))!;
      expect(rec.outcome).toBe("completed");
      expect(rec.result).toBe(42);
      expect(bodies).toBe(1);
      expect(seen).toEqual([{ n: 41 }, { n: 41 }]);
      const steps = await r.store.steps(id);
      expect(steps).toHaveLength(1);
      expect(steps[0]).toMatchObject({ name: "one", result: { n: 41 }, attempt: 1 });
    });

    it("§4.2 / §8.2 a task given back by a shutdown after committing a step replays that step when claimed again, though the give-back did not count the attempt", async () => {
      const loc = sharedStoreOptions();
      let bodies = 0;
      const committed = deferred();
      const gate = deferred();
      const first = defineTask({
        name: "memo",
        async run(ctx: TaskContext) {
          await ctx.step("one", () => ++bodies);
          committed.resolve();
          await gate.promise; // outlives the shutdown timeout
          return "from the first instance";
        },
      });
      const r1 = await openRatchet([first], loc);
      const id = await r1.enqueue(first);
      await r1.start({ concurrency: 1, shutdownTimeoutMs: 50 });
      await committed.promise;
      await r1.stop();
      expect((await r1.get(id))!).toMatchObject({ status: "pending", attempts: 0 });

      const second = defineTask({
        name: "memo",
        async run(ctx: TaskContext) {
          return ctx.step("one", () => ++bodies);
        },
      });
      const r2 = await openRatchet([second], loc);
      await drain(r2);
      const rec = await r2.waitFor(id, { timeoutMs: 10_000 });
      expect(rec.result).toBe(1);
      expect(rec.attempts).toBe(1);
      expect(bodies).toBe(1);
      gate.resolve();
    });

    it("§4.2 a step that returns undefined commits null and replays null", async () => {
      const clock = new FakeClock();
      const seen: unknown[] = [];
      const t = defineTask({
        name: "undef",
        retry: fixedRetry,
        async run(ctx: TaskContext) {
          seen.push(await ctx.step("u", () => undefined));
          if (ctx.attempt === 1) throw new Error("again");
          return "ok";
        },
      });
      const r = await openRatchet([t], { clock });
      const id = await r.enqueue(t);
      await drain(r);
      clock.advance(1_000);
      await drain(r);
      expect((await r.get(id))!.outcome).toBe("completed");
      expect(seen).toEqual([null, null]);
    });

    it("§4.3 using the same step name twice fails the task with RATCHET_DUPLICATE_STEP, without retry", async () => {
      const t = defineTask({
        name: "dup",
        async run(ctx: TaskContext) {
          await ctx.step("same", () => 1);
          await ctx.step("same", () => 2);
          return "unreachable";
        },
      });
      const loop = defineTask({
        name: "loop",
        async run(ctx: TaskContext) {
          let sum = 0;
          for (let i = 0; i < 5; i++) sum += await ctx.step(`item:${i}`, () => i);
          return sum;
        },
      });
      const r = await openRatchet([t, loop]);
      const id = await r.enqueue(t);
      const ok = await r.enqueue(loop);
      await drain(r);
      const rec = (await r.get(id))!;
      expect(rec.outcome).toBe("failed");
      expect(rec.error!.code).toBe("RATCHET_DUPLICATE_STEP");
      expect(rec.attempts).toBe(1);
      expect((await r.get(ok))!.result).toBe(10);
    });

    it("§4.4 ctx.sleep moves the task to waiting (no slot held), resumes after the time, replays steps, and does not consume attempts", async () => {
      const clock = new FakeClock();
      const bodies: string[] = [];
      let runs = 0;
      const t = defineTask({
        name: "sleeper",
        retry: { maxAttempts: 1 },
        async run(ctx: TaskContext) {
          runs++;
          const a = await ctx.step("a", () => {
            bodies.push("a");
            return 1;
          });
          await ctx.sleep("nap1", 60_000);
          const b = await ctx.step("b", () => {
            bodies.push("b");
            return 2;
          });
          await ctx.sleep("nap2", 30_000);
          return a + b;
        },
      });
      const other = defineTask({ name: "other", run: () => "x" });
      const r = await openRatchet([t, other], { clock, pollIntervalMs: 10 });
      const t0 = clock.now();
      const id = await r.enqueue(t);
      // A long-lived worker with a single slot.
      await r.start({ concurrency: 1 });
      let rec = await untilStatus(r, id, "waiting");
      expect(rec.wakeAt).toBe(t0 + 60_000);
      expect(rec.leaseUntil).toBeNull();
      expect(rec.attempts).toBe(0);
      // The slot is free: another task runs while this one sleeps.
      const o = await r.enqueue(other);
      expect((await r.waitFor(o, { timeoutMs: 10_000 })).outcome).toBe("completed");
      expect((await r.get(id))!.status).toBe("waiting");
      expect(runs).toBe(1);
      clock.advance(60_000);
      rec = await until(async () => {
        const x = (await r.get(id))!;
        return x.status === "waiting" && x.wakeAt === t0 + 90_000 ? x : null;
      }, "the second sleep");
      clock.advance(30_000);
      rec = await r.waitFor(id, { timeoutMs: 10_000 });
      expect(rec.outcome).toBe("completed");
      expect(rec.result).toBe(3);
      expect(bodies).toEqual(["a", "b"]);
      expect(runs).toBe(3);
      // maxAttempts 1 and three runs: sleeping is not an attempt.
      expect(rec.attempts).toBe(1);
    });

    it("§4.4 a sleep whose time has already passed is not slept again; a crash during a sleep does not restart its clock", async () => {
      const clock = new FakeClock();
      let runs = 0;
      const t = defineTask({
        name: "sleep-crash",
        retry: fixedRetry,
        async run(ctx: TaskContext) {
          runs++;
          await ctx.sleep("nap", 10_000);
          if (runs === 2) throw new Error("crash right after waking");
          return runs;
        },
      });
      const r = await openRatchet([t], { clock });
      const id = await r.enqueue(t);
      await drain(r); // run 1: suspends
      clock.advance(10_000);
      await drain(r); // run 2: wakes, throws -> retry in 1 s
      expect((await r.get(id))!.status).toBe("waiting");
      clock.advance(1_000);
      await drain(r); // run 3: the sleep is over, not slept again
      const rec = (await r.get(id))!;
      expect(rec.outcome).toBe("completed");
      expect(rec.result).toBe(3);
      const nap = (await r.store.steps(id)).find((s) => s.name === "nap")!;
      expect(nap.result).toEqual({ until: Date.UTC(2026, 0, 1) + 10_000 });
    });

    it("§4.1 at maxMs the signal aborts with a timeout reason and the attempt is settled as a failure (retry)", async () => {
      const clock = new FakeClock();
      let reason: unknown;
      let lateWrite: unknown;
      const gate = deferred();
      const t = defineTask({
        name: "slow",
        maxMs: 50,
        retry: fixedRetry,
        async run(ctx: TaskContext) {
          if (ctx.attempt > 1) return "second";
          reason = await aborted(ctx.signal);
          await gate.promise;
          // A handler that outlives its deadline can commit nothing.
          try {
            await ctx.step("late", () => 1);
          } catch (e) {
            lateWrite = e;
          }
          return "too late";
        },
      });
      const r = await openRatchet([t], { clock });
      const id = await r.enqueue(t);
      const ticking = r.tick({ budgetMs: 3_600_000 });
      const rec = await until(async () => {
        const x = (await r.get(id))!;
        return x.status === "waiting" ? x : null;
      }, "the timed-out attempt to be settled as a retry while the handler still runs");
      expect((reason as RatchetError).code).toBe("RATCHET_TIMEOUT");
      expect(rec.error!.code).toBe("RATCHET_TIMEOUT");
      expect(rec.attempts).toBe(1);
      gate.resolve();
      await ticking;
      expect((lateWrite as RatchetError).code).toBe("RATCHET_LEASE_LOST");
      expect(await r.store.steps(id)).toEqual([]);
      expect((await r.get(id))!.status).toBe("waiting");
      clock.advance(1_000);
      await drain(r);
      expect((await r.get(id))!.result).toBe("second");
    });

    it("§4.1 a timeout on the last attempt fails the task", async () => {
      const t = defineTask({
        name: "hang",
        maxMs: 20,
        retry: { maxAttempts: 1 },
        run: (ctx: TaskContext) => aborted(ctx.signal),
      });
      const r = await openRatchet([t]);
      const id = await r.enqueue(t);
      await drain(r);
      const rec = await r.waitFor(id, { timeoutMs: 10_000 });
      expect(rec.outcome).toBe("failed");
      expect(rec.error!.code).toBe("RATCHET_TIMEOUT");
    });

    it("§3.8 ctx.heartbeat extends the lease to now + maxMs + grace and the deadline to now + maxMs", async () => {
      const clock = new FakeClock();
      const seen: { lease: number | null; deadline: number; now: number }[] = [];
      let r!: Awaited<ReturnType<typeof openRatchet>>;
      const t = defineTask({
        name: "beat",
        maxMs: 60_000,
        async run(ctx: TaskContext) {
          const first = ctx.deadline;
          clock.advance(45_000);
          await ctx.heartbeat();
          seen.push({
            lease: (await r.get(ctx.taskId))!.leaseUntil,
            deadline: ctx.deadline,
            now: clock.now(),
          });
          return first;
        },
      });
      r = await openRatchet([t], { clock, leaseGraceMs: 5_000 });
      const start = clock.now();
      const id = await r.enqueue(t);
      await drain(r);
      expect((await r.get(id))!.result).toBe(start + 60_000);
      expect(seen).toEqual([
        { lease: start + 45_000 + 65_000, deadline: start + 45_000 + 60_000, now: start + 45_000 },
      ]);
    });

    it("§3.8 heartbeats keep a long invocation alive past maxMs", async () => {
      const t = defineTask({
        name: "long",
        maxMs: 400,
        retry: { maxAttempts: 1 },
        async run(ctx: TaskContext) {
          for (let i = 0; i < 6; i++) {
            await new Promise((res) => setTimeout(res, 100)); // simulated work, 600 ms in total
            await ctx.heartbeat();
          }
          return "alive";
        },
      });
      const r = await openRatchet([t]);
      const id = await r.enqueue(t);
      await drain(r);
      const rec = await r.waitFor(id, { timeoutMs: 10_000 });
      expect(rec.outcome).toBe("completed");
    });

    it("§3.7 when another worker takes the task over, the holder's next write throws LeaseLostError and ctx.signal aborts", async () => {
      const clock = new FakeClock();
      let r!: Awaited<ReturnType<typeof openRatchet>>;
      const seen: { code?: string; abortedBefore?: boolean; abortedAfter?: boolean } = {};
      const t = defineTask({
        name: "victim",
        maxMs: 1_000,
        async run(ctx: TaskContext) {
          clock.advance(1_000 + 10_000);
          const stolen = await r.store.claim(claimReq({ workerId: "thief", names: ["victim"] }));
          expect(stolen).toHaveLength(1);
          seen.abortedBefore = ctx.signal.aborted;
          try {
            await ctx.step("s", () => 1);
          } catch (e) {
            seen.code = (e as RatchetError).code;
          }
          seen.abortedAfter = ctx.signal.aborted;
          return "mine";
        },
      });
      r = await openRatchet([t], { clock });
      const id = await r.enqueue(t);
      // One slot: the tick itself must not reclaim the expired lease before the thief does.
      await r.tick({ budgetMs: 3_600_000, concurrency: 1 });
      expect(seen).toEqual({ code: "RATCHET_LEASE_LOST", abortedBefore: false, abortedAfter: true });
      const rec = (await r.get(id))!;
      expect(rec.status).toBe("running");
      expect(rec.lockedBy).toBe("thief");
      expect(rec.epoch).toBe(2);
      expect(rec.result).toBeNull();
      expect(await r.store.steps(id)).toEqual([]);
    });

    it("§4.6 / §5.5 a task result that cannot be stored makes the outcome faulted, without retry", async () => {
      const t = defineTask({ name: "date", run: () => ({ at: new Date() }) });
      const big = defineTask({ name: "big", run: () => "z".repeat(500) });
      const r = await openRatchet([t, big], { maxResultBytes: 100 });
      const a = await r.enqueue(t);
      const b = await r.enqueue(big);
      await drain(r);
      const ra = (await r.get(a))!;
      expect(ra.outcome).toBe("faulted");
      expect(ra.error!.code).toBe("RATCHET_INVALID_JSON");
      expect(ra.error!.message).toContain(".at");
      expect(ra.attempts).toBe(1);
      const rb = (await r.get(b))!;
      expect(rb.outcome).toBe("faulted");
      expect(rb.error!.code).toBe("RATCHET_PAYLOAD_TOO_LARGE");
    });

    it("§4.6 a top-level undefined task result is stored as null", async () => {
      const t = defineTask({ name: "void", run: () => undefined });
      const r = await openRatchet([t]);
      const id = await r.enqueue(t);
      await drain(r);
      const rec = (await r.get(id))!;
      expect(rec.outcome).toBe("completed");
      expect(rec.result).toBeNull();
    });

    it("§4.6 a step result that cannot be stored throws into the task's code and commits nothing", async () => {
      const t = defineTask({
        name: "badstep",
        async run(ctx: TaskContext) {
          const codes: string[] = [];
          for (const [i, bad] of [Number.NaN, new Map(), { u: undefined }, "x".repeat(200)].entries()) {
            try {
              await ctx.step(`s${i}`, () => bad);
            } catch (e) {
              codes.push((e as RatchetError).code);
            }
          }
          return codes;
        },
      });
      const r = await openRatchet([t], { maxResultBytes: 100 });
      const id = await r.enqueue(t);
      await drain(r);
      const rec = (await r.get(id))!;
      expect(rec.outcome).toBe("completed");
      expect(rec.result).toEqual([
        "RATCHET_INVALID_JSON",
        "RATCHET_INVALID_JSON",
        "RATCHET_INVALID_JSON",
        "RATCHET_PAYLOAD_TOO_LARGE",
      ]);
      expect(await r.store.steps(id)).toEqual([]);
    });

    it("§4.7 a stored error keeps name, message, stack and code, bounded to 4,000 / 16,000 characters", async () => {
      const t = defineTask({
        name: "loud",
        retry: { maxAttempts: 1 },
        run() {
          const e = new RangeError("m".repeat(100_000));
          (e as { code?: string }).code = "E_LOUD";
          e.stack = `RangeError: ${"s".repeat(100_000)}`;
          throw e;
        },
      });
      const r = await openRatchet([t]);
      const id = await r.enqueue(t);
      await drain(r);
      const rec = (await r.get(id))!;
      expect(rec.outcome).toBe("failed");
      expect(rec.error!.name).toBe("RangeError");
      expect(rec.error!.code).toBe("E_LOUD");
      expect(rec.error!.message.length).toBeLessThanOrEqual(4_000);
      expect(rec.error!.message.length).toBeGreaterThan(3_000);
      expect(rec.error!.stack!.length).toBeLessThanOrEqual(16_000);
      expect(rec.error!.stack!.length).toBeGreaterThan(15_000);
    });

    it("§4.8 ctx.progress stores the fraction and note (fenced); out-of-range fractions throw into code", async () => {
      let r!: Awaited<ReturnType<typeof openRatchet>>;
      const mid: unknown[] = [];
      const t = defineTask({
        name: "prog",
        async run(ctx: TaskContext) {
          await ctx.progress(0.25, "a quarter");
          const rec = (await r.get(ctx.taskId))!;
          mid.push([rec.progress, rec.progressNote]);
          const errors: string[] = [];
          for (const bad of [1.5, -0.1, Number.NaN]) {
            try {
              await ctx.progress(bad);
            } catch (e) {
              errors.push((e as RatchetError).code);
            }
          }
          await ctx.progress(1);
          return errors;
        },
      });
      r = await openRatchet([t]);
      const id = await r.enqueue(t);
      await drain(r);
      const rec = (await r.get(id))!;
      expect(mid).toEqual([[0.25, "a quarter"]]);
      expect(rec.result).toEqual(["RATCHET_INVALID_INPUT", "RATCHET_INVALID_INPUT", "RATCHET_INVALID_INPUT"]);
      expect(rec.progress).toBe(1);
      expect(rec.progressNote).toBeNull();
    });

    it("§4.8 ctx.log stays in the process: it reaches the logger and writes nothing to the store", async () => {
      const lines: string[] = [];
      const logger: Logger = { info: (m) => lines.push(m), warn() {}, error() {} };
      const clock = new FakeClock();
      let r!: Awaited<ReturnType<typeof openRatchet>>;
      const snapshots: unknown[] = [];
      const snapshot = async (id: number) => [
        await r.get(id),
        await r.store.steps(id),
        await r.store.events(id),
      ];
      const t = defineTask({
        name: "chatty",
        async run(ctx: TaskContext) {
          snapshots.push(await snapshot(ctx.taskId));
          clock.advance(1); // any write from here on would move updated_at
          for (let i = 0; i < 10; i++) ctx.log("hello", { i });
          snapshots.push(await snapshot(ctx.taskId));
          return null;
        },
      });
      r = await openRatchet([t], { logger, clock });
      await r.enqueue(t);
      await drain(r);
      expect(snapshots).toHaveLength(2);
      expect(snapshots[1]).toEqual(snapshots[0]);
      expect(lines.filter((l) => l.includes("hello"))).toHaveLength(10);
    });

    it("§4 ctx exposes the task id, name, queue, job and attempt counted at claim", async () => {
      const seen: unknown[] = [];
      const t = defineTask({
        name: "who",
        queue: "q1",
        run(ctx: TaskContext) {
          seen.push({ id: ctx.taskId, name: ctx.name, queue: ctx.queue, job: ctx.job, attempt: ctx.attempt });
          return null;
        },
      });
      const r = await openRatchet([t]);
      const [id] = await r.enqueueJob("jobby", [{ task: t }]);
      await r.tick({ budgetMs: 3_600_000, queues: ["q1"] });
      await r.waitFor(id!, { timeoutMs: 10_000 });
      expect(seen).toEqual([{ id, name: "who", queue: "q1", job: "jobby", attempt: 1 }]);
    });

    it("§8.1 code that returns or throws at once, without a promise, frees its slot: one slot runs every such task in turn", async () => {
      const order: number[] = [];
      const sync = defineTask({
        name: "sync",
        retry: { maxAttempts: 1 },
        run(_ctx: TaskContext, input: { i: number }) {
          order.push(input.i);
          if (input.i % 2 === 1) throw new Error(`odd ${input.i}`);
          return input.i;
        },
      });
      const r = await openRatchet([sync], { pollIntervalMs: 10 });
      const ids = await r.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ task: sync, input: { i } })));
      await r.start({ concurrency: 1, prefetch: 4 });
      const recs = await Promise.all(ids.map((id) => r.waitFor(id, { timeoutMs: 10_000 })));
      expect(recs.map((x) => x.outcome)).toEqual([
        "completed",
        "failed",
        "completed",
        "failed",
        "completed",
        "failed",
      ]);
      expect(order).toEqual([0, 1, 2, 3, 4, 5]);
      expect(r.workerCounters().reports).toMatchObject({ done: 3, failed: 3 });
    });

    it("§5.5 an error thrown by task code ends failed, never faulted", async () => {
      const t = defineTask({
        name: "thrower",
        retry: { maxAttempts: 1 },
        run() {
          throw new TypeError("oops");
        },
      });
      const nr = defineTask({
        name: "nr",
        run() {
          throw new NonRetryableError("permanent");
        },
      });
      const r = await openRatchet([t, nr]);
      const a = await r.enqueue(t);
      const b = await r.enqueue(nr);
      await drain(r);
      expect((await r.get(a))!.outcome).toBe("failed");
      expect((await r.get(b))!.outcome).toBe("failed");
      expect((await r.get(b))!.error!.code).toBe("RATCHET_NON_RETRYABLE");
    });
  });
});
