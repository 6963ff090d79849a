/** spec §17.11: the conversation commands of the `ratchet` CLI (built dist/, one process per command). */
import { type SpawnSyncReturns, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const MAIN = path.join(ROOT, "dist/src/cli/main.js");
const AGENT = path.join(ROOT, "dist/src/agent/index.js");
const dirs: string[] = [];

afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function setup() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ratchet-cli-conv-"));
  dirs.push(dir);
  fs.writeFileSync(
    path.join(dir, "tasks.mjs"),
    `import { defineRun } from ${JSON.stringify(AGENT)};
export const echo = defineRun({
  name: "cli.echo",
  async run(run) {
    const [first] = await run.inputs();
    await run.answer({ kind: "assistant", data: { echo: first.input.text } });
  },
}).task;
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

describe("ratchet conversation commands", () => {
  it("§17.11 send starts a run, a repeated --request-id returns the first submission, conversation prints the transcript", () => {
    const run = setup();
    expect(ok(run("send", "c1", "hello", "--request-id", "r1", "--tasks", "tasks.mjs"))).toBe(
      "submission 1 placed\n",
    );
    expect(ok(run("send", "c1", "hello again", "--request-id", "r1", "--tasks", "tasks.mjs"))).toBe(
      "submission 1 (repeated request) placed\n",
    );
    ok(run("tick", "--budget", "70s", "--tasks", "tasks.mjs"));
    expect(ok(run("conversation", "c1"))).toBe(
      '#0 user  {"text":"hello"}\n#1 assistant  {"echo":"hello"}  (task 1)\n',
    );
    const shown = JSON.parse(ok(run("--json", "conversation", "c1", "--from", "1")));
    expect(shown.entries.map((e: { seq: number }) => e.seq)).toEqual([1]);
    expect(shown.conversation).toMatchObject({ id: "c1", length: 2, runTaskId: null });
    const list = JSON.parse(ok(run("--json", "conversations")));
    expect(list.map((c: { id: string }) => c.id)).toEqual(["c1"]);
    expect(ok(run("watch", "c1", "--from", "1"))).toBe('#1 assistant  {"echo":"hello"}  (task 1)\n');
  });

  it("§17.11 bad arguments are usage errors and a busy reject is RATCHET_CONVERSATION_BUSY", () => {
    const run = setup();
    const bad = run("send", "c1", "x", "--when-busy", "later", "--tasks", "tasks.mjs");
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("--when-busy must be one of follow-up, steer, reject");
    ok(run("send", "c1", "first", "--tasks", "tasks.mjs"));
    const busy = run("send", "c1", "second", "--when-busy", "reject", "--tasks", "tasks.mjs");
    expect(busy.status).toBe(1);
    expect(busy.stderr).toBe(
      'error [RATCHET_CONVERSATION_BUSY]: conversation "c1" is busy; nothing was submitted\n',
    );
    const hostile = run("send", "bad id", "x", "--tasks", "tasks.mjs");
    expect(hostile.status).toBe(1);
    expect(hostile.stderr).toContain("RATCHET_INVALID_INPUT");
  });
});
