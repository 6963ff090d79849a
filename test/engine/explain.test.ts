/** explain(id) (spec §14.5): one test per kind of reason, on both backends. */
import { describe, expect, it } from "vitest";
import type { TaskContext } from "../../src/engine/context.js";
import { defineTask, type Ratchet } from "../../src/index.js";
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
        `backing off after a failed attempt (Error: upstream said no); runs again at ${new Date(1_010_000).toISOString()}`,
      );
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
