/**
 * The dashboard in Chromium, against a worker that serves it
 * (`start({ serve })`) on SQLite: live updates without a reload, a failed
 * task's error and its retry, the action buttons, and the token prompt.
 * Every wait is on something the page shows, bounded by WAIT_MS.
 */
import { describe, expect, it } from "vitest";
import { defineTask } from "../../src/engine/definition.js";
import { onCleanup, openRatchet, until } from "../engine/helpers.js";
import { gate, openPage, useChromium } from "./kit.js";

const TOKEN = "dashboard-token-0123456789";
/** Faster than the default 1 s, so the tests spend less time waiting for the next event. */
const STREAM_MS = 200;

let held = gate();
/** Holds the worker's only slot until the test opens the gate, so a task enqueued meanwhile stays pending. */
const hold = defineTask({ name: "hold", run: () => held.wait });

const double = defineTask({
  name: "double",
  async run(ctx, input: { n: number }) {
    const n = await ctx.step("work", () => input.n * 2);
    return { doubled: n };
  },
});

let broken = true;
const flaky = defineTask({
  name: "flaky",
  retry: { maxAttempts: 1 },
  run: () => {
    if (broken) throw new Error("kaboom: the <b>widget</b> broke");
    return { fixed: true };
  },
});

const approval = defineTask({
  name: "approval",
  async run(ctx, input: { gate: string }) {
    const e = await ctx.waitForEvent(input.gate, { timeoutMs: 60_000 });
    return { approved: e.kind === "signal", by: (e as { payload?: { by?: string } }).payload?.by ?? null };
  },
});

const TASKS = [hold, double, flaky, approval];

async function worker(opts: { token?: string } = {}) {
  const r = await openRatchet(TASKS);
  await r.start({ concurrency: 1, serve: { port: 0, streamIntervalMs: STREAM_MS, ...opts } });
  onCleanup(() => r.stop());
  return { r, url: r.serving()! };
}

useChromium();

describe("dashboard", () => {
  it("the task list shows a task go pending → completed live, without a reload; its page shows the step and result", async () => {
    held = gate();
    const { r, url } = await worker();
    onCleanup(() => held.open());
    const holder = await r.enqueue(hold, undefined);
    await until(async () => (await r.get(holder))?.status === "running", "the holder to run");
    const { page, problems } = await openPage();
    await page.goto(`${url}/#/tasks`);
    await page.locator("[data-live=on]").waitFor();
    await page.evaluate("window.__sameDocument = true");

    const id = await r.enqueue(double, { n: 21 });
    await page.locator(`tr[data-task="${id}"][data-state=pending]`).waitFor();
    held.open();
    await page.locator(`tr[data-task="${id}"][data-state=completed]`).waitFor();
    expect(await page.evaluate("window.__sameDocument")).toBe(true);

    await page.click(`tr[data-task="${id}"] a`);
    await page.locator(`[data-view=task][data-task="${id}"]`).waitFor();
    expect(await page.textContent("[data-field=result]")).toContain('"doubled": 42');
    expect(await page.textContent("[data-section=steps]")).toContain("work");
    expect(problems).toEqual([]);
  });

  it("a failed task shows its error (escaped) and stack; Retry runs it again and the page shows it complete", async () => {
    broken = true;
    const { r, url } = await worker();
    const id = await r.enqueue(flaky, undefined);
    expect((await r.waitFor(id, { timeoutMs: 10_000 })).outcome).toBe("failed");
    const { page, problems } = await openPage();
    // The error-text filter finds it.
    await page.goto(`${url}/#/tasks?error=widget`);
    await page.locator(`tr[data-task="${id}"][data-state=failed]`).waitFor();
    await page.click(`tr[data-task="${id}"] a`);

    const error = page.locator("[data-section=error] [data-field=error]");
    await error.waitFor();
    expect(await error.textContent()).toBe("Error: kaboom: the <b>widget</b> broke");
    expect(await page.locator("[data-section=error] b").count()).toBe(0);
    await page.click("[data-section=error] summary");
    expect(await page.textContent("[data-section=error] pre")).toMatch(/kaboom[\s\S]*at /);

    broken = false;
    await page.click("[data-action=retry]");
    await page.locator("[data-view=task] h2 [data-field=state]", { hasText: "completed" }).waitFor();
    expect(await page.textContent("[data-field=result]")).toContain('"fixed": true');
    expect(problems).toEqual([]);
  });

  it("the Send and Abort buttons signal a waiting task and abort another; each page follows live", async () => {
    const { r, url } = await worker();
    const waiting = await r.enqueue(approval, { gate: "approve:7" });
    const later = await r.enqueue(double, { n: 1 }, { delayMs: 3_600_000 });
    await until(async () => (await r.get(waiting))?.status === "waiting", "the approval to wait");
    const { page, problems } = await openPage();

    await page.goto(`${url}/#/tasks/${waiting}`);
    const signal = page.locator("input[name=signal]");
    await signal.waitFor();
    expect(await signal.inputValue()).toBe("approve:7");
    await page.fill("input[name=payload]", '{"by":"ana"}');
    await page.click("[data-action=signal]");
    await page.locator("[data-view=task] h2 [data-field=state]", { hasText: "completed" }).waitFor();
    expect(await page.textContent("[data-field=result]")).toContain('"by": "ana"');

    await page.goto(`${url}/#/tasks/${later}`);
    await page
      .locator(`[data-view=task][data-task="${later}"] h2 [data-field=state]`, { hasText: "waiting" })
      .waitFor();
    await page.click("[data-action=abort]");
    await page.locator("[data-view=task] h2 [data-field=state]", { hasText: "aborted" }).waitFor();
    expect((await r.get(later))?.outcome).toBe("aborted");
    expect(problems).toEqual([]);
  });

  it("with a token the dashboard asks for it once, refuses a wrong one, then streams live data; a reload does not ask again", async () => {
    const { r, url } = await worker({ token: TOKEN });
    const id = await r.enqueue(double, { n: 2 });
    await r.waitFor(id, { timeoutMs: 10_000 });
    const { page, problems } = await openPage();
    await page.goto(`${url}/`);
    await page.locator("[data-view=token]").waitFor();

    await page.fill("input[name=token]", "not-the-token-0123456789");
    await page.click("[data-view=token] button[type=submit]");
    await page.locator("[data-view=token] [role=alert]", { hasText: "refused" }).waitFor();

    await page.fill("input[name=token]", TOKEN);
    await page.click("[data-view=token] button[type=submit]");
    // The queue card comes from the stream's stats events: the stream carries the token too.
    await page.locator("[data-queue=default] [data-count=completed] strong", { hasText: /^1$/ }).waitFor();
    await page.locator("[data-live=on]").waitFor();
    expect(page.url()).not.toContain(TOKEN);

    await page.reload();
    await page.locator("[data-queue=default]").waitFor();
    expect(await page.locator("[data-view=token]").count()).toBe(0);
    expect(problems).toEqual([]);
  });
});
