/**
 * defineAgent's turns against the engine's rules, on SQLite and PostgreSQL: steers at the boundary
 * (spec §19.15), abort mid-stream (spec §17.8, §18.4), a provider's 429 deferring the run
 * (spec §14.8, §14.5), the provider session per conversation (spec §18.7) and fairness across
 * tenants (spec §14.12, §19.15).
 */
import type { LanguageModelV4CallOptions } from "@ai-sdk/provider";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineAgent } from "../../src/agent/agent.js";
import { Conversations } from "../../src/agent/index.js";
import { defineToolCalls } from "../../src/agent/tools/calls.js";
import { defineTool } from "../../src/agent/tools/define.js";
import { fauxModel } from "../../src/models/faux.js";
import { deferred, drain, forEachBackend, openRatchet, until } from "../engine/helpers.js";

const userTexts = (prompt: LanguageModelV4CallOptions["prompt"]) =>
  prompt.flatMap((m) =>
    m.role === "user" ? m.content.flatMap((p) => (p.type === "text" ? [p.text] : [])) : [],
  );

forEachBackend(() => {
  describe("an agent's turns (spec §19.15, §18.7)", () => {
    it("§19.15 a steer submitted while a turn's tool round runs is delivered at the boundary and is in the next request's prompt", async () => {
      const entered = deferred();
      const release = deferred();
      const wait = defineTool({
        name: "wait",
        description: "waits until the test lets it go",
        schema: z.object({}),
        replay: "safe",
        async execute() {
          entered.resolve();
          await release.promise;
          return "waited";
        },
      });
      const model = fauxModel({
        scripts: [
          { text: "Waiting.", toolCalls: [{ id: "w1", name: "wait", input: {} }] },
          { text: "Done." },
        ],
      });
      const tools = defineToolCalls({ tools: [wait] });
      const agent = defineAgent({ name: "agent.steered", model, tools, cwd: "/tmp" });
      const r = await openRatchet([agent.task, tools.task]);
      const c = new Conversations(r, { run: agent });
      await c.create("s1");
      const first = await c.submit("s1", { text: "start" });
      await r.start();
      await entered.promise;
      const steer = await c.submit("s1", { text: "also check the logs" }, { whenBusy: "steer" });
      expect(model.calls).toBe(1);
      release.resolve();
      expect((await first.wait({ timeoutMs: 10_000 })).status).toBe("done");
      expect((await steer.wait({ timeoutMs: 10_000 })).status).toBe("done");
      expect(model.calls).toBe(2);
      // The first request had no steer; the second has it, after the tool round's result.
      expect(userTexts(model.prompts[0]!)).toEqual(["start"]);
      expect(userTexts(model.prompts[1]!)).toEqual(["start", "also check the logs"]);
      // The leading system message is the environment section (spec §19.25), written once.
      expect(model.prompts[1]!.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "user"]);
      const kinds = (await c.entries("s1")).map((e) => e.kind);
      expect(kinds).toEqual(["user", "system", "assistant", "tool-result", "user", "assistant"]);
    });

    it("§17.8 abort mid-stream cancels the in-flight request (its AbortSignal fires) and the run ends aborted", async () => {
      const signals: AbortSignal[] = [];
      const streaming = deferred();
      const model = fauxModel({
        scripts: (_n, call) => {
          if (call.abortSignal) signals.push(call.abortSignal);
          streaming.resolve();
          return { text: "a long answer ".repeat(500), chunkChars: 4, tokensPerSecond: 20 };
        },
      });
      const agent = defineAgent({ name: "agent.aborted", model });
      const r = await openRatchet([agent.task]);
      const c = new Conversations(r, { run: agent });
      await c.create("x1");
      const s = await c.submit("x1", { text: "talk" });
      await r.start();
      await streaming.promise;
      const runId = (await c.get("x1"))!.runTaskId!;
      // Some text streamed before the abort: the request is in flight, not yet answered.
      await until(async () => (await r.store.readStream(runId, "turn-0", 0)).chunks.length > 2, "partials");
      expect(signals).toHaveLength(1);
      expect(signals[0]!.aborted).toBe(false);
      await c.abort("x1", { timeoutMs: 10_000 });
      expect(signals[0]!.aborted).toBe(true);
      expect(await r.get(runId)).toMatchObject({ status: "terminal", outcome: "aborted" });
      expect((await s.wait({ timeoutMs: 10_000 })).status).not.toBe("done");
      expect(model.calls).toBe(1);
      // No assistant entry was committed for the cancelled answer.
      expect((await c.entries("x1")).map((e) => e.kind)).toEqual(["user"]);
    });

    it("§14.8 a provider's 429 with retry-after defers the run, gives the attempt back, and explain says it backs off until then", async () => {
      const model = fauxModel({
        scripts: [{ error: { status: 429, retryAfterSeconds: 120 } }, { text: "Now I can." }],
      });
      const agent = defineAgent({ name: "agent.limited", model });
      const r = await openRatchet([agent.task]);
      const c = new Conversations(r, { run: agent });
      await c.create("l1");
      await c.submit("l1", { text: "hi" });
      const runId = (await c.get("l1"))!.runTaskId!;
      const before = Date.now();
      await drain(r);
      expect(model.calls).toBe(1);
      const t = (await r.get(runId))!;
      expect(t.status).toBe("waiting");
      expect(t.attempts).toBe(0);
      const e = await r.explain(runId);
      expect(e.reason).toMatchObject({ kind: "backoff", rateLimited: true });
      const until_ = (e.reason as { until: number }).until;
      expect(until_).toBeGreaterThanOrEqual(before + 119_000);
      expect(e.text).toContain("deferred by a rate limit");
      expect(e.text).toContain(new Date(until_).toISOString());
      // Not due yet: a tick requests nothing.
      await drain(r);
      expect(model.calls).toBe(1);
    });

    it("§18.7 each conversation is its own provider session: a fork has a fresh one", async () => {
      const model = fauxModel({ scripts: [{ text: "ok" }] });
      const agent = defineAgent({ name: "agent.sessions", model });
      const r = await openRatchet([agent.task]);
      const c = new Conversations(r, { run: agent });
      await c.create("p1");
      await c.submit("p1", { text: "one" });
      await drain(r);
      const fork = await c.fork("p1", 0, { id: "p1-fork" });
      await c.submit(fork.id, { text: "two" });
      await drain(r);
      expect(model.sessions).toEqual(["p1", "p1-fork"]);
    });
  });

  describe("fairness for agent runs (spec §14.12, §19.15)", () => {
    it("§14.12 an agent's runs carry fairness: a small tenant's run is claimed before a big tenant's backlog", async () => {
      const order: string[] = [];
      const model = fauxModel({
        scripts: (_n, call) => {
          order.push(userTexts(call.prompt)[0]!);
          return { text: "ok" };
        },
      });
      const agent = defineAgent({
        name: "agent.fair",
        model,
        fairness: { key: (i) => i.conversationId.split(":")[0]! },
      });
      expect(agent.task.gates?.fair).toBeDefined();
      const r = await openRatchet([agent.task]);
      const c = new Conversations(r, { run: agent });
      for (let i = 0; i < 4; i++) {
        await c.create(`big:${i}`);
        await c.submit(`big:${i}`, { text: `big ${i}` });
      }
      await c.create("small:0");
      await c.submit("small:0", { text: "small 0" });
      // One claim per tick, so the claim order is the request order.
      await until(async () => {
        await r.tick({ budgetMs: 3_600_000, concurrency: 1, max: 1 });
        return order.length >= 5;
      }, "every run");
      // Without fairness the small tenant's run would be last (enqueue order).
      expect(order.indexOf("small 0")).toBeLessThan(4);
      expect(order.slice(0, 2)).toEqual(["big 0", "small 0"]);
    });
  });
});

describe("defineAgent's gates (spec §19.15)", () => {
  it("§19.15 bad fairness refuses the definition", () => {
    const model = fauxModel({ scripts: [{ text: "ok" }] });
    expect(() => defineAgent({ name: "agent.badfair", model, fairness: { key: 5 as never } })).toThrow(
      /fairness/,
    );
  });
});
