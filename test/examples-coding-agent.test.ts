/**
 * examples/coding-agent (spec §19): run as the README says, SIGKILLed in the middle of its bash
 * call, then run again on the same database — the conversation finishes, nothing is done twice.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const SCRIPT = join(ROOT, "dist/examples/coding-agent/run.js");
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function run(db: string, ...flags: string[]) {
  const env = { ...process.env };
  delete env.OPENAI_API_KEY;
  return spawnSync(process.execPath, [SCRIPT, db, ...flags], {
    cwd: dirname(db),
    encoding: "utf8",
    env,
    timeout: 60_000,
    killSignal: "SIGKILL",
  });
}

it("§19.10 §19.15 the coding agent, killed during its bash call and run again, finishes with each turn and edit once", () => {
  if (!existsSync(SCRIPT)) throw new Error(`${SCRIPT} is missing: run \`npm run build\` first`);
  const dir = mkdtempSync(join(tmpdir(), "ratchet-coding-agent-"));
  dirs.push(dir);
  const db = join(dir, "agent.db");
  const crashed = run(db, "--crash-in-bash");
  expect(crashed.signal ?? crashed.status).toBe("SIGKILL");
  expect(crashed.stdout).toContain("crashing now");
  const resumed = run(db);
  expect(resumed.stderr).toBe("");
  expect(resumed.status).toBe(0);
  expect(resumed.stdout).toMatch(/bash \(interrupted\): bash was interrupted/);
  expect(resumed.stdout).not.toMatch(/^FAIL/m);
  expect(resumed.stdout.match(/^ok /gm)).toHaveLength(5);
  expect(readFileSync(join(dir, "scratch-repo/greet.js"), "utf8")).toBe(
    "export const greet = (name) => `Hello, ${name}!`;\n",
  );
});
