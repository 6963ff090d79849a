/** explain(id) (spec §14.5): one test per kind of reason, on both backends. */
import { describe, expect, it } from "vitest";
import type { TaskContext } from "../../src/engine/context.js";
import { defineTask, type Ratchet, RateLimitedError } from "../../src/index.js";
import { drain, expectCode, FakeClock, forEachBackend, newTask, openRatchet, unlimited } from "./helpers.js";

const kind = async (r: Ratchet, id: number) => (await r.explain(id)).reason;

forEachBackend(() => {
  describe("explain (spec §14.5)", () => {
    it("§14.5 queued, not due, needs, ended, no definition, too old", async () => {
      const clock = new FakeClock(1_000_000);
      const noop = defineTask({ name: "noop", run: () => 1 });
      const r = await openRatchet([noop], { clock });
      const [a, b, c] = await r.enqueueMany([{ task: noop }, { task: noop }, { task: noop, priority: 10 }]);
      expect(await kind(r, c!)).toEqual({ kind: "queued", ahead: 0, abortHandler: false, migrates: false });
      expect(await kind(r, b!)).toEqual({ kind: "queued", ahead: 2, abortHandler: false, migrates: false });
      const e = await r.explain(b!);
      expect(e.text).toBe('due; 2 tasks of queue "default" claim first (priority, then age)');
      const later = await r.enqueue(noop, null, { delayMs: 60_000 });
      expect(await kind(r, later)).toEqual({ kind: "not_due", until: 1_060_000 });
      const dep = await r.enqueue(noop, null, { needs: [later] });
      expect(await kind(r, dep)).toEqual({ kind: "needs", ids: [later], count: 1 });
      await drain(r);
      expect(await kind(r, a!)).toMatchObject({ kind: "ended", outcome: "completed" });
      const [ghost] = await r.store.enqueue([newTask({ name: "ghost" })], unlimited);
      expect(await kind(r, ghost!.id)).toEqual({ kind: "no_definition" });
      const [tooNew] = await r.store.enqueue([newTask({ name: "noop", version: 5 })], unlimited);
      expect(await kind(r, tooNew!.id)).toEqual({ kind: "blocked", reason: "too_old" });
      await drain(r);
      expect(await kind(r, tooNew!.id)).toMatchObject({ kind: "blocked", reason: "too_old" });
      await expectCode(() => r.explain(987_654), "RATCHET_NOT_FOUND");
    });

    it("§14.5 backoff: a failed attempt waiting for its retry says so, with the error and the time", async () => {
      const clock = new FakeClock(1_000_000);
      const flaky = defineTask({
        name: "flaky",
        retry: { maxAttempts: 3, baseMs: 10_000, floorMs: 10_000, capMs: 10_000 },
        run: () => {
          throw new Error("upstream said no");
        },
      });
      const r = await openRatchet([flaky], { clock });
      const id = await r.enqueue(flaky, null);
      await drain(r);
      const e = await r.explain(id);
      expect(e.reason).toMatchObject({
        kind: "backoff",
        until: 1_010_000,
        rateLimited: false,
        error: { message: "upstream said no" },
      });
      expect(e.text).toBe(
        `backoff until ${new Date(1_010_000).toISOString()}: its retry policy runs it again after a failed attempt (Error: upstream said no)`,
      );
    });

    it("§14.5 sleeping: a task in its own ctx.sleep is sleeping, not backing off, even after a failed attempt", async () => {
      const clock = new FakeClock(1_000_000);
      const napper = defineTask({
        name: "napper",
        retry: { maxAttempts: 3, baseMs: 10_000, floorMs: 10_000, capMs: 10_000 },
        async run(ctx: TaskContext) {
          if (ctx.attempt === 1) throw new Error("first try fails");
          await ctx.sleep("nap", 60_000);
          return "rested";
        },
      });
      const plain = defineTask({ name: "plain", run: (ctx: TaskContext) => ctx.sleep("doze", 5_000) });
      const r = await openRatchet([napper, plain], { clock });
      const id = await r.enqueue(napper, null);
      const calm = await r.enqueue(plain, null);
      await drain(r);
      // The retry policy's timer: a backoff, with the error.
      expect(await kind(r, id)).toMatchObject({ kind: "backoff", until: 1_010_000, rateLimited: false });
      // A sleep with no failure before it was called "not due" before; it is a sleep.
      expect(await kind(r, calm)).toEqual({
        kind: "sleeping",
        step: "doze",
        until: 1_005_000,
        abortHandler: false,
      });
      clock.advance(10_000);
      await drain(r);
      // Attempt 2 sleeps: the task still holds attempt 1's error, and it is sleeping all the same.
      expect((await r.get(id))!.error).toMatchObject({ message: "first try fails" });
      const e = await r.explain(id);
      expect(e.reason).toEqual({ kind: "sleeping", step: "nap", until: 1_070_000, abortHandler: false });
      expect(e.text).toBe(`sleeping in ctx.sleep("nap") until ${new Date(1_070_000).toISOString()}`);
      clock.advance(60_000);
      await drain(r);
      expect(await kind(r, id)).toMatchObject({ kind: "ended", outcome: "completed" });
    });

    it("§14.5 a deferral by RateLimitedError is backing off with no attempt used; an abort handler's own sleep is sleeping", async () => {
      const clock = new FakeClock(1_000_000);
      const limited = defineTask({
        name: "limited",
        run: () => {
          throw new RateLimitedError({ retryAfterMs: 30_000 });
        },
      });
      const undo = defineTask({
        name: "undo",
        run: (ctx: TaskContext) => ctx.sleep("work", 600_000),
        onAbort: (ctx: TaskContext) => ctx.sleep("settle-down", 20_000),
      });
      const r = await openRatchet([limited, undo], { clock });
      const id = await r.enqueue(limited, null);
      const u = await r.enqueue(undo, null);
      await drain(r);
      const e = await r.explain(id);
      expect(e.reason).toMatchObject({ kind: "backoff", until: 1_030_000, rateLimited: true });
      expect(e.text).toMatch(
        /^backing off until 1970-01-01T00:17:10\.000Z: deferred by a rate limit \(.*\), no attempt used$/,
      );
      await r.abort(u);
      await drain(r);
      expect(await kind(r, u)).toEqual({
        kind: "sleeping",
        step: "settle-down",
        until: 1_020_000,
        abortHandler: true,
      });
    });

    it("§14.5 running, waiting on tasks and on an event, completing, draining", async () => {
      const clock = new FakeClock(1_000_000);
      let r!: Ratchet;
      const seen: unknown[] = [];
      const slow = defineTask({
        name: "slow",
        async run(ctx: TaskContext) {
          seen.push((await r.explain(ctx.taskId)).reason);
          await ctx.sleep("s", 60_000);
        },
        onAbort: () => "undone",
      });
      const parent = defineTask({
        name: "parent",
        async run(ctx: TaskContext) {
          const k = await ctx.spawn("k", slow);
          await ctx.waitFor([k]);
          return "done";
        },
      });
      const holder = defineTask({
        name: "holder",
        async run(ctx: TaskContext) {
          await ctx.spawn("k", slow);
          return "decided";
        },
      });
      const listener = defineTask({
        name: "listener",
        run: (ctx: TaskContext) => ctx.waitForEvent("go", { timeoutMs: 5_000 }),
      });
      r = await openRatchet([slow, parent, holder, listener], { clock });
      const p = await r.enqueue(parent);
      const h = await r.enqueue(holder);
      const l = await r.enqueue(listener);
      await drain(r);
      expect(seen[0]).toMatchObject({ kind: "running", abortRequested: false });
      const kid = (await r.tree(p)).children[0]!.task.id;
      expect(await kind(r, p)).toEqual({ kind: "tasks", ids: [kid], policy: "allSettled" });
      expect(await kind(r, l)).toEqual({ kind: "event", name: "go", until: 1_005_000 });
      const hk = (await r.tree(h)).children[0]!.task.id;
      expect(await kind(r, h)).toEqual({ kind: "completing", outcome: "completed", children: [hk] });
      await r.abort(p);
      expect(await kind(r, p)).toEqual({ kind: "draining", children: [kid] });
      expect(await kind(r, kid)).toEqual({ kind: "queued", ahead: 0, abortHandler: true, migrates: false });
    });
  });
});
