/**
 * The task page shows a task's output streams live (spec §16), in Chromium against a worker that
 * serves the dashboard, with a token: chunks appear as they are committed, without a reload, and
 * the panel reports the stream's end.
 */
import { describe, expect, it } from "vitest";
import { defineTask } from "../../src/engine/definition.js";
import { onCleanup, openRatchet, until } from "../engine/helpers.js";
import { gate, openPage, useChromium } from "./kit.js";

const TOKEN = "dashboard-token-streams-0123";
let second = gate();

const talker = defineTask({
  name: "talker",
  async run(ctx) {
    const out = await ctx.stream("answer");
    out.write("Hello");
    out.write(", <b>world</b>");
    await out.flush();
    await second.wait;
    out.write(" — and more");
    out.write({ tokens: 3 });
    await out.close();
    return null;
  },
});

useChromium();

describe("dashboard: output streams", () => {
  it("§16.8 the task page follows a stream live: text as it commits, escaped, then its end", async () => {
    second = gate();
    onCleanup(() => second.open());
    const r = await openRatchet([talker]);
    await r.start({ concurrency: 1, serve: { port: 0, token: TOKEN } });
    onCleanup(() => r.stop());
    const url = r.serving()!;
    const id = await r.enqueue(talker, undefined);
    await until(async () => (await r.streams(id)).length === 1, "the stream to be committed");

    const { page, problems } = await openPage();
    await page.goto(`${url}/#/tasks/${id}`);
    await page.locator("[data-view=token]").waitFor();
    await page.fill("input[name=token]", TOKEN);
    await page.click("[data-view=token] button[type=submit]");
    const panel = page.locator("[data-stream=answer]");
    await panel.locator("[data-field=stream-text]", { hasText: "Hello, <b>world</b>" }).waitFor();
    expect(await panel.locator("b").count()).toBe(0);
    await page.evaluate("window.__sameDocument = true");

    second.open();
    await page.locator("[data-stream=answer][data-state=ended]").waitFor();
    expect(await panel.locator("[data-field=stream-text]").textContent()).toBe(
      'Hello, <b>world</b> — and more{"tokens":3}\n',
    );
    expect(await panel.locator("h4").textContent()).toContain("4 chunks");
    expect(await page.evaluate("window.__sameDocument")).toBe(true);
    expect(problems).toEqual([]);
  });
});
