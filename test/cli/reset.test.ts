/** spec §19.26–§19.27, §19.29: `ratchet reset` and `ratchet handoff` (built dist/, one process per command). */
import { type SpawnSyncReturns, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const MAIN = path.join(ROOT, "dist/src/cli/main.js");
const AGENT = path.join(ROOT, "dist/src/agent/index.js");
const MODELS = path.join(ROOT, "dist/src/models/index.js");
const dirs: string[] = [];

afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function setup() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ratchet-cli-reset-"));
  dirs.push(dir);
  fs.writeFileSync(
    path.join(dir, "tasks.mjs"),
    `import { defineAgent } from ${JSON.stringify(AGENT)};
import { fauxModel } from ${JSON.stringify(MODELS)};
const say = (tag) => fauxModel({ scripts: (_n, call) => ({ text: tag + " " + call.prompt.length }) });
export const agent = defineAgent({ name: "cli.agent", model: say("main"), models: { reviewer: say("reviewer") } }).task;
`,
  );
  const env = { ...process.env };
  delete env.RATCHET_STORE;
  const db = path.join(dir, "t.db");
  return (...args: string[]): SpawnSyncReturns<string> =>
    spawnSync(process.execPath, [MAIN, "--store", `sqlite:${db}`, ...args], {
      cwd: dir,
      encoding: "utf8",
      env,
    });
}

function ok(r: SpawnSyncReturns<string>): string {
  expect(r.stderr).toBe("");
  expect(r.status).toBe(0);
  return r.stdout;
}

it("§19.29 ratchet reset and ratchet handoff submit once per --request-id and apply at the run", () => {
  const run = setup();
  ok(run("send", "c1", "hello", "--tasks", "tasks.mjs"));
  ok(run("tick", "--budget", "70s", "--tasks", "tasks.mjs"));
  expect(ok(run("reset", "c1", "--note", "fresh start", "--request-id", "r1", "--tasks", "tasks.mjs"))).toBe(
    "reset submitted (submission 2, placed)\n",
  );
  expect(ok(run("reset", "c1", "--request-id", "r1", "--tasks", "tasks.mjs"))).toBe(
    "reset already submitted (submission 2, placed)\n",
  );
  ok(run("tick", "--budget", "70s", "--tasks", "tasks.mjs"));
  const after = JSON.parse(ok(run("--json", "conversation", "c1")));
  expect(after.entries.at(-1)).toMatchObject({
    kind: "reset",
    data: { text: "fresh start", reason: "reset" },
  });
  const bad = run("handoff", "c1", "--tasks", "tasks.mjs");
  expect(bad.status).not.toBe(0);
  expect(bad.stderr).toContain("handoff needs --note");
  ok(run("handoff", "c1", "--note", "review it", "--model", "reviewer", "--tasks", "tasks.mjs"));
  ok(run("tick", "--budget", "70s", "--tasks", "tasks.mjs"));
  const handed = JSON.parse(ok(run("--json", "conversation", "c1")));
  expect(handed.entries.at(-2)).toMatchObject({
    kind: "reset",
    data: { text: "review it", reason: "handoff", config: { model: "reviewer" } },
  });
  expect(handed.entries.at(-1)).toMatchObject({ kind: "assistant", data: { text: "reviewer 1" } });
});
