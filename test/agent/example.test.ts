/**
 * examples/conversation, run the way its header says (`node dist/examples/conversation/run.js`,
 * after `npm run build`), as a child process with a fresh SQLite file and a 30 s bound. The
 * example checks its own claims (spec §17.5, §17.8) and exits 1 when one fails.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const dirs: string[] = [];

afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

it("§17.5 §17.8 examples/conversation: follow-ups answered in order, abort withdraws and keeps the entries", () => {
  const script = join(ROOT, "dist/examples/conversation/run.js");
  if (!existsSync(script)) throw new Error(`${script} is missing: run \`npm run build\` first`);
  const dir = mkdtempSync(join(tmpdir(), "ratchet-example-conversation-"));
  dirs.push(dir);
  const r = spawnSync(process.execPath, [script, join(dir, "c.db")], {
    encoding: "utf8",
    timeout: 30_000,
    killSignal: "SIGKILL",
  });
  expect(r.stderr).toBe("");
  expect(r.status).toBe(0);
  expect(r.stdout).not.toContain("FAIL");
  expect(r.stdout).toContain('#11 assistant   {"text":"10 / 4 = 2.5"}');
});
