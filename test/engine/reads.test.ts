import { describe, expect, it } from "vitest";
import { defineTask, NonRetryableError, Ratchet } from "../../src/index.js";
import {
  claimReq,
  drain,
  expectCode,
  FakeClock,
  forEachBackend,
  openRatchet,
  silentLogger,
  storeOptions,
} from "./helpers.js";

const noop = defineTask({ name: "noop", maxMs: 1_000, run: () => "ok" });
const other = defineTask({ name: "other", maxMs: 1_000, queue: "side", run: () => "ok" });
const boom = defineTask({
  name: "boom",
  maxMs: 1_000,
  run() {
    throw new NonRetryableError("no");
  },
});

forEachBackend(() => {
  describe("reads (spec §9)", () => {
    it("§9.1 get returns one task, or null for an unknown id; a bad id is RATCHET_INVALID_INPUT", async () => {
      const r = await openRatchet([noop]);
      const id = await r.enqueue(noop, { a: 1 });
      expect(await r.get(id)).toMatchObject({ id, name: "noop", input: { a: 1 }, status: "pending" });
      expect(await r.get(id + 100)).toBeNull();
      await expectCode(() => r.get(0), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.get(1.5), "RATCHET_INVALID_INPUT");
    });

    it("§9.1 list filters by status, outcome, queue, job and name", async () => {
      const r = await openRatchet([noop, other, boom], { clock: new FakeClock() });
      const [j1, j2] = await r.enqueueJob("J", [{ task: noop }, { task: boom }]);
      const s = await r.enqueue(other);
      const w = await r.enqueue(noop, null, { delayMs: 60_000 });
      await drain(r);
      const ids = (xs: { id: number }[]) => xs.map((x) => x.id);
      expect(ids(await r.list({ job: "J" }))).toEqual([j2, j1]);
      expect(ids(await r.list({ queue: "side" }))).toEqual([s]);
      expect(ids(await r.list({ name: "boom" }))).toEqual([j2]);
      expect(ids(await r.list({ status: "waiting" }))).toEqual([w]);
      expect(ids(await r.list({ outcome: "failed" }))).toEqual([j2]);
      expect(ids(await r.list({ status: "terminal", queue: "default" }))).toEqual([j2, j1]);
      expect(await r.list({ job: "none" })).toEqual([]);
    });

    it("§9.6 read filters are validated before the store: the same RATCHET_INVALID_INPUT on every store", async () => {
      const r = await openRatchet([noop]);
      await r.enqueueJob("J", [{ task: noop, queue: "q" }]);
      const bad: object[] = [
        { queue: "a\u0000b" },
        { name: "a\u0000b" },
        { job: "a\u0000b" },
        { queue: "" },
        { job: "x".repeat(201) },
        { name: " padded " },
        { queue: 7 },
        { status: "done" },
        { outcome: "succeeded" },
        { before: 0 },
        { before: "5" },
        { limit: 0 },
        { limit: 1001 },
        { qeue: "q" },
      ];
      for (const f of bad) {
        const err = await expectCode(() => r.list(f as never), "RATCHET_INVALID_INPUT");
        expect(err.message, JSON.stringify(f)).toMatch(/list/);
      }
      await expectCode(() => r.jobStatus("a\u0000b"), "RATCHET_INVALID_INPUT");
      // Good filters still read, undefined fields are no filter.
      expect(await r.list({ queue: "q", job: "J", name: "noop", status: undefined })).toHaveLength(1);
      expect(await r.list({ queue: "other" })).toEqual([]);
    });

    it("§9.1 list pages newest first with a `before` cursor, limit at most 1000", async () => {
      const r = await openRatchet([noop]);
      const ids = await r.enqueueMany(Array.from({ length: 7 }, () => ({ task: noop })));
      const desc = [...ids].reverse();
      const seen: number[] = [];
      let before: number | undefined;
      for (;;) {
        const page = await r.list({ limit: 3, ...(before === undefined ? {} : { before }) });
        if (page.length === 0) break;
        seen.push(...page.map((t) => t.id));
        before = page[page.length - 1]!.id;
      }
      expect(seen).toEqual(desc);
      expect(await r.list({ limit: 1000 })).toHaveLength(7);
      await expectCode(() => r.list({ limit: 1001 }), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.list({ limit: 0 }), "RATCHET_INVALID_INPUT");
    });

    it("§9.1 details returns the task with its needs, steps and events; unknown is RATCHET_NOT_FOUND", async () => {
      const r = await openRatchet([noop]);
      const [a, b] = await r.enqueueMany([{ task: noop }, { task: noop, needs: [-1] }]);
      const d = await r.details(b!);
      expect(d.task.id).toBe(b);
      expect(d.needs).toEqual([a]);
      expect(d.steps).toEqual([]);
      expect(d.events).toEqual([]);
      await expectCode(() => r.details(9_999), "RATCHET_NOT_FOUND");
    });

    it("§9.1 jobStatus counts per status and outcome, total, and settled only when nothing is live", async () => {
      const r = await openRatchet([noop, boom]);
      await r.enqueueJob("J", [{ task: noop }, { task: noop, delayMs: 60_000 }, { task: boom }]);
      await drain(r);
      expect(await r.jobStatus("J")).toEqual({
        job: "J",
        total: 3,
        byStatus: { terminal: 2, waiting: 1 },
        byOutcome: { completed: 1, failed: 1 },
        settled: false,
      });
      expect(await r.jobStatus("unknown-job")).toMatchObject({ total: 0 });
      await expectCode(() => r.jobStatus(""), "RATCHET_INVALID_INPUT");
    });

    it("§9.2 stats returns task counts by queue, status and outcome", async () => {
      const r = await openRatchet([noop, other, boom]);
      await r.enqueue(noop);
      await r.enqueue(boom);
      await r.enqueue(noop, null, { delayMs: 60_000 });
      await r.enqueue(other);
      await r.enqueue(other);
      await r.tick({ budgetMs: 3_600_000, queues: ["default"] });
      await drain(r);
      const stats = await r.stats();
      const byQueue = Object.fromEntries(stats.map((q) => [q.queue, q]));
      expect(byQueue.default).toEqual({
        queue: "default",
        byStatus: { terminal: 2, waiting: 1 },
        byOutcome: { completed: 1, failed: 1 },
      });
      expect(byQueue.side!.byOutcome).toEqual({ completed: 2 });
    });

    it("§9.3 nextRunAt: null when nothing is due, now when something is pending, else the earliest timer or lease", async () => {
      const clock = new FakeClock();
      const r = await openRatchet([noop], { clock, leaseGraceMs: 1_000 });
      expect(await r.nextRunAt()).toBeNull();
      const t0 = clock.now();
      const later = await r.enqueue(noop, null, { delayMs: 50_000 });
      // Needs-blocked waiting tasks have no timer and do not count.
      await r.enqueue(noop, null, { needs: [later] });
      expect(await r.nextRunAt()).toBe(t0 + 50_000);
      await r.enqueue(noop, null, { delayMs: 20_000 });
      expect(await r.nextRunAt()).toBe(t0 + 20_000);
      const now = await r.enqueue(noop);
      expect(await r.nextRunAt()).toBe(clock.now());
      // A running task's lease counts (a dead holder's task becomes ready when it expires).
      await r.store.claim(claimReq({ names: ["noop"], leaseGraceMs: 1_000 }));
      expect((await r.get(now))!.status).toBe("running");
      expect(await r.nextRunAt()).toBe(t0 + 1_000 + 1_000);
      clock.advance(5_000);
      expect(await r.nextRunAt()).toBe(t0 + 2_000);
    });

    it("§9.4 waitFor resolves with the task once terminal; on timeout it throws RATCHET_TIMEOUT and leaves the task unchanged", async () => {
      const r = await openRatchet([noop]);
      const pending = await r.enqueue(noop, null, { delayMs: 3_600_000 });
      const before = await r.get(pending);
      await expectCode(() => r.waitFor(pending, { timeoutMs: 30 }), "RATCHET_TIMEOUT");
      expect(await r.get(pending)).toEqual(before);
      await expectCode(() => r.waitFor(123_456, { timeoutMs: 30 }), "RATCHET_NOT_FOUND");
      const id = await r.enqueue(noop);
      const waiting = r.waitFor(id, { timeoutMs: 10_000 });
      await drain(r);
      expect((await waiting).outcome).toBe("completed");
      // Already terminal: resolves at once.
      expect((await r.waitFor(id, { timeoutMs: 0 })).outcome).toBe("completed");
    });

    it("§9 a closed instance throws RATCHET_CLOSED from every call; close is idempotent", async () => {
      const r = await Ratchet.open({ ...storeOptions(), tasks: [noop], logger: silentLogger });
      const id = await r.enqueue(noop);
      await r.close();
      await r.close();
      const calls: (() => unknown)[] = [
        () => r.enqueue(noop),
        () => r.enqueueMany([{ task: noop }]),
        () => r.get(id),
        () => r.list(),
        () => r.stats(),
        () => r.jobStatus("j"),
        () => r.nextRunAt(),
        () => r.waitFor(id, { timeoutMs: 10 }),
        () => r.abort(id),
        () => r.retry(id),
        () => r.details(id),
        () => r.tick({ budgetMs: 1_000 }),
        () => r.start(),
      ];
      for (const c of calls) await expectCode(c, "RATCHET_CLOSED");
    });
  });
});
