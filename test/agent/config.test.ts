/** A conversation's own agent configuration (spec §19.22): model, instructions, tools, cwd; both stores. */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineAgent } from "../../src/agent/agent.js";
import { setAgentConfig } from "../../src/agent/config.js";
import { Conversations } from "../../src/agent/index.js";
import { defineToolCalls } from "../../src/agent/tools/calls.js";
import { defineTool } from "../../src/agent/tools/define.js";
import { fauxModel } from "../../src/models/faux.js";
import { drain, expectCode, forEachBackend, openRatchet } from "../engine/helpers.js";

forEachBackend(() => {
  describe("per-conversation agent configuration (spec §19.22)", () => {
    it("§19.22 a conversation's configuration chooses the model, instructions, tools and cwd from its next turn; a fork keeps it", async () => {
      const cwds: string[] = [];
      const where = defineTool({
        name: "where",
        description: "cwd",
        schema: z.object({}),
        replay: "safe",
        execute: (ctx) => {
          cwds.push(ctx.env.cwd);
          return ctx.env.cwd;
        },
      });
      const other = defineTool({
        name: "other",
        description: "o",
        schema: z.object({}),
        replay: "safe",
        execute: () => "x",
      });
      const script = (tag: string) =>
        fauxModel({
          modelId: tag,
          scripts: (_n, call) =>
            call.prompt[call.prompt.length - 1]?.role === "tool"
              ? { text: `${tag} done` }
              : {
                  toolCalls: [
                    { id: "w", name: "where", input: {} },
                    { id: "o", name: "other", input: {} },
                  ],
                },
        });
      const small = script("small");
      const large = script("large");
      const tools = defineToolCalls({ tools: [where, other] });
      const agent = defineAgent({
        name: "agent.cfg",
        model: small,
        models: { large },
        tools,
        cwd: "/tmp",
        instructions: "default rules",
      });
      const r = await openRatchet([agent.task, tools.task]);
      const c = new Conversations(r, { run: agent });
      await c.create("g1");
      const turn = async (id: string, text: string) => {
        await c.submit(id, { text });
        for (let i = 0; i < 10 && (await c.get(id))!.runTaskId !== null; i++) await drain(r);
      };
      await turn("g1", "first");
      expect([small.calls, large.calls]).toEqual([2, 0]);
      expect(small.calls).toBe(2);
      expect(small.prompts[0]![0]).toEqual({
        role: "system",
        content: "<environment>\nWorking directory: /tmp\n</environment>\n\ndefault rules",
      });
      await setAgentConfig(c, "g1", { model: "large", instructions: "be terse", tools: ["where"], cwd: "/" });
      await turn("g1", "second");
      expect(large.calls).toBe(2);
      // spec §19.25: only the changed sections are sent again, where the change stands.
      const systems = large.prompts[0]!.filter((m) => m.role === "system").map((m) => m.content);
      expect(systems).toEqual([
        "<environment>\nWorking directory: /tmp\n</environment>\n\ndefault rules",
        "<environment>\nWorking directory: /\n</environment>\n\nbe terse",
      ]);
      // Only the enabled tool is offered, and a call to another one is not run.
      expect(JSON.stringify(large.prompts[0])).not.toContain('"name":"other"');
      const results = (await c.entries("g1", { limit: 100 }))
        .filter((e) => e.kind === "tool-result")
        .map((e) => e.data);
      expect(results.slice(2)).toEqual([
        { callId: "w", tool: "where", content: "/" },
        {
          callId: "o",
          tool: "other",
          content: 'tool "other" is not enabled in this conversation',
          isError: true,
        },
      ]);
      expect(cwds).toEqual(["/tmp", "/"]);
      const fork = await c.fork("g1", (await c.get("g1"))!.length - 1, { id: "g1-fork" });
      expect((await c.state(fork.id)).agent).toEqual({
        model: "large",
        instructions: "be terse",
        tools: ["where"],
        cwd: "/",
      });
    });

    it("§19.22 a bad configuration is refused and writes nothing", async () => {
      const agent = defineAgent({ name: "agent.cfg2", model: fauxModel({ scripts: [{ text: "x" }] }) });
      const r = await openRatchet([agent.task]);
      const c = new Conversations(r, { run: agent });
      await c.create("g2");
      for (const bad of [{ model: "" }, { cwd: "relative" }, { tools: "read" }, { colour: "blue" }, null])
        await expectCode(() => setAgentConfig(c, "g2", bad as never), "RATCHET_INVALID_INPUT");
      expect(await c.state("g2")).toEqual({});
    });
  });
});
