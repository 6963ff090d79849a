/** Subagents as tool calls (spec §19.13–§19.14), on SQLite and PostgreSQL. */
import { describe, expect, it } from "vitest";
import { Conversations, defineRun } from "../../src/agent/index.js";
import { defineSubagent } from "../../src/agent/subagents.js";
import { defineToolCalls, type ToolCallOutcome } from "../../src/agent/tools/calls.js";
import { drain, forEachBackend, onCleanup, openRatchet, until } from "../engine/helpers.js";

interface In {
  text: string;
}

/** One run definition for parent and child: "delegate:X" asks a subagent X, anything else is answered. */
function setup(background: boolean) {
  let conv: Conversations | undefined;
  const sub = defineSubagent({
    name: "helper",
    description: "asks a helper",
    background,
    conversations: () => conv!,
  });
  const calls = defineToolCalls({ tools: [sub.tool] });
  const run = defineRun({
    name: background ? "agent.bg" : "agent.fg",
    async run(rc, ctx) {
      const [first] = await rc.inputs();
      const text = (first!.input as In).text;
      if (text === "hang") await ctx.waitForEvent(`never:${ctx.taskId}`, { timeoutMs: 600_000 });
      if (!text.startsWith("delegate:"))
        return rc.answer({ kind: "assistant", data: { text: `answer to ${text}` } });
      const [out] = await calls.runRound(
        ctx,
        [{ callId: "sub-1", tool: "helper", args: { prompt: text.slice(9) } }],
        {
          cwd: "/tmp",
          conversationId: rc.conversationId,
        },
      );
      await rc.answer({ kind: "assistant", data: { text: `parent got: ${out!.result.content}` } });
    },
  });
  return { run, calls, sub, bind: (c: Conversations) => (conv = c) };
}

forEachBackend(() => {
  describe("subagents (spec §19.13–§19.14)", () => {
    it("§19.13 a foreground subagent runs a child conversation owned by the call and answers with its final answer", async () => {
      const { run, calls, bind } = setup(false);
      const r = await openRatchet([run.task, calls.task], { pollIntervalMs: 20 });
      const c = bind(new Conversations(r, { run }));
      await r.start({ concurrency: 4 });
      onCleanup(() => r.stop());
      await c.create("p1");
      const s = await c.submit("p1", { text: "delegate:what is 2+2" });
      const settled = await s.wait({ timeoutMs: 30_000 });
      expect(settled.status).toBe("done");
      const entries = await c.entries("p1");
      expect(entries.at(-1)!.data).toEqual({ text: "parent got: answer to what is 2+2" });
      const children = (await r.store.conversations.listConversations({ limit: 10 })).filter(
        (x) => x.id !== "p1",
      );
      expect(children).toHaveLength(1);
      const child = children[0]!;
      expect(child.id).toMatch(/^p1:helper:\d+$/);
      // Owned by the call's task: the call task is a child of the parent's run.
      const owner = await r.get(child.ownerTaskId!);
      expect(owner!.spawnName).toBe("tool:sub-1");
      expect((await c.entries(child.id)).map((e) => e.kind)).toEqual(["user", "assistant"]);
    });

    it("§19.13 aborting the parent aborts the foreground child's run", async () => {
      const { run, calls, bind } = setup(false);
      const r = await openRatchet([run.task, calls.task], { pollIntervalMs: 20, maintenanceIntervalMs: 20 });
      const c = bind(new Conversations(r, { run }));
      // Driven by ticks: the parent's run, its call and the child's run come to exist; the child waits for ever.
      await c.create("p2");
      await c.submit("p2", { text: "delegate:hang" });
      const kid = async () =>
        (await r.store.conversations.listConversations({ limit: 10 })).find((x) => x.id !== "p2");
      await until(async () => {
        await drain(r);
        const k = await kid();
        const run = k ? (await c.get(k.id))?.runTaskId : null;
        return run ? (await r.get(run))?.status === "waiting" : false;
      }, "the child's run to wait");
      const child = (await kid())!;
      const childRun = (await c.get(child.id))!.runTaskId!;
      expect(childRun).not.toBeNull();
      // A worker runs the abort: handlers bottom-up, the child's run first.
      await r.start({ concurrency: 4 });
      onCleanup(() => r.stop());
      await c.abort("p2", { timeoutMs: 20_000 });
      expect((await r.get(childRun))!.outcome).toBe("aborted");
    });

    it("§19.14 a background subagent answers the call at once and posts its answer to the parent once, as a follow-up", async () => {
      const { run, calls, sub, bind } = setup(true);
      const r = await openRatchet([run.task, calls.task, sub.task!], { pollIntervalMs: 20 });
      const c = bind(new Conversations(r, { run }));
      await r.start({ concurrency: 4 });
      onCleanup(() => r.stop());
      await c.create("p3");
      const s = await c.submit("p3", { text: "delegate:research" });
      expect((await s.wait({ timeoutMs: 30_000 })).status).toBe("done");
      const first = (await c.entries("p3")).find((e) => e.kind === "assistant")!;
      expect((first.data as { text: string }).text).toMatch(
        /^parent got: started background subagent p3:helper:\d+/,
      );
      // The child's answer arrives as a follow-up: a new run of the parent answers it.
      const all = await until(async () => {
        const e = await c.entries("p3");
        return e.filter((x) => x.kind === "assistant").length === 2 ? e : null;
      }, "the follow-up's answer");
      const users = all
        .filter((e) => e.kind === "user")
        .map((e) => e.data as { text: string; from?: string });
      expect(users).toHaveLength(2);
      expect(users[1]).toMatchObject({
        text: "answer to research",
        from: expect.stringMatching(/^p3:helper:/),
      });
      const children = (await r.store.conversations.listConversations({ limit: 10 })).filter(
        (x) => x.id !== "p3",
      );
      expect(children[0]!.ownerTaskId).toBeNull();
      await c.waitForIdle("p3", { timeoutMs: 20_000 });
      expect((await c.entries("p3")).filter((e) => e.kind === "user")).toHaveLength(2);
      void calls;
    });
  });
});
