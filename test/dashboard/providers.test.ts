/**
 * The dashboard shows each agent turn's usage, cost and the router's decision, and the Providers
 * view shows the breakers and the usage totals (spec §18.9), in Chromium.
 */
import { describe, expect, it } from "vitest";
import { defineAgent } from "../../src/agent/agent.js";
import { Conversations } from "../../src/agent/index.js";
import type { Ratchet } from "../../src/engine/ratchet.js";
import { defaultCatalog } from "../../src/models/catalog.js";
import { fauxModel } from "../../src/models/faux.js";
import { createRouter } from "../../src/models/router.js";
import { onCleanup, openRatchet, until } from "../engine/helpers.js";
import { openPage, useChromium } from "./kit.js";

useChromium();

describe("dashboard: model turns and providers", () => {
  it("§18.9 a turn shows its usage, cost and route with the fallback that led there; Providers shows the breaker and the totals", async () => {
    let r!: Ratchet;
    const down = fauxModel({ provider: "alpha", modelId: "a-1", scripts: [{ error: { status: 503 } }] });
    const up = fauxModel({
      provider: "openai",
      modelId: "gpt-4o",
      scripts: [{ text: "Answered by the fallback.", usage: { input: 1000, output: 500, cached: 0 } }],
    });
    const agent = defineAgent({
      name: "dash.routed",
      // The router's breakers live in the store, so the server reads the ones the turn wrote.
      model: () => createRouter({ routes: [{ model: down }, { model: up }], breakers: r.store.breakers }),
    });
    r = await openRatchet([agent.task], { pollIntervalMs: 20 });
    const c = new Conversations(r, { run: agent });
    await r.start({ concurrency: 2, serve: { port: 0 } });
    onCleanup(() => r.stop());
    const url = r.serving()!;
    await c.create("routed-1");
    const s = await c.submit("routed-1", { text: "hello" });
    expect((await s.wait({ timeoutMs: 10_000 })).status).toBe("done");
    expect(down.calls).toBe(1);
    const cost = defaultCatalog.cost("openai", "gpt-4o", {
      input: 1000,
      output: 500,
      cached: 0,
      reasoning: 0,
    }).usd;
    // Under a cent: the dashboard shows six decimals.
    expect(cost).toBeGreaterThan(0);
    expect(cost).toBeLessThan(0.01);

    const { page, problems } = await openPage();
    await page.goto(`${url}/#/conversations/routed-1`);
    const meta = page.locator("[data-section=transcript] [data-kind=assistant] [data-field=turn-meta]");
    await meta.waitFor();
    expect(await meta.locator("[data-field=usage]").textContent()).toBe("in 1000 · out 500 tokens");
    expect(await meta.locator("[data-field=cost]").textContent()).toBe(` · $${cost.toFixed(6)}`);
    expect(await meta.locator("[data-field=route]").textContent()).toBe(" · route openai/gpt-4o");
    expect(await meta.locator("[data-field=fallbacks]").textContent()).toContain("alpha/a-1: ");

    await page.goto(`${url}/#/providers`);
    const breaker = page.locator('[data-section=breakers] [data-breaker="alpha/a-1"]');
    await breaker.waitFor();
    expect(await breaker.locator("[data-field=breaker-state]").textContent()).toBe("closed");
    expect(await breaker.locator("[data-field=failures]").textContent()).toBe("1");
    const total = page.locator("[data-section=usage] [data-usage=total]");
    expect(await total.locator("[data-field=responses]").textContent()).toBe("1");
    expect(await total.locator("[data-field=input]").textContent()).toBe("1000");
    expect(await total.locator("[data-field=cost]").textContent()).toBe(`$${cost.toFixed(6)}`);
    await page.locator('[data-section=usage] [data-usage="openai/gpt-4o"]').waitFor();
    await until(async () => (await page.locator("nav a.active").textContent()) === "Providers", "nav");
    expect(problems).toEqual([]);
  });
});
