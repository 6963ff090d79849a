/**
 * Pieces of the browser tests: one Chromium per test file (Debian's, see
 * dashboard/chromium.ts), a fresh page per test, and a worker that serves the
 * built dashboard (`start({ serve })`). The dashboard must have been built
 * (`npm run build`; `npm test` builds first).
 *
 * A page fails its test on an uncaught script error or a Content-Security-
 * Policy refusal: both would leave a view silently broken.
 */
import { existsSync } from "node:fs";
import type { Page } from "playwright-core";
import { afterAll, beforeAll } from "vitest";
import { type Launched, launchChromium } from "../../dashboard/chromium.js";
import { defaultDashboardDir } from "../../src/server/dashboard.js";
import { onCleanup } from "../engine/helpers.js";

/** Every wait on the page is bounded by this. */
export const WAIT_MS = 10_000;

let chrome: Launched | undefined;

/** Registers the browser's launch and close around the file's tests. */
export function useChromium(): void {
  beforeAll(async () => {
    if (!existsSync(`${defaultDashboardDir()}/index.html`))
      throw new Error(`the dashboard is not built (${defaultDashboardDir()}): run \`npm run build\``);
    chrome = await launchChromium();
  });
  afterAll(async () => {
    await chrome?.close();
    chrome = undefined;
  });
}

export interface OpenPage {
  page: Page;
  /** Script errors and CSP refusals seen so far. */
  problems: string[];
}

export async function openPage(): Promise<OpenPage> {
  if (!chrome) throw new Error("useChromium() was not called in this file");
  const page = await chrome.context.newPage();
  onCleanup(() => page.close());
  page.setDefaultTimeout(WAIT_MS);
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error" && /Content Security Policy/i.test(m.text())) problems.push(m.text());
  });
  return { page, problems };
}

/** A manually opened gate: a task awaiting it holds its worker slot until the test opens it. */
export function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait, open };
}
