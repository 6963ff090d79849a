/**
 * The conversation page's tree of tool calls and subagents (spec §19.33), in Chromium: an agent's
 * round runs a tool and a foreground subagent whose own round runs the tool again; while the tools
 * hold, the tree beside the transcript shows each call and the subagent nested under its call, each
 * running, with its live output; when they end, their statuses turn and the tree stays as the last run.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineAgent } from "../../src/agent/agent.js";
import { Conversations, defineSubagent, defineTool, defineToolCalls } from "../../src/agent/index.js";
import { fauxModel } from "../../src/models/index.js";
import { deferred, onCleanup, openRatchet, until } from "../engine/helpers.js";
import { openPage, useChromium } from "./kit.js";

useChromium();

function lastUserText(prompt: readonly { role: string; content: unknown }[]): string {
  const users = prompt.filter((m) => m.role === "user");
  const u = users[users.length - 1] as { content: { type: string; text?: string }[] } | undefined;
  return u?.content.map((p) => p.text ?? "").join("") ?? "";
}

describe("dashboard: a conversation's tool calls and subagents", () => {
  it("§19.33 the run's calls and subagents show as a live tree beside the transcript, each with its status and output", async () => {
    const hold = deferred();
    onCleanup(() => hold.resolve());
    let conversations!: Conversations;
    const slow = defineTool({
      name: "slow",
      description: "works until the test lets it finish",
      schema: z.object({ label: z.string() }),
      replay: "safe",
      async execute(ctx, a) {
        ctx.output(`working on ${a.label}\n`);
        await hold.promise;
        return `finished ${a.label}`;
      },
    });
    const helper = defineSubagent({
      name: "ask_helper",
      description: "asks a helper agent",
      conversations: () => conversations,
    });
    const calls = defineToolCalls({ tools: [slow, helper.tool] });
    const model = fauxModel({
      scripts: (_n, call) => {
        const prompt = call.prompt as { role: string; content: unknown }[];
        if (prompt[prompt.length - 1]?.role === "tool") return { text: "all done" };
        return lastUserText(prompt) === "help me"
          ? { toolCalls: [{ id: "t2", name: "slow", input: { label: "B" } }] }
          : {
              toolCalls: [
                { id: "t1", name: "slow", input: { label: "A" } },
                { id: "s1", name: "ask_helper", input: { prompt: "help me" } },
              ],
            };
      },
    });
    const agent = defineAgent({ name: "dash.agent", model, tools: calls, cwd: "/tmp" });
    const r = await openRatchet([agent.task, calls.task], { pollIntervalMs: 20, streamIntervalMs: 10 });
    conversations = new Conversations(r, { run: agent });
    await r.start({ concurrency: 8, serve: { port: 0 } });
    onCleanup(() => r.stop());
    await conversations.create("tree-1");
    const sub = await conversations.submit("tree-1", { text: "go" });
    const runId = await until(async () => (await conversations.get("tree-1"))?.runTaskId ?? null, "the run");

    const { page, problems } = await openPage();
    await page.goto(`${r.serving()!}/#/conversations/tree-1`);
    const side = page.locator("[data-section=live-output] [data-section=agent-tree]");
    const root = side.locator(`[data-agent-node="${runId}"][data-kind=run]`);
    await root.waitFor();
    // The two calls of the round, running, each with its own live output.
    const toolA = root.locator("[data-kind=tool]", { hasText: '"label":"A"' }).first();
    await toolA
      .locator("[data-stream=output] [data-field=stream-text]", { hasText: "working on A" })
      .waitFor();
    expect(await toolA.getAttribute("data-status")).toBe("running");
    const subCall = root.locator("[data-kind=tool]", { hasText: "ask_helper" }).first();
    // The subagent's run nests under its call, and its own call under it, live too.
    const child = subCall.locator("[data-kind=subagent]").first();
    await child.waitFor();
    expect(await child.textContent()).toContain("subagent");
    const toolB = child.locator("[data-kind=tool]", { hasText: '"label":"B"' }).first();
    await toolB
      .locator("[data-stream=output] [data-field=stream-text]", { hasText: "working on B" })
      .waitFor();
    expect(await toolB.getAttribute("data-status")).toBe("running");
    expect(await page.locator("[data-section=transcript] [data-kind=assistant]").count()).toBeGreaterThan(0);

    hold.resolve();
    expect((await sub.wait({ timeoutMs: 20_000 })).status).toBe("done");
    // The run ended: the tree stays, as the last run, every call completed.
    await side.locator(`[data-agent-node="${runId}"][data-outcome=completed]`).waitFor();
    await toolA.and(page.locator("[data-outcome=completed]")).waitFor();
    await toolB.and(page.locator("[data-outcome=completed]")).waitFor();
    await page.locator("[data-section=transcript] [data-kind=assistant]", { hasText: "all done" }).waitFor();
    expect(problems).toEqual([]);
  });
});
