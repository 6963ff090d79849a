/**
 * The dashboard's dispatch view in Chromium (spec §20.27): the board shows an
 * item's live attempt by step, the attempt page its timeline, and Close item
 * closes it; each page follows live. Waits are on what the page shows.
 */
import { describe, expect, it } from "vitest";
import { DispatchRunner } from "../../src/dispatch/runner/runner.js";
import { FakeWorker } from "../../src/dispatch/workers/fake.js";
import type { DispatchCapable } from "../../src/store/dispatch/ops.js";
import { onCleanup, openRatchet } from "../engine/helpers.js";
import { openPage, useChromium } from "./kit.js";

useChromium();

describe("dashboard: dispatch", () => {
  it("§20.27 the board shows items by step with their attempt; the attempt page shows its timeline; Close item closes it", async () => {
    const r = await openRatchet([]);
    await r.start({ concurrency: 1, serve: { port: 0, streamIntervalMs: 200 } });
    onCleanup(() => r.stop());
    const url = r.serving()!;
    const store = r.store as unknown as DispatchCapable;
    const worker = new FakeWorker({ programs: { wait: (s) => s.say("hi\n") } });
    const runner = new DispatchRunner({
      store,
      pipelines: [{ name: "fix", steps: [{ name: "build", worker: "fake", spawn: { command: ["wait"] } }] }],
      workers: [worker],
    });
    const item = await store.dispatch.addItem("fix", "build", '{"title":"the bug"}');
    await store.dispatch.setSeatLimit("fake", 3);
    await runner.pass();

    const { page, problems } = await openPage();
    await page.goto(`${url}/#/dispatch`);
    const card = page.locator(
      `[data-pipeline=fix] [data-step=build] [data-item="${item.id}"][data-attempt-state=running]`,
    );
    await card.waitFor();
    expect(await card.textContent()).toContain("the bug");
    expect(await page.textContent("[data-section=seats] tr[data-worker=fake] [data-field=held]")).toBe("1");

    await card.locator("a").click();
    const [attempt] = await store.dispatch.listAttempts({ limit: 1 });
    await page.locator(`[data-view=attempt][data-attempt="${attempt!.id}"]`).waitFor();
    await page.locator("[data-section=timeline] [data-kind=claimed]").waitFor();

    await page.click("[data-action=close-item]");
    await page.locator("[data-field=done]", { hasText: "closed" }).waitFor();
    await page.locator("[data-view=attempt] [data-field=state]", { hasText: "closing" }).waitFor();
    await runner.pass(); // item-closed: no grace, stop
    await runner.pass(); // ended: settle
    await page
      .locator("[data-view=attempt] [data-field=state]", { hasText: "failed (item-closed)" })
      .waitFor();
    await page.locator("[data-section=timeline] [data-kind=settled]").waitFor();
    expect(problems).toEqual([]);
  });
});
