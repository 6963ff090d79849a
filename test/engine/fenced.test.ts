/**
 * The engine's fenced operations for the layers built on it, on SQLite and PostgreSQL: ctx.fenced
 * (spec §4.8) and a step committed with a layer's own rows (ctx.step's `commit`, spec §4.2; its
 * `commitWith`, with the invocation's buffered chunks, spec §18.10).
 * Each stale-holder test takes the claim away with a real second claim (a "thief"), so the write
 * reaches the store with an old fence: only the store's fence check can refuse it.
 */
import { describe, expect, it } from "vitest";
import type { TaskContext } from "../../src/engine/context.js";
import type { StepCommitWith } from "../../src/engine/step-commit.js";
import { defineTask, type Ratchet, type RatchetError } from "../../src/index.js";
import type { UsageRow } from "../../src/store/usage/ops.js";
import { claimReq, drain, expectCode, FakeClock, forEachBackend, openRatchet, until } from "./helpers.js";

function row(key: string, taskId: number): UsageRow {
  return {
    key,
    status: "committed",
    conversationId: null,
    taskId,
    provider: "p",
    model: "m",
    route: "p/m",
    input: 1,
    output: 2,
    cached: 0,
    reasoning: 0,
    cost: 0,
  };
}

/** Takes the running task `name` over as another worker, past its lease. */
async function steal(r: Ratchet, clock: FakeClock, name: string): Promise<void> {
  clock.advance(1_000 + 10_000);
  const stolen = await r.store.claim(claimReq({ workerId: "thief", names: [name] }));
  expect(stolen).toHaveLength(1);
}

forEachBackend(() => {
  describe("fenced writes of the layers (spec §4.8, §4.2)", () => {
    it("§4.8 ctx.fenced: a stale holder's write changes nothing, rejects with RATCHET_LEASE_LOST and ends the invocation", async () => {
      const clock = new FakeClock();
      let r!: Ratchet;
      const seen: { code?: string; aborted?: boolean; got?: unknown } = {};
      const t = defineTask({
        name: "victim",
        maxMs: 1_000,
        async run(ctx: TaskContext) {
          seen.got = await ctx.fenced((fence, store) =>
            store.usage.recordUsage([row("first", ctx.taskId)], fence),
          );
          await steal(r, clock, "victim");
          try {
            await ctx.fenced((fence, store) => store.usage.recordUsage([row("late", ctx.taskId)], fence));
          } catch (e) {
            seen.code = (e as RatchetError).code;
          }
          seen.aborted = ctx.signal.aborted;
          return "mine";
        },
      });
      r = await openRatchet([t], { clock });
      const id = await r.enqueue(t);
      await r.tick({ budgetMs: 3_600_000, concurrency: 1 });
      expect(seen).toEqual({ got: "ok", code: "RATCHET_LEASE_LOST", aborted: true });
      const rows = await r.store.usage.listUsage({ taskId: id });
      expect(rows.map((u) => u.key)).toEqual(["first"]);
      expect((await r.get(id))!.lockedBy).toBe("thief");
    });

    it("§4.8 ctx.fenced after an abort mark is refused with RATCHET_ABORTED and writes nothing", async () => {
      let r!: Ratchet;
      let code: string | undefined;
      const t = defineTask({
        name: "marked",
        async run(ctx: TaskContext) {
          await r.abort(ctx.taskId);
          try {
            await ctx.fenced((fence, store) => store.usage.recordUsage([row("m", ctx.taskId)], fence));
          } catch (e) {
            code = (e as RatchetError).code;
          }
          return null;
        },
      });
      r = await openRatchet([t]);
      const id = await r.enqueue(t);
      await drain(r);
      expect(code).toBe("RATCHET_ABORTED");
      expect(await r.store.usage.listUsage({ taskId: id })).toEqual([]);
      expect((await r.get(id))!.outcome).toBe("aborted");
    });

    it("§4.2 a step's own commit writes its row with the layer's rows once; a replay returns it without calling fn or commit", async () => {
      let runs = 0;
      let fns = 0;
      let commits = 0;
      const t = defineTask({
        name: "turn",
        retry: { maxAttempts: 2, baseMs: 0, capMs: 0 },
        async run(ctx: TaskContext) {
          runs++;
          const v = await ctx.step(
            "model:a",
            () => {
              fns++;
              return { text: "hi" };
            },
            {
              commit: (w, store) => {
                commits++;
                return store.usage.commitStepWithUsage({
                  ...w,
                  rows: [row(`${w.fence.taskId}:${w.name}`, ctx.taskId)],
                });
              },
            },
          );
          if (runs === 1) throw new Error("after the commit");
          return v;
        },
      });
      const r = await openRatchet([t]);
      const id = await r.enqueue(t);
      await until(async () => {
        await drain(r);
        return (await r.get(id))?.status === "terminal";
      }, "the task to finish");
      const rec = (await r.get(id))!;
      expect(rec.outcome).toBe("completed");
      expect(rec.result).toEqual({ text: "hi" });
      expect({ runs, fns, commits }).toEqual({ runs: 2, fns: 1, commits: 1 });
      expect((await r.store.loadSteps(id)).get("model:a")).toEqual({ text: "hi" });
      expect((await r.store.usage.usageTotals({ taskId: id })).responses).toBe(1);
    });

    it("§4.2 a stale holder's step with its own commit writes neither the step nor the layer's rows", async () => {
      const clock = new FakeClock();
      let r!: Ratchet;
      const seen: { code?: string; aborted?: boolean } = {};
      const t = defineTask({
        name: "victim",
        maxMs: 1_000,
        async run(ctx: TaskContext) {
          await steal(r, clock, "victim");
          try {
            await ctx.step("model:a", () => "x", {
              commit: (w, store) =>
                store.usage.commitStepWithUsage({ ...w, rows: [row("stale", ctx.taskId)] }),
            });
          } catch (e) {
            seen.code = (e as RatchetError).code;
          }
          seen.aborted = ctx.signal.aborted;
          return null;
        },
      });
      r = await openRatchet([t], { clock });
      const id = await r.enqueue(t);
      await r.tick({ budgetMs: 3_600_000, concurrency: 1 });
      expect(seen).toEqual({ code: "RATCHET_LEASE_LOST", aborted: true });
      expect(await r.store.steps(id)).toEqual([]);
      expect(await r.store.usage.listUsage({ taskId: id })).toEqual([]);
    });

    it("§18.10 a step committed with commitWith carries every writer's buffered chunks; the writers go on from there", async () => {
      const carried: number[][] = [];
      const write: StepCommitWith<UsageRow[]>["write"] = (items, store) => {
        for (const w of items) carried.push(w.streams.map((a) => a.chunks.length));
        return store.usage.commitTurns(items);
      };
      const seen: number[] = [];
      const t = defineTask({
        name: "carry",
        async run(ctx: TaskContext) {
          const out = await ctx.stream("out");
          const log = await ctx.stream("log");
          out.write("a");
          out.write("b");
          log.write("l");
          await ctx.step("s", () => 1, {
            commitWith: { write, rows: (w) => [row(`${w.fence.taskId}:${w.name}`, w.fence.taskId)] },
          });
          seen.push(out.committed, log.committed);
          out.write("c");
          await out.close();
          return null;
        },
      });
      // An interval no run reaches: only the step and close() commit chunks.
      const r = await openRatchet([t], { streamIntervalMs: 60_000 });
      const id = await r.enqueue(t);
      await drain(r);
      expect((await r.get(id))!.outcome).toBe("completed");
      expect(carried).toEqual([[2, 1]]);
      expect(seen).toEqual([2, 1]);
      const read = async (name: string) =>
        (await r.store.readStream(id, name, 0)).chunks.map((c) => [c.offset, c.data]);
      expect(await read("out")).toEqual([
        [0, "a"],
        [1, "b"],
        [2, "c"],
      ]);
      expect(await read("log")).toEqual([[0, "l"]]);
      expect((await r.store.usage.usageTotals({ taskId: id })).responses).toBe(1);
    });

    it("§4.2 / §2.1 / §18.10 bad step options and a fenced write that is not a function are refused and write nothing", async () => {
      const codes: string[] = [];
      const t = defineTask({
        name: "bad",
        async run(ctx: TaskContext) {
          const tries: (() => Promise<unknown>)[] = [
            () => ctx.step("a", () => 1, { comit: () => "ok" } as never),
            () => ctx.step("b", () => 1, { commit: 1 } as never),
            () => ctx.step("c", () => 1, null as never),
            () => ctx.fenced(null as never),
            // spec §18.10's group commit: both functions, and not beside `commit`.
            () => ctx.step("d", () => 1, { commitWith: { write: 1, rows: () => [] } } as never),
            () =>
              ctx.step("e", () => 1, {
                commitWith: { write: async () => [], rows: () => [] },
                commit: async () => "ok" as const,
              }),
          ];
          for (const f of tries) await expectCode(f, "RATCHET_INVALID_INPUT").then((e) => codes.push(e.code));
          return null;
        },
      });
      const r = await openRatchet([t]);
      const id = await r.enqueue(t);
      await drain(r);
      expect(codes).toHaveLength(6);
      expect((await r.get(id))!.outcome).toBe("completed");
      expect(await r.store.steps(id)).toEqual([]);
    });
  });
});
