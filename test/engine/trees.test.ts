/**
 * Task trees (spec §12) on both backends: children, waits, completing holds,
 * abort cascades with bottom-up handlers, orphaning, events, phases, versions,
 * recovery and the views. Every test drives the public API; tasks run by
 * ticks, so nothing depends on timing.
 */
import { describe, expect, it } from "vitest";
import type { TaskContext } from "../../src/engine/context.js";
import { definePhases, defineTask, type Ratchet, type TaskSpec } from "../../src/index.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import type { Store } from "../../src/store/store.js";
import { overriding } from "../store-override.js";
import {
  aborted,
  createStore,
  drain,
  expectCode,
  FakeClock,
  forEachBackend,
  newTask,
  openRatchet,
  sharedStoreOptions,
  tickUntil,
  unlimited,
  until,
} from "./helpers.js";

/** Runs SQL straight against the store, bypassing every rule (to stage crashes). */
async function raw(r: Ratchet, sql: string): Promise<void> {
  const s = r.store;
  if (s instanceof SqliteStore) s.db.prepare(sql.replaceAll("{s}.", "")).run();
  else if (s instanceof PostgresStore) await s.pool.query(sql.replaceAll("{s}", `"${s.schema}"`));
  else throw new Error("unknown store");
}

/** A task named "slow" that sleeps `ms` (parked: no worker slot held), then returns `result`. */
function sleeper(
  ms: number,
  result: unknown = null,
  extra: Pick<TaskSpec<unknown, unknown>, "onAbort"> = {},
) {
  return defineTask({
    name: "slow",
    async run(ctx: TaskContext) {
      await ctx.sleep("s", ms);
      return result;
    },
    ...extra,
  });
}

const terminal = async (r: Ratchet, id: number) => (await r.get(id))?.status === "terminal";

forEachBackend(() => {
  describe("children (spec §12.1)", () => {
    it("§12.1 spawn is idempotent by (owner, name): a rerun of the owner gets the same child", async () => {
      let runs = 0;
      const child = defineTask({ name: "child", run: (_c, n: number) => n * 2 });
      const parent = defineTask({
        name: "parent",
        retry: { maxAttempts: 3, baseMs: 0, floorMs: 0 },
        async run(ctx: TaskContext) {
          const a = await ctx.spawn("a", child, 1);
          const again = await ctx.spawn("a", child, 99);
          expect(again).toBe(a);
          if (++runs === 1) throw new Error("crash after spawning");
          const [o] = await ctx.waitFor([a]);
          return { a, result: o!.result };
        },
      });
      const r = await openRatchet([child, parent]);
      const id = await r.enqueue(parent);
      await tickUntil(r, () => terminal(r, id));
      const rec = (await r.get(id))!;
      expect(rec.outcome).toBe("completed");
      const kids = (await r.tree(id)).children;
      expect(kids).toHaveLength(1);
      expect(kids[0]!.task).toMatchObject({ ownerId: id, spawnName: "a", outcome: "completed", result: 2 });
      expect(rec.result).toEqual({ a: kids[0]!.task.id, result: 2 });
    });

    it("§12.2 children inherit the owner's scope; a top-level task's scope defaults to its id", async () => {
      const leaf = defineTask({ name: "leaf", run: () => 1 });
      const top = defineTask({
        name: "top",
        async run(ctx: TaskContext) {
          const c = await ctx.spawn("c", leaf);
          await ctx.waitFor([c]);
          return ctx.scope;
        },
      });
      const r = await openRatchet([leaf, top]);
      const a = await r.enqueue(top);
      const b = await r.enqueue(top, null, { scope: "conversation-7" });
      await tickUntil(r, async () => (await terminal(r, a)) && (await terminal(r, b)));
      expect((await r.get(a))!.result).toBe(String(a));
      expect((await r.get(b))!.result).toBe("conversation-7");
      const kid = (await r.tree(b)).children[0]!.task;
      expect(kid.scope).toBe("conversation-7");
      await expectCode(() => r.enqueue(top, null, { scope: "" }), "RATCHET_INVALID_INPUT");
    });

    it("§12.1 spawnMany makes a round of children once, in order; a rerun gets the same ids; one bad child writes none", async () => {
      const leaf = defineTask({ name: "leaf", run: (_c, i: number) => i * 10 });
      const seen: number[][] = [];
      let bad: string | undefined;
      let runs = 0;
      const t = defineTask({
        name: "round",
        retry: { maxAttempts: 2, baseMs: 0, capMs: 0 },
        async run(ctx: TaskContext) {
          try {
            await ctx.spawnMany([
              { name: "ok", task: leaf, input: 1 },
              { name: "bad", task: leaf, input: Number.NaN },
            ]);
          } catch (e) {
            bad = (e as { code: string }).code;
          }
          const idsNow = await ctx.spawnMany([1, 2, 3].map((i) => ({ name: `k${i}`, task: leaf, input: i })));
          seen.push(idsNow);
          if (++runs === 1) throw new Error("crash after spawning");
          return (await ctx.waitFor(idsNow)).map((o) => o.result);
        },
      });
      const r = await openRatchet([leaf, t]);
      const id = await r.enqueue(t);
      await until(async () => {
        await drain(r);
        return terminal(r, id);
      }, "the round to finish");
      expect(bad).toBe("RATCHET_INVALID_JSON");
      expect(seen).toHaveLength(2);
      expect(seen[1]).toEqual(seen[0]);
      expect((await r.get(id))!.result).toEqual([10, 20, 30]);
      expect((await r.tree(id)).children.map((c) => c.task.spawnName)).toEqual(["k1", "k2", "k3"]);
    });

    it("§12.1 an abort handler cannot spawn; spawn input is validated before anything is written", async () => {
      const leaf = defineTask({ name: "leaf", run: () => 1 });
      const codes: string[] = [];
      const t = defineTask({
        name: "t",
        async run(ctx: TaskContext) {
          for (const bad of [
            () => ctx.spawn("", leaf),
            () => ctx.spawn("x", leaf, Number.NaN),
            () => ctx.spawn("y", "nope"),
          ]) {
            try {
              await bad();
            } catch (e) {
              codes.push((e as { code: string }).code);
            }
          }
          await ctx.spawn("slow", leaf, null, { delayMs: 60_000 });
          await ctx.sleep("hold", 60_000);
        },
        async onAbort(ctx: TaskContext) {
          try {
            await ctx.spawn("late", leaf);
          } catch (e) {
            codes.push((e as { code: string }).code);
          }
          return "cleaned";
        },
      });
      const r = await openRatchet([leaf, t]);
      const id = await r.enqueue(t);
      await drain(r);
      expect(codes).toEqual(["RATCHET_INVALID_INPUT", "RATCHET_INVALID_JSON", "RATCHET_UNKNOWN_TASK"]);
      expect((await r.tree(id)).children.map((c) => c.task.spawnName)).toEqual(["slow"]);
      await r.abort(id);
      await tickUntil(r, () => terminal(r, id));
      expect(codes.at(-1)).toBe("RATCHET_INVALID_STATE");
      expect((await r.get(id))!).toMatchObject({ outcome: "aborted", result: "cleaned" });
    });
  });

  describe("waits (spec §12.3)", () => {
    it("§12.3 waitFor parks the task without a worker slot and resumes with the outcomes in the order asked", async () => {
      const ok = defineTask({ name: "ok", run: (_c, n: number) => n });
      const bad = defineTask({
        name: "bad",
        retry: { maxAttempts: 1 },
        run: () => {
          throw new Error("boom");
        },
      });
      let runs = 0;
      const parent = defineTask({
        name: "parent",
        async run(ctx: TaskContext) {
          runs++;
          const ids = [await ctx.spawn("b", bad), await ctx.spawn("o1", ok, 1), await ctx.spawn("o2", ok, 2)];
          const outs = await ctx.waitFor(ids);
          return outs.map((o) => [o.name, o.outcome, o.result ?? o.error?.message]);
        },
      });
      const r = await openRatchet([ok, bad, parent]);
      const id = await r.enqueue(parent);
      // concurrency 1: a parked parent must not hold the only slot, or its children could never run.
      await tickUntil(r, () => terminal(r, id), { rounds: 10 });
      expect((await r.get(id))!.result).toEqual([
        ["bad", "failed", "boom"],
        ["ok", "completed", 1],
        ["ok", "completed", 2],
      ]);
      expect(runs).toBe(2); // once to spawn and park, once to read the outcomes
    });

    it("§12.3 an empty waitFor returns [] at once: the task does not park, and runs once", async () => {
      let runs = 0;
      const flow = defineTask({
        name: "flow",
        async run(ctx: TaskContext) {
          runs++;
          const none = await ctx.waitFor([]);
          const again = await ctx.waitFor([], { policy: "failFast" });
          return { none, again, step: await ctx.step("after", () => "ran") };
        },
      });
      const r = await openRatchet([flow]);
      const id = await r.enqueue(flow);
      await tickUntil(r, () => terminal(r, id));
      expect(await r.get(id)).toMatchObject({
        outcome: "completed",
        attempts: 1,
        result: { none: [], again: [], step: "ran" },
      });
      expect(runs).toBe(1);
      expect(await r.store.waitMembers(id)).toEqual([]);
    });

    it("§12.3, §2.1 invalid waits are refused with RATCHET_INVALID_WAIT, unknown option keys with RATCHET_INVALID_INPUT, and change nothing", async () => {
      const codes: Record<string, string> = {};
      const leaf = defineTask({
        name: "leaf",
        async run(ctx: TaskContext) {
          await ctx.sleep("s", 60_000);
        },
      });
      const child = defineTask({
        name: "child",
        async run(ctx: TaskContext) {
          try {
            await ctx.waitFor([ctx.ownerId!]);
          } catch (e) {
            codes.owner = (e as { code: string }).code;
          }
          return 1;
        },
      });
      const parent = defineTask({
        name: "parent",
        async run(ctx: TaskContext, other: number) {
          const tries: Record<string, () => Promise<unknown>> = {
            self: () => ctx.waitFor([ctx.taskId]),
            missing: () => ctx.waitFor([987654]),
            foreignFailFast: () => ctx.waitFor([other], { policy: "failFast" }),
            policy: () => ctx.waitFor([other], { policy: "sometimes" as never }),
            waitKey: () => ctx.waitFor([other], { polcy: "failFast" } as never),
            spawnKey: () => ctx.spawn("x", "leaf", null, { backgroud: true } as never),
            eventKey: () => ctx.waitForEvent("e", { timeout: 5 } as never),
          };
          for (const [k, f] of Object.entries(tries)) {
            try {
              await f();
              codes[k] = "none";
            } catch (e) {
              codes[k] = (e as { code: string }).code;
            }
          }
          const c = await ctx.spawn("c", child);
          await ctx.waitFor([c]);
          return "ok";
        },
      });
      const r = await openRatchet([leaf, child, parent]);
      const other = await r.enqueue(leaf);
      const id = await r.enqueue(parent, other);
      await tickUntil(r, () => terminal(r, id));
      expect(codes).toEqual({
        self: "RATCHET_INVALID_WAIT",
        missing: "RATCHET_INVALID_WAIT",
        foreignFailFast: "RATCHET_INVALID_WAIT",
        policy: "RATCHET_INVALID_INPUT",
        waitKey: "RATCHET_INVALID_INPUT",
        spawnKey: "RATCHET_INVALID_INPUT",
        eventKey: "RATCHET_INVALID_INPUT",
        owner: "RATCHET_INVALID_WAIT",
      });
      expect((await r.get(id))!.outcome).toBe("completed");
    });

    it("§12.3 a wait that would close a wait-for cycle is refused with the path", async () => {
      // Two tasks wait for each other; whichever parks first wins, the other's wait closes the cycle.
      const peer = defineTask({
        name: "peer",
        retry: { maxAttempts: 1 },
        async run(ctx: TaskContext, other: number) {
          await ctx.waitFor([other]);
          return "resumed";
        },
      });
      const r = await openRatchet([peer]);
      const [x, y] = await r.enqueueMany([
        { task: peer, input: 0, delayMs: 60_000 },
        { task: peer, input: 0, delayMs: 60_000 },
      ]);
      // Each names the other, then both become due.
      await raw(r, `UPDATE {s}.ratchet_tasks SET input = '${y}' WHERE id = ${x}`);
      await raw(r, `UPDATE {s}.ratchet_tasks SET input = '${x}' WHERE id = ${y}`);
      await raw(r, `UPDATE {s}.ratchet_tasks SET wake_at = 0 WHERE id IN (${x}, ${y})`);
      await tickUntil(r, async () => (await terminal(r, x!)) && (await terminal(r, y!)));
      const recs = [(await r.get(x!))!, (await r.get(y!))!];
      const failed = recs.filter((t) => t.outcome === "failed");
      expect(failed).toHaveLength(1);
      const loser = failed[0]!;
      const winner = recs.find((t) => t !== loser)!;
      expect(loser.error!.code).toBe("RATCHET_INVALID_WAIT");
      expect(loser.error!.message).toContain(`cycle: ${loser.id} -> ${winner.id} -> ${loser.id}`);
      expect(winner).toMatchObject({ outcome: "completed", result: "resumed" });
    });

    it("§12.3 failFast: the first failure marks the other live members, not the waiter; their abort handlers run", async () => {
      const clock = new FakeClock(1_000_000);
      const log: string[] = [];
      const pay = defineTask({
        name: "pay",
        retry: { maxAttempts: 1 },
        async run(ctx: TaskContext, n: number) {
          if (n === 1) throw new Error("declined");
          await ctx.sleep("settle", 60_000);
          return `paid ${n}`;
        },
        onAbort: (_ctx: TaskContext, n: number) => {
          log.push(`refund ${n}`);
          return `refunded ${n}`;
        },
      });
      const checkout = defineTask({
        name: "checkout",
        async run(ctx: TaskContext) {
          const ids = [];
          for (const n of [0, 1, 2, 3]) ids.push(await ctx.spawn(`p${n}`, pay, n));
          const outs = await ctx.waitFor(ids, { policy: "failFast" });
          log.push("checkout resumed");
          return outs.map((o) => o.outcome);
        },
      });
      const r = await openRatchet([pay, checkout], { clock });
      const id = await r.enqueue(checkout);
      await tickUntil(r, () => terminal(r, id));
      expect((await r.get(id))!).toMatchObject({ outcome: "completed", abortRequested: false });
      expect((await r.get(id))!.result).toEqual(["aborted", "failed", "aborted", "aborted"]);
      expect(log.slice(0, 3).sort()).toEqual(["refund 0", "refund 2", "refund 3"]);
      expect(log[3]).toBe("checkout resumed");
    });
  });

  describe("completing (spec §12.4)", () => {
    it("§12.4 a finished owner holds its outcome while ordinary children live; background children do not hold it", async () => {
      const clock = new FakeClock(1_000_000);
      const slow = sleeper(10_000, "slow done");
      const parent = defineTask({
        name: "parent",
        async run(ctx: TaskContext, bg: boolean) {
          await ctx.spawn("kid", slow, null, { background: bg });
          return "parent done";
        },
      });
      const r = await openRatchet([slow, parent], { clock });
      const held = await r.enqueue(parent, false);
      const free = await r.enqueue(parent, true);
      await drain(r);
      expect((await r.get(held))!).toMatchObject({
        status: "completing",
        heldOutcome: "completed",
        outcome: null,
      });
      expect((await r.get(free))!).toMatchObject({ status: "terminal", outcome: "completed" });
      await expectCode(() => r.waitFor(held, { timeoutMs: 50 }), "RATCHET_TIMEOUT");
      await tickUntil(r, () => terminal(r, held), { clock, advanceMs: 10_000 });
      expect((await r.get(held))!).toMatchObject({
        status: "terminal",
        outcome: "completed",
        result: "parent done",
      });
      expect((await r.tree(held)).children[0]!.task.outcome).toBe("completed");
    });

    it("§12.4 a held failure is cancellation intent: the work below is aborted first, then the owner ends failed", async () => {
      const clock = new FakeClock(1_000_000);
      const order: string[] = [];
      let r!: Ratchet;
      const slow = defineTask({
        name: "slow",
        async run(ctx: TaskContext) {
          await r.signal(`started:${ctx.ownerId}`);
          await ctx.sleep("s", 60_000);
        },
        onAbort: () => {
          order.push("child cleanup");
          return null;
        },
      });
      const parent = defineTask({
        name: "parent",
        retry: { maxAttempts: 1 },
        async run(ctx: TaskContext) {
          await ctx.spawn("kid", slow);
          await ctx.waitForEvent(`started:${ctx.taskId}`, { timeoutMs: 60_000 });
          throw new Error("parent broke");
        },
      });
      r = await openRatchet([slow, parent], { clock });
      const id = await r.enqueue(parent);
      await tickUntil(r, () => terminal(r, id));
      const rec = (await r.get(id))!;
      expect(rec).toMatchObject({ outcome: "failed", abortRequested: false });
      expect(rec.error!.message).toBe("parent broke");
      const kid = (await r.tree(id)).children[0]!.task;
      expect(kid).toMatchObject({ outcome: "aborted", abortRequested: true });
      expect(kid.endedAt!).toBeLessThanOrEqual(rec.endedAt!);
      expect(order).toEqual(["child cleanup"]);
      expect((await r.store.events(id)).map((e) => e.kind)).toContain("held");
    });

    it("§12.4 a held outcome is final: abort on a completing task only marks it and cancels the work below", async () => {
      const clock = new FakeClock(1_000_000);
      const slow = sleeper(60_000, null, { onAbort: () => "child cleaned up" });
      let handler = 0;
      const parent = defineTask({
        name: "parent",
        async run(ctx: TaskContext) {
          await ctx.spawn("kid", slow);
          return "decided";
        },
        onAbort: () => {
          handler++;
        },
      });
      const r = await openRatchet([slow, parent], { clock });
      const id = await r.enqueue(parent);
      await drain(r);
      expect((await r.get(id))!.status).toBe("completing");
      expect(await r.abort(id)).toEqual({ state: "marked" });
      await tickUntil(r, () => terminal(r, id));
      expect((await r.get(id))!).toMatchObject({
        outcome: "completed",
        result: "decided",
        abortRequested: true,
      });
      expect(handler).toBe(0);
      expect((await r.tree(id)).children[0]!.task.outcome).toBe("aborted");
    });
  });

  describe("abort (spec §12.5–§12.6)", () => {
    it("§12.5 abort cascades down the tree; abort handlers run bottom-up and see the final outcomes below", async () => {
      const clock = new FakeClock(1_000_000);
      const order: string[] = [];
      let r!: Ratchet;
      const node = defineTask({
        name: "node",
        async run(ctx: TaskContext, depth: number) {
          if (depth < 2) for (const k of [0, 1]) await ctx.spawn(`k${k}`, node, depth + 1);
          await ctx.sleep("work", 60_000);
          return "finished";
        },
        async onAbort(ctx: TaskContext, depth: number) {
          const below = (await ctx.children()).map((c) => c.status);
          expect(below).toHaveLength(depth < 2 ? 2 : 0);
          expect(below.every((s) => s === "terminal")).toBe(true);
          order.push(`d${depth}`);
          return `compensated at ${depth}`;
        },
      });
      r = await openRatchet([node], { clock });
      const root = await r.enqueue(node, 0);
      await drain(r);
      expect((await r.tree(root)).children).toHaveLength(2);
      expect(await r.abort(root)).toEqual({ state: "marked" });
      await tickUntil(r, () => terminal(r, root));
      expect(order).toEqual(["d2", "d2", "d2", "d2", "d1", "d1", "d0"]);
      const all = await r.store.subtree(root, 100);
      expect(all).toHaveLength(7);
      for (const t of all) expect(t).toMatchObject({ outcome: "aborted", abortRequested: true });
      expect((await r.get(root))!.result).toBe("compensated at 0");
    });

    it("§12.5 a running invocation sees ctx.signal abort and its next commit is refused", async () => {
      let r!: Ratchet;
      const seen: string[] = [];
      const child = defineTask({
        name: "child",
        async run(ctx: TaskContext, owner: number) {
          await r.abort(owner); // the owner's cascade reaches this running child
          seen.push(`signal ${ctx.signal.aborted}`);
          try {
            await ctx.step("after", () => 1);
          } catch (e) {
            seen.push((e as { code: string }).code);
          }
          return "ignored";
        },
      });
      const parent = defineTask({
        name: "parent",
        async run(ctx: TaskContext) {
          const c = await ctx.spawn("c", child, ctx.taskId);
          await ctx.waitFor([c]);
        },
      });
      r = await openRatchet([child, parent]);
      const id = await r.enqueue(parent);
      await tickUntil(r, () => terminal(r, id));
      expect(seen).toEqual(["signal true", "RATCHET_ABORTED"]);
      const kid = (await r.tree(id)).children[0]!.task;
      expect(kid.outcome).toBe("aborted");
      expect(await r.store.steps(kid.id)).toEqual([]);
      expect((await r.get(id))!.outcome).toBe("aborted");
    });

    it("§12.5 an invocation aborted while its wait is being parked unwinds and frees its slot (it never hangs the tick)", async () => {
      let r!: Ratchet;
      const base = await createStore();
      // The abort lands between the store parking the task and the code seeing the result.
      const store = overriding(base, {
        waitTasks: async (...args: Parameters<Store["waitTasks"]>) => {
          const res = await base.waitTasks(...args);
          await r.abort(args[0].taskId);
          return res;
        },
      });
      const seen: string[] = [];
      const slow = sleeper(60_000);
      const waiter = defineTask({
        name: "waiter",
        async run(ctx: TaskContext, other: number) {
          try {
            await ctx.waitFor([other]);
          } catch (e) {
            seen.push((e as { code: string }).code);
            throw e;
          }
        },
      });
      r = await openRatchet([slow, waiter], { store });
      const other = await r.enqueue(slow);
      const id = await r.enqueue(waiter, other);
      await drain(r); // returns: the waiter's slot was freed
      expect(seen).toEqual(["RATCHET_ABORTED"]);
      expect((await r.get(id))!.outcome).toBe("aborted");
    });

    it("§12.5 / §12.10 a worker signals a running task marked by another process within the maintenance interval, without a commit", async () => {
      const started = { id: 0 };
      const quiet = defineTask({
        name: "quiet",
        async run(ctx: TaskContext) {
          started.id = ctx.taskId;
          // Never commits: only the worker's maintenance pass can tell it about the mark.
          await aborted(ctx.signal);
          return "stopped";
        },
      });
      const r = await openRatchet([quiet], { maintenanceIntervalMs: 20, pollIntervalMs: 20 });
      const id = await r.enqueue(quiet);
      await r.start({ concurrency: 2 });
      await until(() => started.id === id, "the task to start");
      // Straight through the store, as another process would: no in-process signal.
      expect((await r.store.abort(id)).state).toBe("marked");
      const rec = await r.waitFor(id, { timeoutMs: 10_000 });
      expect(rec.outcome).toBe("aborted");
      await r.stop();
    });

    it("§12.5 a background child is outside the cascade; abortScope with background reaches it", async () => {
      const clock = new FakeClock(1_000_000);
      const slow = sleeper(60_000, "slow");
      const parent = defineTask({
        name: "parent",
        async run(ctx: TaskContext) {
          await ctx.spawn("fg", slow);
          await ctx.spawn("bg", slow, null, { background: true });
          await ctx.sleep("s", 60_000);
        },
      });
      const r = await openRatchet([slow, parent], { clock });
      const a = await r.enqueue(parent, null, { scope: "conv-1" });
      const b = await r.enqueue(parent, null, { scope: "conv-2" });
      await drain(r);
      await r.abort(a);
      await tickUntil(r, () => terminal(r, a));
      const kidsA = Object.fromEntries((await r.tree(a)).children.map((c) => [c.task.spawnName, c.task]));
      expect(kidsA.fg!.outcome).toBe("aborted");
      expect(kidsA.bg!.status).toBe("waiting"); // still sleeping: background work outlives the abort
      expect((await r.abortScope("conv-2", { background: true })).marked).toBe(3);
      await tickUntil(r, () => terminal(r, b));
      for (const c of (await r.tree(b)).children) expect(c.task.outcome).toBe("aborted");
      clock.advance(60_000);
      await tickUntil(r, () => terminal(r, kidsA.bg!.id));
      expect((await r.get(kidsA.bg!.id))!.outcome).toBe("completed");
    });

    it("§12.5 an abort handler may sleep and retry like any code; its timers are kept, not cut short by the mark", async () => {
      const clock = new FakeClock(1_000_000);
      let tries = 0;
      const t = defineTask({
        name: "t",
        retry: { maxAttempts: 3, baseMs: 1_000, floorMs: 1_000, factor: 1 },
        async run(ctx: TaskContext) {
          await ctx.sleep("work", 60_000);
        },
        async onAbort(ctx: TaskContext) {
          await ctx.sleep("cooldown", 5_000);
          if (++tries === 1) throw new Error("refund service down");
          return "refunded";
        },
      });
      const r = await openRatchet([t], { clock });
      const id = await r.enqueue(t);
      await drain(r);
      expect(await r.abort(id)).toEqual({ state: "marked" });
      await drain(r);
      expect((await r.get(id))!).toMatchObject({ status: "waiting", waitOn: "abort" });
      clock.advance(4_999);
      await drain(r);
      expect(tries).toBe(0);
      await tickUntil(r, () => terminal(r, id), { clock, advanceMs: 1_000 });
      expect(tries).toBe(2);
      expect((await r.get(id))!).toMatchObject({ outcome: "aborted", result: "refunded" });
    });

    it("§12.6 a task whose definition is not registered is orphaned when aborted; one with code ends aborted", async () => {
      const known = defineTask({ name: "known", run: () => 1 });
      const r = await openRatchet([known]);
      const [ghost] = await r.store.enqueue([newTask({ name: "ghost" })], unlimited);
      const k = await r.enqueue(known);
      expect(await r.abort(ghost!.id)).toEqual({ state: "orphaned" });
      expect(await r.abort(k)).toEqual({ state: "aborted" });
      const rec = (await r.get(ghost!.id))!;
      expect(rec).toMatchObject({ status: "terminal", outcome: "orphaned" });
      expect(rec.error!.code).toBe("missing_definition");
    });
  });

  describe("retry and prune with trees", () => {
    it("§12.5 / §6.3 retry of an owned task is refused while its owner holds an outcome or is being aborted", async () => {
      const clock = new FakeClock(1_000_000);
      const bad = defineTask({
        name: "bad",
        retry: { maxAttempts: 1 },
        run: () => {
          throw new Error("no");
        },
      });
      const slow = sleeper(60_000);
      const parent = defineTask({
        name: "parent",
        async run(ctx: TaskContext) {
          const b = await ctx.spawn("bad", bad);
          await ctx.spawn("slow", slow);
          await ctx.waitFor([b]);
          return "decided";
        },
      });
      const r = await openRatchet([bad, slow, parent], { clock });
      const id = await r.enqueue(parent);
      await tickUntil(r, async () => (await r.get(id))?.status === "completing");
      const failedKid = (await r.tree(id)).children.find((c) => c.task.spawnName === "bad")!.task;
      expect(failedKid.outcome).toBe("failed");
      const err = await expectCode(() => r.retry(failedKid.id), "RATCHET_INVALID_STATE");
      expect(err.message).toContain("completing");
      expect((await r.get(failedKid.id))!.outcome).toBe("failed");
      await tickUntil(r, () => terminal(r, id), { clock, advanceMs: 60_000 });
      // Once the owner is terminal, its children may run again like any task (a terminal owner never cascades).
      expect((await r.retry(failedKid.id)).status).toBe("pending");
    });

    it("§12.7 / §10.3 prune forgets signals older than the cutoff", async () => {
      const clock = new FakeClock(1_000_000);
      const waiter = defineTask({
        name: "waiter",
        async run(ctx: TaskContext) {
          return ctx.waitForEvent("old", { timeoutMs: 1_000 });
        },
      });
      const r = await openRatchet([waiter], { clock });
      await r.signal("old", 1);
      clock.advance(10_000);
      await r.store.prune(5_000, 100);
      const id = await r.enqueue(waiter);
      await drain(r);
      expect((await r.get(id))!.status).toBe("waiting");
      expect((await r.signal("old", 2)).first).toBe(true);
    });
  });

  describe("events (spec §12.7)", () => {
    it("§12.7 a signal sent before the wait is not lost; one sent after wakes the task; the first signal per name wins", async () => {
      const waiter = defineTask({
        name: "waiter",
        async run(ctx: TaskContext, name: string) {
          return ctx.waitForEvent(name, { timeoutMs: 60_000 });
        },
      });
      const r = await openRatchet([waiter]);
      expect(await r.signal("early", { ok: 1 })).toEqual({ first: true, woken: 0 });
      expect(await r.signal("early", { ok: 2 })).toEqual({ first: false, woken: 0 });
      const a = await r.enqueue(waiter, "early");
      const b = await r.enqueue(waiter, "late");
      await drain(r);
      expect((await r.get(a))!.result).toEqual({ kind: "signal", payload: { ok: 1 } });
      expect((await r.get(b))!).toMatchObject({ status: "waiting", waitOn: "event", eventName: "late" });
      expect(await r.signal("late", "approved")).toEqual({ first: true, woken: 1 });
      await tickUntil(r, () => terminal(r, b));
      expect((await r.get(b))!.result).toEqual({ kind: "signal", payload: "approved" });
      await expectCode(() => r.signal("x", () => 1), "RATCHET_INVALID_JSON");
    });

    it("§12.7 without a signal the wait ends with a timeout outcome, measured by the store's clock", async () => {
      const clock = new FakeClock(1_000_000);
      const waiter = defineTask({
        name: "waiter",
        async run(ctx: TaskContext) {
          return ctx.waitForEvent("never", { timeoutMs: 5_000 });
        },
      });
      const r = await openRatchet([waiter], { clock });
      const id = await r.enqueue(waiter);
      await drain(r);
      expect((await r.get(id))!.status).toBe("waiting");
      clock.advance(4_999);
      await drain(r);
      expect((await r.get(id))!.status).toBe("waiting");
      clock.advance(1);
      await tickUntil(r, () => terminal(r, id));
      expect((await r.get(id))!.result).toEqual({ kind: "timeout" });
      // A signal after the timeout changes nothing for this task: its outcome is memoized.
      expect((await r.signal("never", 1)).woken).toBe(0);
    });
  });

  describe("phases (spec §12.8)", () => {
    it("§12.8 each phase commits the next checkpoint; a rerun resumes there and earlier turns never run again", async () => {
      const calls: string[] = [];
      let crashed = false;
      const loop = definePhases<{ turns: number }, { n: number; log: number[] }, number[]>({
        name: "loop",
        retry: { maxAttempts: 3, baseMs: 0, floorMs: 0 },
        initial: () => ({ phase: "turn", state: { n: 0, log: [] } }),
        phases: {
          async turn(ctx, state, input) {
            const v = await ctx.step("think", () => state.n * 10);
            calls.push(`turn ${state.n}`);
            if (state.n === 2 && !crashed) {
              crashed = true;
              throw new Error("crash mid-turn");
            }
            const next = { n: state.n + 1, log: [...state.log, v] };
            return next.n < input.turns ? { next: "turn", state: next } : { next: "finish", state: next };
          },
          finish: (_ctx, state) => ({ done: state.log }),
        },
      });
      const r = await openRatchet([loop]);
      const id = await r.enqueue(loop, { turns: 4 });
      await tickUntil(r, () => terminal(r, id));
      expect((await r.get(id))!).toMatchObject({ outcome: "completed", result: [0, 10, 20, 30] });
      expect(calls).toEqual(["turn 0", "turn 1", "turn 2", "turn 2", "turn 3"]);
      // Only the last turn's steps remain: checkpoints replace, they do not accumulate.
      expect((await r.store.steps(id)).length).toBeLessThanOrEqual(1);
    });

    it("§12.8 a phase that returns the checkpoint it started from ends faulted (no durable progress)", async () => {
      const stuck = definePhases<null, { n: number }, never>({
        name: "stuck",
        initial: () => ({ phase: "poll", state: { n: 1 } }),
        phases: { poll: (_ctx, state) => ({ next: "poll", state }) },
      });
      const r = await openRatchet([stuck]);
      const id = await r.enqueue(stuck, null);
      await tickUntil(r, () => terminal(r, id));
      const rec = (await r.get(id))!;
      expect(rec.outcome).toBe("faulted");
      expect(rec.error!.code).toBe("RATCHET_NO_PROGRESS");
      expect(rec.attempts).toBe(1);
    });

    it("§12.8 a definition replaced while a phase task runs takes over at the next phase boundary", async () => {
      const log: string[] = [];
      let r!: Ratchet;
      const make = (tag: string) =>
        definePhases<null, null, string[]>({
          name: "flow",
          initial: () => ({ phase: "one", state: null }),
          phases: {
            one: () => {
              log.push(`one:${tag}`);
              if (tag === "a") r.register(b); // a deploy lands while the task is in phase one
              return { next: "two", state: null };
            },
            two: () => {
              log.push(`two:${tag}`);
              return { done: log };
            },
          },
        });
      const a = make("a");
      const b = make("b");
      r = await openRatchet([a]);
      const id = await r.enqueue(a, null);
      await tickUntil(r, () => terminal(r, id));
      expect((await r.get(id))!.result).toEqual(["one:a", "two:b"]);
      expect((await r.store.events(id)).map((e) => e.kind)).toContain("released");
    });

    it("§12.8 a phase may wait: the next phase resumes with the outcomes", async () => {
      const leaf = defineTask({ name: "leaf", run: (_c, n: number) => n + 1 });
      const flow = definePhases<null, { kids: number[] }, unknown>({
        name: "flow",
        initial: () => ({ phase: "start", state: { kids: [] } }),
        phases: {
          async start(ctx) {
            const kids = [await ctx.spawn("a", leaf, 1), await ctx.spawn("b", leaf, 2)];
            return { next: "collect", state: { kids }, wait: kids };
          },
          collect: (ctx) => ({ done: ctx.outcomes!.map((o) => o.result) }),
        },
      });
      const r = await openRatchet([leaf, flow]);
      const id = await r.enqueue(flow, null);
      await tickUntil(r, () => terminal(r, id));
      expect((await r.get(id))!.result).toEqual([2, 3]);
    });
  });

  describe("versions (spec §12.9)", () => {
    it("§12.9, §5.5 an older stored task is migrated before it runs; a failing or missing migration blocks it (never faulted) until new code", async () => {
      const v1 = defineTask({ name: "greet", version: 1, run: (_c, i: { name: string }) => `hi ${i.name}` });
      const opts = sharedStoreOptions();
      const r1 = await openRatchet([v1], opts);
      const a = await r1.enqueue(v1, { name: "ada" });
      const b = await r1.enqueue(v1, { name: "bob" });
      await r1.close();

      const v2broken = defineTask({
        name: "greet",
        version: 2,
        migrate: () => {
          throw new Error("cannot read v1");
        },
        run: (_c, i: { first: string }) => `hello ${i.first}`,
      });
      const r2 = await openRatchet([v2broken], opts);
      await drain(r2);
      for (const id of [a, b])
        expect((await r2.get(id))!).toMatchObject({ status: "waiting", waitOn: "blocked", outcome: null });
      const insp = await r2.inspect();
      const blocked = insp.tasks.find((t) => t.id === a)!.derived;
      expect(blocked).toMatchObject({
        state: "blocked",
        reason: "migration_failed",
        error: { message: "cannot read v1" },
      });

      const v2 = defineTask({
        name: "greet",
        version: 2,
        migrate: (input) => ({ input: { first: (input as { name: string }).name } }),
        run: (_c, i: { first: string }) => `hello ${i.first}`,
      });
      r2.register(v2);
      await tickUntil(r2, async () => (await terminal(r2, a)) && (await terminal(r2, b)));
      expect((await r2.get(a))!).toMatchObject({ outcome: "completed", result: "hello ada", version: 2 });
      expect((await r2.get(a))!.input).toEqual({ first: "ada" });
      expect((await r2.store.events(a)).map((e) => e.kind)).toEqual(["blocked", "migrated"]);
    });

    it("§12.9 a task stored by a newer version than the code is blocked too_old, never run", async () => {
      const v1 = defineTask({ name: "job", version: 1, run: () => "ran" });
      const r = await openRatchet([v1]);
      const [t] = await r.store.enqueue([newTask({ name: "job", version: 3 })], unlimited);
      await drain(r);
      expect((await r.get(t!.id))!).toMatchObject({
        status: "waiting",
        waitOn: "blocked",
        blocked: { reason: "too_old" },
      });
      expect(await r.abort(t!.id)).toEqual({ state: "orphaned" });
    });
  });

  describe("recovery and views (spec §12.10)", () => {
    it("§12.10 a cascade a crash left unapplied is derived again at open", async () => {
      const clock = new FakeClock(1_000_000);
      const slow = sleeper(60_000);
      const parent = defineTask({
        name: "parent",
        async run(ctx: TaskContext) {
          await ctx.spawn("a", slow);
          await ctx.spawn("b", slow);
          await ctx.sleep("s", 60_000);
        },
      });
      const opts = sharedStoreOptions();
      const r1 = await openRatchet([slow, parent], { ...opts, clock });
      const id = await r1.enqueue(parent);
      await drain(r1);
      // The mark is durable but the process died before any reconcile ran.
      await raw(r1, `UPDATE {s}.ratchet_tasks SET abort_requested = 1 WHERE id = ${id}`);
      await r1.close();
      const r2 = await openRatchet([slow, parent], { ...opts, clock });
      for (const c of (await r2.tree(id)).children) expect(c.task.abortRequested).toBe(true);
      await tickUntil(r2, () => terminal(r2, id));
      expect((await r2.get(id))!.outcome).toBe("aborted");
    });

    it("§12.12 waitForIdle() without a scope waits until no live ordinary task is left in the store", async () => {
      const clock = new FakeClock(1_000_000);
      const slow = sleeper(1_000, 1);
      const long = defineTask({
        name: "long",
        async run(ctx: TaskContext) {
          await ctx.sleep("s", 60_000);
        },
      });
      const parent = defineTask({
        name: "parent",
        async run(ctx: TaskContext) {
          await ctx.spawn("bg", long, null, { background: true });
          await ctx.waitFor([await ctx.spawn("a", slow)]);
          return "done";
        },
      });
      const quick = defineTask({ name: "quick", run: () => 1 });
      const r = await openRatchet([slow, long, parent, quick], { clock });
      await r.waitForIdle({ timeoutMs: 0 }); // an empty store is idle
      await r.waitForIdle();
      const id = await r.enqueue(parent, null, { scope: "s1" });
      const later = await r.enqueue(quick, null, { scope: "s2", delayMs: 5_000 });
      await drain(r);
      await expectCode(() => r.waitForIdle({ timeoutMs: 0 }), "RATCHET_TIMEOUT");
      clock.advance(1_000);
      await tickUntil(r, () => terminal(r, id));
      await r.waitForIdle("s1", { timeoutMs: 0 });
      // Another scope's task is still waiting on its timer: the store is not idle.
      const err = await expectCode(() => r.waitForIdle({ timeoutMs: 0 }), "RATCHET_TIMEOUT");
      expect(err.message).toMatch(/the store still has 1 live task/);
      const idle = r.waitForIdle({ timeoutMs: 60_000 });
      clock.advance(5_000);
      await tickUntil(r, () => terminal(r, later));
      await idle;
      // Only the background child is live now, sleeping: detached work does not count (spec §12.2).
      const bg = (await r.tree(id)).children.find((c) => c.task.spawnName === "bg")!.task;
      expect((await r.get(bg.id))!.status).toBe("waiting");
      await r.waitForIdle({ timeoutMs: 0 });
      await expectCode(() => r.waitForIdle({ timeot: 5 } as never), "RATCHET_INVALID_INPUT");
    });

    it("§12.10 inspect derives each live task's state; waitForIdle waits for the scope; tree nests the subtree", async () => {
      const clock = new FakeClock(1_000_000);
      const slow = sleeper(1_000, 1);
      const parent = defineTask({
        name: "parent",
        async run(ctx: TaskContext) {
          const a = await ctx.spawn("a", slow);
          await ctx.spawn("bg", slow, null, { background: true });
          await ctx.waitFor([a]);
          return "done";
        },
      });
      const r = await openRatchet([slow, parent], { clock });
      const id = await r.enqueue(parent, null, { scope: "s1" });
      const [ghost] = await r.store.enqueue([newTask({ name: "ghost" })], unlimited);
      await drain(r);
      const insp = await r.inspect();
      const by = new Map(insp.tasks.map((t) => [t.id, t]));
      const kids = (await r.tree(id)).children.map((c) => c.task.id);
      expect(by.get(id)!.derived).toEqual({
        state: "waiting",
        on: { kind: "tasks", ids: [kids[0]], policy: "allSettled" },
      });
      expect(by.get(kids[0]!)!.derived).toMatchObject({ state: "waiting", on: { kind: "timer" } });
      expect(by.get(ghost!.id)!.derived).toEqual({ state: "blocked", reason: "missing_definition" });
      expect(insp.scheduling).toBe("paused");
      await expectCode(() => r.waitForIdle("s1", { timeoutMs: 20 }), "RATCHET_TIMEOUT");
      clock.advance(1_000);
      await tickUntil(r, () => terminal(r, id));
      // The background child does not keep the scope busy (it already ended here, but is excluded either way).
      await r.waitForIdle("s1", { timeoutMs: 1_000 });
      const tree = await r.tree(id);
      expect(tree.task.id).toBe(id);
      expect(tree.children.map((c) => [c.task.spawnName, c.task.background])).toEqual([
        ["a", false],
        ["bg", true],
      ]);
    });
  });
});
