/** defineAgent: the agent loop over a faux model, tools as child tasks (spec §19.15–§19.16), both stores. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type AssistantData, defineAgent, promptOf } from "../../src/agent/agent.js";
import { Conversations } from "../../src/agent/index.js";
import { defineToolCalls } from "../../src/agent/tools/calls.js";
import { readTool } from "../../src/agent/tools/files.js";
import { fauxModel } from "../../src/models/faux.js";
import { drain, forEachBackend, openRatchet } from "../engine/helpers.js";
import { entryRecord } from "./fixtures.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

forEachBackend(() => {
  describe("the agent loop (spec §19.15–§19.16)", () => {
    it("§19.15 a turn asks for a tool, the round runs it, the next turn answers; the transcript and the prompts say so", async () => {
      const cwd = mkdtempSync(join(tmpdir(), "ratchet-agent-"));
      dirs.push(cwd);
      writeFileSync(join(cwd, "notes.txt"), "the answer is 42");
      const model = fauxModel({
        scripts: [
          { text: "Let me look.", toolCalls: [{ id: "call_1", name: "read", input: { path: "notes.txt" } }] },
          { text: "The notes say 42." },
        ],
      });
      const tools = defineToolCalls({ tools: [readTool] });
      const agent = defineAgent({ name: "agent.reader", model, tools, cwd, instructions: "Be brief." });
      const r = await openRatchet([agent.task, tools.task]);
      const c = new Conversations(r, { run: agent });
      await c.create("a1");
      const s = await c.submit("a1", { text: "What do my notes say?" });
      for (let i = 0; i < 10 && (await c.get("a1"))!.runTaskId !== null; i++) await drain(r);
      expect((await s.wait({ timeoutMs: 10_000 })).status).toBe("done");
      const t = (await c.entries("a1")).map((e) => [e.kind, e.data]);
      // spec §19.25: the sections shown (environment, instructions) are a system entry before the first turn.
      expect(t.map(([k]) => k)).toEqual(["user", "system", "assistant", "tool-result", "assistant"]);
      expect((t[2]![1] as AssistantData).toolCalls).toEqual([
        { id: "call_1", name: "read", input: { path: "notes.txt" } },
      ]);
      expect(t[3]![1]).toEqual({ callId: "call_1", tool: "read", content: "the answer is 42" });
      expect((t[4]![1] as AssistantData).text).toBe("The notes say 42.");
      expect(model.calls).toBe(2);
      // The second request carried the tool's result after the call that asked for it.
      const second = model.prompts[1]!;
      expect(second.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
      expect(second[3]).toMatchObject({
        content: [{ toolCallId: "call_1", output: { value: "the answer is 42" } }],
      });
      // Replaying the finished run requests nothing again.
      await drain(r);
      expect(model.calls).toBe(2);
    });

    it("§19.15 a turn that asks for tools an agent does not have ends with a clear error entry; maxTurns bounds a loop", async () => {
      const asks = fauxModel({
        scripts: [{ toolCalls: [{ id: "x", name: "bash", input: { command: "ls" } }] }],
      });
      const bare = defineAgent({ name: "agent.bare", model: asks });
      const loops = fauxModel({ scripts: [{ toolCalls: [{ name: "read", input: { path: "." } }] }] });
      const tools = defineToolCalls({ tools: [readTool] });
      const looping = defineAgent({ name: "agent.loop", model: loops, tools, cwd: "/tmp", maxTurns: 3 });
      const r = await openRatchet([bare.task, looping.task, tools.task]);
      const c1 = new Conversations(r, { run: bare });
      await c1.create("b1");
      await c1.submit("b1", { text: "list" });
      await drain(r);
      const last = (await c1.entries("b1")).at(-1)!;
      expect((last.data as AssistantData).error).toBe(
        "the model asked for bash, but this agent has no tools",
      );
      const c2 = new Conversations(r, { run: looping });
      await c2.create("l1");
      await c2.submit("l1", { text: "go" });
      for (let i = 0; i < 20 && (await c2.get("l1"))!.runTaskId !== null; i++) await drain(r);
      const entries = await c2.entries("l1");
      expect((entries.at(-1)!.data as AssistantData).error).toBe("stopped after 3 turns (maxTurns)");
      expect(loops.calls).toBe(3);
    });
  });
});

describe("the agent's prompt (spec §19.16)", () => {
  const e = entryRecord;
  it("§19.16 a call without a committed result gets a synthesized error result; results merge into one tool message", () => {
    const p = promptOf("sys", [
      e(0, "user", { text: "hi" }),
      e(1, "assistant", {
        text: "",
        toolCalls: [
          { id: "a", name: "read", input: {} },
          { id: "b", name: "ls", input: {} },
        ],
      }),
      e(2, "tool-result", { callId: "a", tool: "read", content: "A" }),
      e(3, "user", { text: "steer" }),
      e(4, "tool-result", { callId: "zz", tool: "x", content: "orphan" }),
      e(5, "custom", { anything: 1 }),
    ]);
    expect(p.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "tool", "user"]);
    expect(p[3]).toMatchObject({ content: [{ toolCallId: "a", output: { value: "A" } }] });
    expect(p[4]).toMatchObject({
      content: [{ toolCallId: "b", output: { value: "error: no result was recorded for this call" } }],
    });
  });
});
