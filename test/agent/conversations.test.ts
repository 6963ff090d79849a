/**
 * spec §17.1–§17.9 through `ratchet/agent` on SQLite and PostgreSQL: fork, atomic commits, replay of
 * a run's keyed commits, delivery modes, background abort and deletion. Driven by ticks.
 */
import { describe, expect, it } from "vitest";
import { Conversations, defineRun } from "../../src/agent/index.js";
import { defineTask } from "../../src/engine/definition.js";
import { drain, expectCode, forEachBackend, openRatchet, until } from "../engine/helpers.js";
import { makeRun, openConversations } from "./fixtures.js";

/** A background child that waits for the signal "bg-go" (outside the run's abort cascade, spec §12.2). */
const bgWait = defineTask({
  name: "agent.bg",
  async run(ctx) {
    await ctx.waitForEvent("bg-go", { timeoutMs: 60_000 });
    return "released";
  },
});

forEachBackend(() => {
  describe("conversations", () => {
    it("§17.7 a fork starts with copies of the entries up to its seq and the state, under a fresh id, and runs on its own", async () => {
      const run = makeRun();
      const r = await openRatchet([run.task]);
      const c = openConversations(r, run);
      await c.create("p", { title: "parent", metadata: { tag: 1 } });
      await c.submit("p", { text: "one" });
      await drain(r);
      await c.commit("p", { state: { doc: { v: 1 } } });
      const f = await c.fork("p", 1, { title: "fork" });
      expect(f.id).not.toBe("p");
      expect(f).toMatchObject({
        title: "fork",
        parent: { conversationId: "p", seq: 1 },
        length: 2,
        runTaskId: null,
      });
      expect((await c.entries(f.id)).map((e) => [e.seq, e.kind, e.data])).toEqual([
        [0, "user", { text: "one" }],
        [1, "tool-call", { for: "one" }],
      ]);
      expect(await c.state(f.id)).toEqual({ doc: { v: 1 } });
      const s = await c.submit(f.id, { text: "two" });
      await drain(r);
      expect((await s.wait()).status).toBe("done");
      expect((await c.entries(f.id)).map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5]);
      expect((await c.entries("p")).map((e) => e.kind)).toEqual([
        "user",
        "tool-call",
        "tool-result",
        "assistant",
      ]);
    });

    it("§17.4 a commit whose task is refused inside the transaction writes none of its entries or state", async () => {
      const run = makeRun();
      const noop = defineTask({ name: "agent.noop", run: () => null });
      const r = await openRatchet([run.task, noop]);
      const c = new Conversations(r, { run, maxDepth: 1 });
      await c.create("c1");
      await expectCode(
        () =>
          c.commit("c1", {
            entries: [{ kind: "system", data: "x" }],
            state: { k: 1 },
            tasks: [{ task: noop }, { task: noop }],
          }),
        "RATCHET_QUEUE_FULL",
      );
      expect(await c.entries("c1")).toEqual([]);
      expect(await c.state("c1")).toEqual({});
      expect(await r.list({ limit: 10 })).toEqual([]);
      const ok = await c.commit("c1", {
        entries: [{ kind: "system", data: "x" }],
        tasks: [{ task: noop, input: 1 }],
      });
      expect((await r.get(ok.taskIds[0]!))!.scope).toBe("conversation:c1");
      await expectCode(() => c.commit("c1", { tasks: [{ task: "agent.unknown" }] }), "RATCHET_UNKNOWN_TASK");
      await expectCode(
        () => c.commit("c1", { entries: [{ kind: "custom", data: 1 }] }),
        "RATCHET_INVALID_INPUT",
      );
      expect(await c.entries("c1")).toHaveLength(1);
    });

    it("§17.4 a run that fails after a commit and runs again gets its keyed commit back, written once", async () => {
      let attempts = 0;
      const flaky = defineRun({
        name: "agent.flaky",
        retry: { maxAttempts: 2, baseMs: 0, capMs: 0 },
        async run(run) {
          await run.commit("call", { entries: [{ kind: "tool-call", data: "once" }] });
          if (++attempts === 1) throw new Error("crash after the commit");
          await run.answer({ kind: "assistant", data: "ok" });
        },
      });
      const r = await openRatchet([flaky.task]);
      const c = new Conversations(r, { run: flaky });
      await c.create("c1");
      const s = await c.submit("c1", "go");
      await until(async () => {
        await drain(r);
        return (await c.submission(s.id))!.record.status === "done";
      }, "the retried run answered");
      expect(attempts).toBe(2);
      expect((await c.entries("c1")).map((e) => e.kind)).toEqual(["user", "tool-call", "assistant"]);
    });

    it("§17.2 concurrent commits to one conversation get seqs 0…n−1, without gap or repeat", async () => {
      const run = makeRun();
      const r = await openRatchet([run.task]);
      const c = openConversations(r, run);
      await c.create("c1");
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          c.commit("c1", {
            entries: [
              { kind: "system", data: i },
              { kind: "system", data: i },
            ],
          }),
        ),
      );
      const seqs = results.flatMap((x) => x.seqs).sort((a, b) => a - b);
      expect(seqs).toEqual(Array.from({ length: 40 }, (_, i) => i));
      for (const x of results) expect(x.seqs[1]).toBe(x.seqs[0]! + 1);
      const entries = await c.entries("c1");
      expect(entries.map((e) => e.seq)).toEqual(seqs);
      expect((await c.get("c1"))!.length).toBe(40);
    });

    it("§17.2 a tool task commits its own entry, fenced and keyed; entriesByTask finds it", async () => {
      let conversations: Conversations | undefined;
      const tool = defineTask({
        name: "agent.tool",
        async run(ctx, input: { conversationId: string }) {
          for (let i = 0; i < 2; i++)
            await conversations!.commitFromTask(ctx, input.conversationId, "result", {
              entries: [{ kind: "tool-result", data: { by: ctx.taskId } }],
            });
        },
      });
      const run = makeRun();
      const r = await openRatchet([run.task, tool]);
      conversations = openConversations(r, run);
      await conversations.create("c1");
      const { taskIds } = await conversations.commit("c1", {
        tasks: [{ task: tool, input: { conversationId: "c1" } }],
      });
      await drain(r);
      const mine = await conversations.entriesByTask(taskIds[0]!);
      expect(mine.map((e) => [e.kind, e.data])).toEqual([["tool-result", { by: taskIds[0] }]]);
    });

    it("§17.6 steeringMode all places every queued steer at one boundary", async () => {
      const run = makeRun();
      const r = await openRatchet([run.task]);
      const c = openConversations(r, run, { steeringMode: "all" });
      await c.create("c1");
      const a = await c.submit("c1", { text: "A", park: true });
      await drain(r);
      const runId = (await c.get("c1"))!.runTaskId!;
      await until(async () => (await r.get(runId))?.status === "waiting", "the run parked");
      await c.submit("c1", { text: "S1" }, { whenBusy: "steer" });
      await c.submit("c1", { text: "S2" }, { whenBusy: "steer" });
      await r.signal(`go:${runId}`);
      await drain(r);
      expect(await a.wait()).toMatchObject({ status: "done" });
      const answer = (await c.entries("c1")).find((e) => e.kind === "assistant")!;
      expect(answer.data).toEqual({ answered: ["A", "S1", "S2"] });
      expect(await c.inbox("c1")).toEqual([]);
    });

    it("§17.8 abort leaves background work alone; with background it is aborted and awaited too", async () => {
      const spawner = defineRun({
        name: "agent.spawner",
        async run(run, ctx) {
          await ctx.spawn("bg", bgWait, {}, { background: true });
          await ctx.waitForEvent(`hold:${run.taskId}`, { timeoutMs: 60_000 });
          await run.answer(null);
        },
      });
      const r = await openRatchet([spawner.task, bgWait]);
      const c = new Conversations(r, { run: spawner });
      await c.create("c1");
      await c.submit("c1", "go");
      await drain(r);
      const live = async () => (await r.list({ limit: 10 })).filter((t) => t.status !== "terminal");
      await until(
        async () => (await live()).length === 2 && (await live()).every((t) => t.status === "waiting"),
        "both parked",
      );
      const plain = c.abort("c1", { timeoutMs: 20_000 });
      await drain(r);
      expect((await plain).marked).toBe(1);
      expect((await live()).map((t) => t.name)).toEqual(["agent.bg"]);
      const all = c.abort("c1", { background: true, timeoutMs: 20_000 });
      await until(async () => {
        await drain(r);
        return (await live()).length === 0;
      }, "the background task aborted");
      expect((await all).marked).toBe(1);
      expect((await r.list({ limit: 10 })).map((t) => t.outcome)).toEqual(["aborted", "aborted"]);
    });

    it("§17.8 close: queued input ends unanswered (closed), the run in progress still answers, later input is refused", async () => {
      const run = makeRun();
      const r = await openRatchet([run.task]);
      const c = openConversations(r, run);
      await c.create("c1");
      const a = await c.submit("c1", { text: "A", park: true });
      await drain(r);
      const runId = (await c.get("c1"))!.runTaskId!;
      const f = await c.submit("c1", { text: "F" });
      expect(await c.close("c1")).toBe(true);
      expect(await f.wait()).toMatchObject({ status: "unanswered", reason: "closed" });
      await expectCode(() => c.submit("c1", { text: "late" }), "RATCHET_INVALID_STATE");
      await r.signal(`go:${runId}`);
      await drain(r);
      expect((await a.wait()).status).toBe("done");
      expect((await c.get("c1"))!.runTaskId).toBeNull();
    });

    it("§17.1 an owned conversation's run is owned by the live owner task: the owner's abort reaches it, bottom-up", async () => {
      const owner = defineTask({
        name: "agent.owner",
        async run(ctx) {
          await ctx.waitForEvent(`owner:${ctx.taskId}`, { timeoutMs: 60_000 });
        },
      });
      const run = makeRun();
      const r = await openRatchet([run.task, owner]);
      const c = openConversations(r, run);
      const ownerId = await r.enqueue(owner);
      await drain(r);
      await c.create("sub", { ownerTaskId: ownerId });
      const s = await c.submit("sub", { text: "A", park: true });
      await drain(r);
      const runId = (await c.get("sub"))!.runTaskId!;
      expect((await r.get(runId))!.ownerId).toBe(ownerId);
      const queued = await c.submit("sub", { text: "Q" });
      await r.abort(ownerId);
      await until(async () => {
        await drain(r);
        return (await r.get(ownerId))!.status === "terminal";
      }, "the owner ended");
      const [o, t] = [(await r.get(ownerId))!, (await r.get(runId))!];
      expect([o.outcome, t.outcome]).toEqual(["aborted", "aborted"]);
      expect(t.endedAt!).toBeLessThanOrEqual(o.endedAt!);
      expect(await s.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
      // The cascade reached the conversation: its queued input is withdrawn with the run.
      expect(await queued.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
      // The owner is terminal: later work in the conversation is ordinary work, owned by no task.
      await c.submit("sub", { text: "B" });
      const next = (await c.get("sub"))!.runTaskId!;
      expect((await r.get(next))!.ownerId).toBeNull();
    });

    it("§17.9 delete removes a conversation with what it holds; §17.3 context starts at the newest reset", async () => {
      const run = makeRun();
      const r = await openRatchet([run.task]);
      const c = openConversations(r, run);
      await c.create("c1");
      await c.commit("c1", {
        entries: [{ kind: "user", data: 1 }, { kind: "reset" }, { kind: "user", data: 2 }],
      });
      expect((await c.context("c1")).map((e) => [e.seq, e.kind])).toEqual([
        [1, "reset"],
        [2, "user"],
      ]);
      const s = await c.submit("c1", { text: "x" });
      await expectCode(() => c.delete("c1"), "RATCHET_INVALID_STATE");
      await drain(r);
      await s.wait();
      expect(await c.delete("c1")).toBe(true);
      expect(await c.get("c1")).toBeNull();
      expect(await s.wait()).toMatchObject({ status: "unanswered", reason: "deleted" });
      expect(await c.list()).toEqual([]);
    });
  });
});
