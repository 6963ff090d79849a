/**
 * Debian's Chromium (/usr/bin/chromium) driven by playwright-core, for the
 * browser tests (test/dashboard) and the screenshots (dashboard/screenshots.ts).
 * No browser is ever downloaded: `apt-get install chromium` provides it
 * (.ci/run does when it is missing). Each launch gets a fresh profile in a
 * temp folder, removed at close; background traffic (updates, sync) is off.
 * Playwright takes the profile folder as launchPersistentContext's argument
 * (it refuses `--user-data-dir` among the flags), so a launch is one context.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium } from "playwright-core";

export const CHROMIUM = process.env.RATCHET_CHROMIUM ?? "/usr/bin/chromium";

export interface Launched {
  context: BrowserContext;
  close(): Promise<void>;
}

export async function launchChromium(): Promise<Launched> {
  if (!existsSync(CHROMIUM))
    throw new Error(`no Chromium at ${CHROMIUM}: install it with \`apt-get install -y chromium\` (Debian)`);
  const profile = mkdtempSync(join(tmpdir(), "ratchet-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
    viewport: { width: 1280, height: 800 },
    timeout: 30_000,
  });
  return {
    context,
    async close() {
      await context.close().catch(() => {});
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
