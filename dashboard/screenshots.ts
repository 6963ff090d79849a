/**
 * Writes the dashboard screenshots in docs/images/ from a demo store:
 *
 *   npm run build && npm run screenshots            (node --import tsx dashboard/screenshots.ts)
 *
 * It seeds a fresh SQLite store in a temp folder with three queues of made-up
 * work (pages that fail once and retry with backoff, pages that fail for
 * good, summaries that report progress, an agent that owns tool calls and a
 * background subagent and then waits for an approval), starts a worker that
 * serves the dashboard (`start({ serve })`), lets about twenty stats samples
 * accumulate for the chart, and takes four pictures with Debian's Chromium:
 * overview.png, tasks.png, task-tree.png (the agent: timeline, steps, tree)
 * and task-failed.png (an error with its stack and retries).
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { defineTask, NonRetryableError, Ratchet, silentLogger } from "../src/index.js";
import { launchChromium } from "./chromium.js";

const OUT = resolve(fileURLToPath(new URL("../docs/images/", import.meta.url)));
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

let pageNo = 0;
const fetchPage = defineTask({
  name: "fetch-page",
  queue: "crawl",
  retry: { maxAttempts: 3, baseMs: 300, factor: 2, capMs: 2_000 },
  async run(ctx, input: { url: string; flaky?: boolean; broken?: boolean }) {
    const html = await ctx.step("download", async () => {
      await pause(40 + (pageNo++ % 5) * 30);
      if (input.broken) throw new Error(`GET ${input.url}: 503 Service Unavailable`);
      if (input.flaky && ctx.attempt === 1) throw new Error(`GET ${input.url}: connection reset`);
      return { bytes: 18_000 + input.url.length * 97 };
    });
    const links = await ctx.step("parse", async () => {
      await pause(25);
      return Math.round(html.bytes / 900);
    });
    return { url: input.url, links };
  },
});

const summarize = defineTask({
  name: "summarize",
  queue: "llm",
  async run(ctx, input: { doc: number; invalid?: boolean }) {
    if (input.invalid) throw new NonRetryableError(`document ${input.doc} is empty`);
    for (let i = 1; i <= 4; i++) {
      await ctx.step(`chunk-${i}`, async () => {
        await pause(60);
        return { tokens: 400 + ((input.doc * 37 + i * 11) % 300) };
      });
      await ctx.progress(i / 4, `chunk ${i} of 4`);
    }
    return { summary: `document ${input.doc} in three sentences` };
  },
});

const toolCall = defineTask({
  name: "tool-call",
  queue: "agents",
  async run(ctx, input: { tool: string; ms: number }) {
    return ctx.step("call", async () => {
      await pause(input.ms);
      return { tool: input.tool, ok: true };
    });
  },
});

const agent = defineTask({
  name: "agent",
  queue: "agents",
  async run(ctx, input: { goal: string }) {
    const plan = await ctx.step("plan", async () => {
      await pause(80);
      return ["search", "read", "edit"];
    });
    const calls = [];
    for (const [i, tool] of plan.entries())
      calls.push(await ctx.spawn(`t0.${tool}`, toolCall, { tool, ms: 150 + i * 120 }));
    await ctx.spawn("notes", toolCall, { tool: "notes", ms: 30_000 }, { background: true });
    await ctx.progress(0.5, "tools done, waiting for approval");
    await ctx.waitFor(calls, { policy: "failFast" });
    const approval = await ctx.waitForEvent(`approve:${input.goal}`, { timeoutMs: 3_600_000 });
    return { approved: approval.kind === "signal" };
  },
});

async function seed(r: Ratchet): Promise<{ agentId: number; failedId: number }> {
  const agentId = await r.enqueue(agent, { goal: "fix-flaky-test" }, { scope: "conversation-42" });
  let failedId = 0;
  for (let round = 0; round < 14; round++) {
    for (let i = 0; i < 6; i++) {
      const n = round * 6 + i;
      if (i >= 3 + (round % 4)) break;
      const id = await r.enqueue(fetchPage, {
        url: `https://example.com/docs/${n}`,
        flaky: n % 4 === 1,
        broken: n % 11 === 5,
      });
      if (n % 11 === 5 && failedId === 0) failedId = id;
    }
    if (round % 2 === 0)
      await r.enqueue(summarize, { doc: round, invalid: round === 4 }, { job: "weekly-digest" });
    await pause(900);
  }
  for (let i = 0; i < 6; i++)
    await r.enqueue(summarize, { doc: 100 + i }, { job: "weekly-digest", delayMs: 3_600_000 });
  return { agentId, failedId };
}

async function shoot(page: Page, name: string, selector: string): Promise<void> {
  await page.waitForSelector(selector, { timeout: 15_000 });
  await page.screenshot({ path: join(OUT, name), fullPage: true });
  console.log(`wrote docs/images/${name}`);
}

async function main(): Promise<void> {
  mkdirSync(OUT, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), "ratchet-shots-"));
  const r = await Ratchet.open({
    store: `sqlite:${join(dir, "demo.db")}`,
    tasks: [fetchPage, summarize, toolCall, agent],
    logger: silentLogger,
  });
  const chrome = await launchChromium();
  try {
    // A short shutdown wait: the background subagent is still running when the pictures are taken.
    await r.start({ concurrency: 4, shutdownTimeoutMs: 200, serve: { port: 0 } });
    const url = r.serving()!;
    const page = await chrome.context.newPage();
    await page.setViewportSize({ width: 1280, height: 820 });
    await page.goto(`${url}/#/`);
    const { agentId, failedId } = await seed(r);
    const broken = await r.waitFor(failedId, { timeoutMs: 30_000 });
    if (broken.outcome !== "failed") throw new Error(`task ${failedId} should have failed`);
    await pause(3_000); // a few more chart samples after the work ends
    await shoot(page, "overview.png", "[data-chart=rates]");
    await page.goto(`${url}/#/tasks`);
    await shoot(page, "tasks.png", "tr[data-task]");
    await page.goto(`${url}/#/tasks/${agentId}`);
    await page.waitForSelector(`[data-node] >> text=waiting`, { timeout: 15_000 });
    await shoot(page, "task-tree.png", "[data-section=tree]");
    await page.goto(`${url}/#/tasks/${failedId}`);
    await page.click("[data-section=error] summary");
    await shoot(page, "task-failed.png", "[data-section=retries]");
  } finally {
    await chrome.close();
    await r.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
