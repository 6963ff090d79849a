/** `ratchet stream ID NAME` (spec §16.8): a task's stream printed by the CLI, from a real process. */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const MAIN = path.join(ROOT, "dist/src/cli/main.js");
const INDEX = path.join(ROOT, "dist/src/index.js");
const dirs: string[] = [];

afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function setup() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ratchet-cli-stream-"));
  dirs.push(dir);
  fs.writeFileSync(
    path.join(dir, "tasks.mjs"),
    `import { defineTask } from ${JSON.stringify(INDEX)};
export const talk = defineTask({
  name: "talk",
  async run(ctx) {
    const out = await ctx.stream("out");
    for (const t of ["Hel", "lo ", "there"]) out.write(t);
    out.write({ usage: { tokens: 3 } });
    await out.close();
    return null;
  },
});
`,
  );
  const env = { ...process.env };
  delete env.RATCHET_STORE;
  const db = path.join(dir, "t.db");
  return (...args: string[]) =>
    spawnSync(process.execPath, [MAIN, "--store", `sqlite:${db}`, ...args], {
      cwd: dir,
      encoding: "utf8",
      env,
    });
}

it("§16.8 ratchet stream prints string chunks as text and others as JSON lines; --from and --json", () => {
  const run = setup();
  const id = run("enqueue", "talk", "{}", "--tasks", "tasks.mjs").stdout.trim();
  expect(run("tick", "--budget", "70s", "--tasks", "tasks.mjs").status).toBe(0);
  const text = run("stream", id, "out");
  expect([text.status, text.stderr]).toEqual([0, ""]);
  expect(text.stdout).toBe('Hello there{"usage":{"tokens":3}}\n');
  const from = run("stream", id, "out", "--from", "2", "--json");
  expect(
    from.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l)),
  ).toEqual([
    { offset: 2, data: "there" },
    { offset: 3, data: { usage: { tokens: 3 } } },
  ]);
  // --follow on a closed stream ends by itself.
  expect(run("stream", id, "out", "--follow", "--from", "3").stdout).toBe('{"usage":{"tokens":3}}\n');
});

it("§16.8 ratchet stream refuses bad arguments with exit 2 and an unknown task with RATCHET_NOT_FOUND", () => {
  const run = setup();
  run("enqueue", "talk", "{}", "--tasks", "tasks.mjs");
  const bad = run("stream", "1", "out", "--from", "-3");
  expect(bad.status).toBe(2);
  const missing = run("stream", "999", "out");
  expect(missing.status).not.toBe(0);
  expect(missing.stderr).toContain("RATCHET_NOT_FOUND");
});
