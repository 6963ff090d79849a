/**
 * The dashboard's Conversations view (spec §17.11) in Chromium, against a worker that serves it:
 * the list, a transcript that follows the run, a steer sent from the page joining the run at its
 * boundary, the inbox, the run's task tree, and Abort.
 */
import { describe, expect, it } from "vitest";
import { makeRun, openConversations } from "../agent/fixtures.js";
import { onCleanup, openRatchet, until } from "../engine/helpers.js";
import { openPage, useChromium } from "./kit.js";

useChromium();

describe("dashboard conversations", () => {
  it("§17.11 list, live transcript, a steer sent from the page, the inbox, the run's tree and Abort", async () => {
    const run = makeRun("dash.run");
    const r = await openRatchet([run.task], { pollIntervalMs: 20 });
    const c = openConversations(r, run);
    await r.start({ concurrency: 2, serve: { port: 0 } });
    onCleanup(() => r.stop());
    const url = r.serving()!;
    await c.create("chat-1", { title: "First chat" });
    await c.submit("chat-1", { text: "A", park: true });
    const runId = await until(async () => {
      const conv = await c.get("chat-1");
      const t = conv?.runTaskId ? await r.get(conv.runTaskId) : null;
      return t?.status === "waiting" ? t.id : null;
    }, "the run parked");

    const { page, problems } = await openPage();
    await page.goto(`${url}/#/conversations`);
    await page.locator('tr[data-conversation="chat-1"]').waitFor();
    await page.click('tr[data-conversation="chat-1"] a');
    await page.locator('[data-view=conversation][data-conversation="chat-1"]').waitFor();
    await page.locator("[data-section=transcript] [data-kind=tool-call]").waitFor();
    await page.locator(`[data-section=tree] [data-node="${runId}"]`).waitFor();

    await page.fill("[data-section=send] input[name=text]", "S");
    await page.selectOption("[data-section=send] select[name=whenBusy]", "steer");
    await page.click("[data-section=send] button[type=submit]");
    await page.locator("[data-section=inbox] [data-submission]").waitFor();
    await r.signal(`go:${runId}`);
    await page.locator("[data-section=transcript] [data-kind=assistant]").waitFor();
    expect(await page.textContent("[data-section=transcript] [data-kind=assistant]")).toContain(
      '"answered":["A","S"]',
    );
    await page.locator("[data-field=run-state]", { hasText: "idle" }).waitFor();

    await c.submit("chat-1", { text: "B", park: true });
    await page.locator("[data-field=run-state]", { hasText: "run #" }).waitFor();
    await page.click("[data-action=abort-conversation]");
    await page.locator("[data-field=abort-note]", { hasText: "1 task(s) marked" }).waitFor();
    await page.locator("[data-field=run-state]", { hasText: "idle" }).waitFor();
    expect(problems).toEqual([]);
  });
});
