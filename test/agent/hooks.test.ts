/** Hooks of the agent loop and a tool's control.terminate (spec §19.21), faux model, both stores. */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineAgent } from "../../src/agent/agent.js";
import type { AgentHooks } from "../../src/agent/hooks.js";
import { Conversations } from "../../src/agent/index.js";
import { defineToolCalls } from "../../src/agent/tools/calls.js";
import { defineTool } from "../../src/agent/tools/define.js";
import { fauxModel } from "../../src/models/faux.js";
import { drain, forEachBackend, openRatchet } from "../engine/helpers.js";

const seen: unknown[] = [];
const echo = defineTool({
  name: "echo",
  description: "echo",
  schema: z.object({ text: z.string() }),
  replay: "safe",
  execute: (_c, a) => {
    seen.push(a.text);
    return a.text === "stop" ? { content: "stopping", control: { terminate: true } } : `echo ${a.text}`;
  },
});

function world(calls: { name: string; input: unknown }[], hooks: AgentHooks | (() => AgentHooks)) {
  const model = fauxModel({
    scripts: (_n, call) =>
      call.prompt.some((m) => m.role === "tool")
        ? { text: "final" }
        : { text: "calling", toolCalls: calls.map((c, i) => ({ id: `c${i}`, ...c })) },
  });
  const tools = defineToolCalls({ tools: [echo] });
  const agent = defineAgent({ name: "agent.hooked", model, tools, cwd: "/tmp", hooks });
  return { model, tools, agent };
}

async function converse(w: ReturnType<typeof world>, text = "go") {
  const r = await openRatchet([w.agent.task, w.tools.task]);
  const c = new Conversations(r, { run: w.agent });
  await c.create("h1");
  await c.submit("h1", { text });
  for (let i = 0; i < 10 && (await c.get("h1"))!.runTaskId !== null; i++) await drain(r);
  return { r, c, entries: await c.entries("h1") };
}

forEachBackend(() => {
  describe("agent hooks (spec §19.21)", () => {
    it("§19.21 beforeRequest replaces the prompt; afterResponse sees each answer", async () => {
      const answers: string[] = [];
      const w = world([{ name: "echo", input: { text: "a" } }], {
        beforeRequest: ({ prompt }) => [{ role: "system", content: "HOOKED RULES" }, ...prompt],
        afterResponse: ({ result }) => void answers.push(result.text),
      });
      await converse(w);
      expect(w.model.prompts.every((p) => p[0]?.role === "system" && p[0].content === "HOOKED RULES")).toBe(
        true,
      );
      expect(answers).toEqual(["calling", "final"]);
    });

    it("§19.21 beforeTool vetoes a call (never run, the model reads why) or rewrites its arguments; afterTool replaces a result", async () => {
      seen.length = 0;
      const w = world(
        [
          { name: "echo", input: { text: "rm -rf" } },
          { name: "echo", input: { text: "lower" } },
        ],
        {
          beforeTool: ({ call }) => {
            const t = (call.args as { text: string }).text;
            if (t === "rm -rf") return { veto: "not allowed here" };
            return { args: { text: t.toUpperCase() } };
          },
          afterTool: ({ result }) =>
            typeof result.content === "string"
              ? { ...result, content: `${result.content} (checked)` }
              : undefined,
        },
      );
      const { entries } = await converse(w);
      expect(seen).toEqual(["LOWER"]);
      const results = entries.filter((e) => e.kind === "tool-result").map((e) => e.data);
      expect(results).toEqual([
        { callId: "c0", tool: "echo", content: "not run: not allowed here (checked)", isError: true },
        { callId: "c1", tool: "echo", content: "echo LOWER (checked)" },
      ]);
      expect(JSON.stringify(w.model.prompts[1])).toContain("echo LOWER (checked)");
    });

    it("§19.21 a tool's control.terminate ends the run after its round, without another request", async () => {
      const w = world([{ name: "echo", input: { text: "stop" } }], {});
      const { entries } = await converse(w);
      expect(w.model.calls).toBe(1);
      expect(entries.at(-1)!.data).toEqual({ text: "calling", terminatedBy: "echo" });
    });

    it("§19.21 hooks given as a function are read once per turn: a replacement takes effect at the next turn", async () => {
      const second: AgentHooks = {
        beforeRequest: ({ prompt }) => [{ role: "system", content: "SECOND" }, ...prompt],
      };
      let current: AgentHooks = {
        beforeRequest: ({ prompt }) => [{ role: "system", content: "FIRST" }, ...prompt],
        // Replaced while turn 0 runs: turn 1 sees the new hooks.
        afterResponse: () => {
          current = second;
        },
      };
      const w = world([{ name: "echo", input: { text: "x" } }], () => current);
      await converse(w);
      expect(w.model.prompts.map((p) => (p[0] as { content: string }).content)).toEqual(["FIRST", "SECOND"]);
    });

    it("§19.21 beforeCompact returning false skips a compaction", async () => {
      const model = fauxModel({ scripts: [{ text: "hi" }] });
      const agent = defineAgent({ name: "agent.nocompact", model, hooks: { beforeCompact: () => false } });
      const r = await openRatchet([agent.task]);
      const c = new Conversations(r, { run: agent });
      await c.create("n1");
      await c.submit("n1", { text: "one" });
      await drain(r);
      await c.submit("n1", { type: "compact" });
      for (let i = 0; i < 5 && (await c.get("n1"))!.runTaskId !== null; i++) await drain(r);
      const last = (await c.entries("n1")).at(-1)!;
      expect([last.kind, last.data]).toEqual(["custom", { applied: false, reason: "skipped" }]);
      expect(model.calls).toBe(1);
    });
  });
});
