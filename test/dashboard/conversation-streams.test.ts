/** The conversation page shows the running run's stream output live (spec §16.5, §17.11), in Chromium. */
import { describe, expect, it } from "vitest";
import { Conversations, defineRun } from "../../src/agent/index.js";
import { deferred, onCleanup, openRatchet, until } from "../engine/helpers.js";
import { openPage, useChromium } from "./kit.js";

useChromium();

describe("dashboard: a conversation's live output", () => {
  it("§16.5 §17.11 the run's tokens appear beside the transcript as they commit, before its answer", async () => {
    const more = deferred();
    onCleanup(() => more.resolve());
    const run = defineRun({
      name: "dash.streamer",
      async run(rc, ctx) {
        await rc.inputs();
        const out = await ctx.stream("answer");
        out.write("Thinking");
        out.write(" about it");
        await out.flush();
        await more.promise;
        out.write(" — done");
        await out.close();
        await rc.answer({ kind: "assistant", data: { text: "Thinking about it — done" } });
      },
    });
    const r = await openRatchet([run.task], { pollIntervalMs: 20, streamIntervalMs: 10 });
    const c = new Conversations(r, { run });
    await r.start({ concurrency: 2, serve: { port: 0 } });
    onCleanup(() => r.stop());
    const url = r.serving()!;
    await c.create("live-1");
    await c.submit("live-1", { text: "go" });
    const runId = await until(async () => (await c.get("live-1"))?.runTaskId ?? null, "the run to start");

    const { page, problems } = await openPage();
    await page.goto(`${url}/#/conversations/live-1`);
    const panel = page.locator(`[data-section=live-output] [data-task="${runId}"] [data-stream=answer]`);
    await panel.locator("[data-field=stream-text]", { hasText: "Thinking about it" }).waitFor();
    expect(await page.locator("[data-section=transcript] [data-kind=assistant]").count()).toBe(0);
    more.resolve();
    await page.locator("[data-section=transcript] [data-kind=assistant]").waitFor();
    expect(problems).toEqual([]);
  });
});
