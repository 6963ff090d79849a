/** Extensions installed, replaced and removed at run time (spec §19.23–§19.24), faux model, both stores. */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineAgent } from "../../src/agent/agent.js";
import { setAgentConfig } from "../../src/agent/config.js";
import { createExtensions, defineExtension, type Extensions, section } from "../../src/agent/extensions.js";
import { Conversations } from "../../src/agent/index.js";
import { defineTool } from "../../src/agent/tools/define.js";
import { defineTask } from "../../src/engine/definition.js";
import { fauxModel } from "../../src/models/faux.js";
import type { ModelPrompt } from "../../src/models/stream.js";
import { drain, expectCode, forEachBackend, openRatchet } from "../engine/helpers.js";

const ranBy: string[] = [];
function greetTool(version: string) {
  return defineTool({
    name: "greet",
    description: `greet (${version})`,
    schema: z.object({}),
    replay: "safe",
    execute: () => {
      ranBy.push(version);
      return `hello from ${version}`;
    },
  });
}
const greetExt = (version: string, hooks = {}) =>
  defineExtension({
    name: "greeter",
    tools: [greetTool(version)],
    sections: [section("greeting", () => `Greet as ${version}.`)],
    hooks,
  });

const systems = (p: ModelPrompt) => p.filter((m) => m.role === "system").map((m) => m.content as string);
const offered = (call: { tools?: { name: string }[] }) => (call.tools ?? []).map((t) => t.name);

/** A model that calls `greet` once per user message, then answers; records what each request offered. */
function world(ext: Extensions) {
  const seen: { tools: string[]; system: string[]; reasoning?: string }[] = [];
  const model = fauxModel({
    scripts: (_n, call) => {
      seen.push({
        tools: offered(call as never),
        system: systems(call.prompt),
        ...(call.reasoning ? { reasoning: call.reasoning } : {}),
      });
      return call.prompt.some((m) => m.role === "tool") || offered(call as never).length === 0
        ? { text: "done" }
        : { toolCalls: [{ id: `g${seen.length}`, name: "greet", input: {} }] };
    },
  });
  const agent = defineAgent({ name: "agent.ext", model, extensions: ext, cwd: "/tmp" });
  return { agent, model, seen };
}

async function converse(
  c: Conversations,
  r: Awaited<ReturnType<typeof openRatchet>>,
  id: string,
  text: string,
) {
  await c.submit(id, { text });
  for (let i = 0; i < 10 && (await c.get(id))!.runTaskId !== null; i++) await drain(r);
  return c.entries(id, { limit: 1_000 });
}

forEachBackend(() => {
  describe("extensions (spec §19.23–§19.24)", () => {
    it("§19.24 an installed extension's tool is offered and runs as a tool call; removed, it leaves the next request", async () => {
      ranBy.length = 0;
      const ext = createExtensions([greetExt("v1")]);
      const w = world(ext);
      const r = await openRatchet([w.agent.task]);
      const c = new Conversations(r, { run: w.agent });
      await c.create("e1");
      const entries = await converse(c, r, "e1", "hi");
      expect(ranBy).toEqual(["v1"]);
      expect(
        entries.filter((e) => e.kind === "tool-result").map((e) => (e.data as { content: string }).content),
      ).toEqual(["hello from v1"]);
      expect(w.seen[0]!.tools).toEqual(["greet"]);
      expect(w.seen[0]!.system).toEqual([
        "<greeting>\nGreet as v1.\n</greeting>\n\n<environment>\nWorking directory: /tmp\n</environment>",
      ]);
      expect(ext.remove("greeter")).toBe(true);
      await converse(c, r, "e1", "again");
      expect(w.seen.at(-1)!.tools).toEqual([]);
      expect(ranBy).toEqual(["v1"]);
    });

    it("§19.24 a replacement installed mid-turn takes effect at the next turn, not the current one", async () => {
      ranBy.length = 0;
      const ext = createExtensions();
      // Installed while turn 0 runs (its afterResponse): turn 0 keeps v1's prompt and hooks, turn 1 sees v2.
      ext.install(greetExt("v1", { afterResponse: () => void ext.install(greetExt("v2")) }));
      const w = world(ext);
      const r = await openRatchet([w.agent.task]);
      const c = new Conversations(r, { run: w.agent });
      await c.create("e2");
      await converse(c, r, "e2", "hi");
      // spec §19.25: turn 1 reads the baseline turn 0 was shown, then only the changed section.
      const baseline =
        "<greeting>\nGreet as v1.\n</greeting>\n\n<environment>\nWorking directory: /tmp\n</environment>";
      expect(w.seen.map((s) => s.system)).toEqual([
        [baseline],
        [baseline, "<greeting>\nGreet as v2.\n</greeting>"],
      ]);
      expect(ext.get("greeter")!.tools![0]!.description).toBe("greet (v2)");
      expect(ext.snapshot()).toHaveLength(1);
    });

    it("§19.24 a conversation selects extensions by name and a thinking level, stored with it", async () => {
      const other = defineExtension({ name: "other", sections: [section("other", () => "Other rules.")] });
      const ext = createExtensions([greetExt("v1"), other]);
      const w = world(ext);
      const r = await openRatchet([w.agent.task]);
      const c = new Conversations(r, { run: w.agent });
      await c.create("e3");
      await setAgentConfig(c, "e3", { extensions: ["other", "missing"], thinking: "high" });
      await converse(c, r, "e3", "hi");
      expect(w.seen[0]).toEqual({
        tools: [],
        system: ["<other>\nOther rules.\n</other>"],
        reasoning: "high",
      });
      expect((await c.state("e3")).agent).toEqual({ extensions: ["other", "missing"], thinking: "high" });
      await expectCode(() => setAgentConfig(c, "e3", { thinking: "very" as never }), "RATCHET_INVALID_INPUT");
    });

    it("§19.24 an extension's tasks are registered with the engine; removed, they are unregistered; a task name two extensions claim is refused", async () => {
      const job = defineTask<{ n: number }, number>({ name: "ext.job", run: (_c, i) => i.n * 2 });
      const withTask = defineExtension({ name: "jobs", tasks: [job] });
      const ext = createExtensions([withTask]);
      const w = world(ext);
      const r = await openRatchet([w.agent.task]);
      new Conversations(r, { run: w.agent });
      expect(r.definitions().map((d) => d.name)).toContain("ext.job");
      const id = await r.enqueue("ext.job", { n: 21 });
      await drain(r);
      expect((await r.get(id))!.result).toBe(42);
      expect(() => ext.install(defineExtension({ name: "clash", tasks: [job] }))).toThrow(
        /already extension "jobs"/,
      );
      expect(ext.get("clash")).toBeUndefined();
      ext.remove("jobs");
      expect(r.definitions().map((d) => d.name)).not.toContain("ext.job");
    });

    it("§19.23 a bad extension is RATCHET_CONFIG at once", async () => {
      const t = greetTool("x");
      await expectCode(() => defineExtension({ name: "Bad Name" }), "RATCHET_CONFIG");
      await expectCode(() => defineExtension({ name: "dup", tools: [t, t] }), "RATCHET_CONFIG");
      await expectCode(
        () => defineExtension({ name: "res", sections: [section("instructions", () => "x")] }),
        "RATCHET_CONFIG",
      );
      await expectCode(() => section("Bad Key", () => "x"), "RATCHET_CONFIG");
    });
  });
});
