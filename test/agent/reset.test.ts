/** Reset and handoff (spec §19.26–§19.27): a fresh context, queued while busy; faux model, both stores. */
import type { LanguageModelV4CallOptions } from "@ai-sdk/provider";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineAgent } from "../../src/agent/agent.js";
import { Conversations } from "../../src/agent/index.js";
import { handoff, reset } from "../../src/agent/reset.js";
import { defineToolCalls } from "../../src/agent/tools/calls.js";
import { defineTool } from "../../src/agent/tools/define.js";
import { fauxModel } from "../../src/models/faux.js";
import { deferred, drain, expectCode, forEachBackend, openRatchet } from "../engine/helpers.js";

type Prompt = LanguageModelV4CallOptions["prompt"];
const userTexts = (p: Prompt) =>
  p.flatMap((m) => (m.role === "user" ? m.content.flatMap((x) => (x.type === "text" ? [x.text] : [])) : []));
const systems = (p: Prompt) => p.filter((m) => m.role === "system").map((m) => m.content);

/** An agent whose `wait` tool parks until released, so a test can act while the run is busy. */
function parked() {
  const entered = deferred();
  const release = deferred();
  const wait = defineTool({
    name: "wait",
    description: "waits",
    schema: z.object({}),
    replay: "safe",
    async execute() {
      entered.resolve();
      await release.promise;
      return "waited";
    },
  });
  const main = fauxModel({
    scripts: (_n, call) =>
      userTexts(call.prompt).includes("start") && !call.prompt.some((m) => m.role === "tool")
        ? { text: "Waiting.", toolCalls: [{ id: "w1", name: "wait", input: {} }] }
        : { text: `main answers ${userTexts(call.prompt).at(-1)}` },
  });
  const reviewer = fauxModel({
    scripts: (_n, call) => ({ text: `reviewer on ${userTexts(call.prompt).join("|")}` }),
  });
  const tools = defineToolCalls({ tools: [wait] });
  const agent = defineAgent({
    name: "agent.reset",
    model: main,
    models: { reviewer },
    tools,
    cwd: "/tmp",
    instructions: "main rules",
  });
  return { entered, release, main, reviewer, tools, agent };
}

/** A tool whose result hands the conversation over (spec §19.27) with `handoff`. */
function handoffTool(handoff: { note: string; config?: { model?: string } }) {
  return defineTool({
    name: "pass_on",
    description: "hand the task over",
    schema: z.object({}),
    replay: "safe",
    execute: () => ({ content: "handing over", control: { handoff } }),
  });
}

forEachBackend(() => {
  describe("reset and handoff (spec §19.26–§19.27)", () => {
    it("§19.26 a reset on an idle conversation starts a fresh context at once; its request id makes a repeat write nothing", async () => {
      const w = parked();
      const r = await openRatchet([w.agent.task, w.tools.task]);
      const c = new Conversations(r, { run: w.agent });
      await c.create("r1");
      await c.submit("r1", { text: "old question" });
      await drain(r);
      const first = await reset(c, "r1", { note: "we were fixing the login test", requestId: "rs-1" });
      await drain(r);
      const again = await reset(c, "r1", { note: "we were fixing the login test", requestId: "rs-1" });
      expect([again.created, again.id]).toEqual([false, first.id]);
      const settled = await first.wait({ timeoutMs: 10_000 });
      const entries = await c.entries("r1");
      expect(entries.filter((e) => e.kind === "reset")).toHaveLength(1);
      expect(settled).toMatchObject({
        status: "done",
        answerSeq: entries.find((e) => e.kind === "reset")!.seq,
      });
      expect(w.main.calls).toBe(1);
      await c.submit("r1", { text: "new question" });
      await drain(r);
      const p = w.main.prompts.at(-1)!;
      // The fresh context: a new baseline of sections, the note, the new question; nothing older.
      expect(systems(p)).toEqual(["<environment>\nWorking directory: /tmp\n</environment>\n\nmain rules"]);
      expect(userTexts(p)).toEqual([
        "[note kept from before the reset]\nwe were fixing the login test",
        "new question",
      ]);
      await expectCode(() => reset(c, "r1", { note: 42 as never }), "RATCHET_INVALID_INPUT");
    });

    it("§19.26 a reset submitted while a tool round runs is queued and applied at the boundary: the run ends with it, no further request", async () => {
      const w = parked();
      const r = await openRatchet([w.agent.task, w.tools.task]);
      const c = new Conversations(r, { run: w.agent });
      await c.create("r2");
      const first = await c.submit("r2", { text: "start" });
      await r.start();
      await w.entered.promise;
      const rs = await reset(c, "r2", { note: "fresh" });
      expect(rs.record.status).toBe("queued");
      // Nothing is cut mid-turn: the reset entry is not written while the round runs.
      expect((await c.entries("r2")).some((e) => e.kind === "reset")).toBe(false);
      w.release.resolve();
      const done = await first.wait({ timeoutMs: 10_000 });
      await rs.wait({ timeoutMs: 10_000 });
      const entries = await c.entries("r2");
      const head = entries.find((e) => e.kind === "reset")!;
      expect(done).toMatchObject({ status: "done", answerSeq: head.seq });
      expect(head.seq).toBeGreaterThan(entries.find((e) => e.kind === "tool-result")!.seq);
      expect(w.main.calls).toBe(1);
      expect(await c.context("r2")).toEqual([head]);
    });

    it("§19.27 a handoff submitted while busy switches the configuration at the boundary and the new agent answers the note in a fresh context", async () => {
      const w = parked();
      const r = await openRatchet([w.agent.task, w.tools.task]);
      const c = new Conversations(r, { run: w.agent });
      await c.create("h1");
      const first = await c.submit("h1", { text: "start" });
      await r.start();
      await w.entered.promise;
      await expectCode(() => handoff(c, "h1", { note: "" }), "RATCHET_INVALID_INPUT");
      await expectCode(() => handoff(c, "h1", { note: "x", config: { model: "" } }), "RATCHET_INVALID_INPUT");
      await handoff(c, "h1", {
        note: "review the change",
        config: { model: "reviewer", instructions: "review rules" },
        requestId: "h-1",
      });
      w.release.resolve();
      const done = await first.wait({ timeoutMs: 10_000 });
      expect(done.status).toBe("done");
      expect((await c.state("h1")).agent).toEqual({ model: "reviewer", instructions: "review rules" });
      expect(w.main.calls).toBe(1);
      expect(w.reviewer.calls).toBe(1);
      const p = w.reviewer.prompts[0]!;
      expect(userTexts(p)).toEqual(["review the change"]);
      expect(systems(p)).toEqual(["<environment>\nWorking directory: /tmp\n</environment>\n\nreview rules"]);
      const last = (await c.entries("h1")).at(-1)!;
      expect((last.data as { text: string }).text).toBe("reviewer on review the change");
    });

    it("§19.27 a tool result's control.handoff starts a fresh context after its round, under the configuration it names", async () => {
      const passOn = handoffTool({ note: "continue the refactor", config: { model: "reviewer" } });
      const main = fauxModel({ scripts: [{ toolCalls: [{ id: "p1", name: "pass_on", input: {} }] }] });
      const reviewer = fauxModel({
        scripts: (_n, call) => ({ text: `took over: ${userTexts(call.prompt).join("|")}` }),
      });
      const tools = defineToolCalls({ tools: [passOn] });
      const agent = defineAgent({
        name: "agent.handing",
        model: main,
        models: { reviewer },
        tools,
        cwd: "/tmp",
      });
      const r = await openRatchet([agent.task, tools.task]);
      const c = new Conversations(r, { run: agent });
      await c.create("h2");
      const s = await c.submit("h2", { text: "refactor it" });
      for (let i = 0; i < 10 && (await c.get("h2"))!.runTaskId !== null; i++) await drain(r);
      expect((await s.wait({ timeoutMs: 10_000 })).status).toBe("done");
      const kinds = (await c.entries("h2")).map((e) => e.kind);
      expect(kinds).toEqual(["user", "system", "assistant", "tool-result", "reset", "system", "assistant"]);
      expect((await c.entries("h2")).find((e) => e.kind === "reset")!.data).toEqual({
        text: "continue the refactor",
        reason: "handoff",
        by: "pass_on",
        config: { model: "reviewer" },
      });
      expect(reviewer.prompts[0]!.map((m) => m.role)).toEqual(["system", "user"]);
      expect(userTexts(reviewer.prompts[0]!)).toEqual(["continue the refactor"]);
    });

    it("§19.27 a tool's handoff with a bad configuration hands off without it, and its reset entry says why", async () => {
      const passOn = handoffTool({ note: "go on", config: { model: 42 } as never });
      const main = fauxModel({
        scripts: (_n, call) =>
          call.prompt.some((m) => m.role === "tool")
            ? { text: "unused" }
            : userTexts(call.prompt).includes("go on")
              ? { text: "main goes on" }
              : { toolCalls: [{ id: "p1", name: "pass_on", input: {} }] },
      });
      const tools = defineToolCalls({ tools: [passOn] });
      const agent = defineAgent({ name: "agent.badhand", model: main, tools, cwd: "/tmp" });
      const r = await openRatchet([agent.task, tools.task]);
      const c = new Conversations(r, { run: agent });
      await c.create("h3");
      const s = await c.submit("h3", { text: "refactor it" });
      for (let i = 0; i < 10 && (await c.get("h3"))!.runTaskId !== null; i++) await drain(r);
      expect((await s.wait({ timeoutMs: 10_000 })).status).toBe("done");
      const entries = await c.entries("h3");
      const data = entries.find((e) => e.kind === "reset")!.data as Record<string, unknown>;
      expect(data).toMatchObject({ text: "go on", reason: "handoff", by: "pass_on" });
      expect(data.config).toBeUndefined();
      expect(typeof data.configRefused).toBe("string");
      expect((data.configRefused as string).length).toBeGreaterThan(0);
      expect(entries.at(-1)).toMatchObject({ kind: "assistant" });
      expect(main.prompts.at(-1)!.some((m) => m.role === "tool")).toBe(false);
    });
  });
});
