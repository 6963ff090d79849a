/**
 * `ratchet chat` (spec §19.15, §18.7) as a person uses it, from real processes: a one-shot message,
 * piped lines, and a kill -9 in the middle of a streamed answer — `ratchet chat ID` again resumes
 * the run and finishes it, one answer in the transcript, its usage counted once.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import { afterEach, expect, it } from "vitest";
import { chatSetup } from "./chat-kit.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const setup = () => chatSetup(dirs);

it("§19.15 ratchet chat --message answers once and exits; piped lines are a conversation", () => {
  const { run } = setup();
  const one = run(undefined, "chat", "c1", "--message", "hello");
  expect([one.status, one.stderr]).toEqual([0, ""]);
  expect(one.stdout).toBe(
    'agent> You said: "hello". This is the faux model; give --provider openai-compatible for a real one.\n',
  );
  const piped = run("first\nsecond\n", "chat", "c1");
  expect(piped.status).toBe(0);
  expect(piped.stdout.match(/^agent> You said: "(first|second)"/gm)).toEqual([
    'agent> You said: "first"',
    'agent> You said: "second"',
  ]);
  const t = JSON.parse(run(undefined, "--json", "conversation", "c1").stdout) as {
    entries: { kind: string }[];
  };
  // The chat agent's instructions are shown once, as a system entry before the first turn (§19.25).
  expect(t.entries.map((e) => e.kind)).toEqual([
    "user",
    "system",
    "assistant",
    "user",
    "assistant",
    "user",
    "assistant",
  ]);
  const compacted = run("/compact\n", "chat", "c1");
  expect(compacted.stdout).toContain("(compacted: older messages are summarised)");
  expect(run(undefined, "chat", "c1", "--provider", "nope").status).toBe(2);
  expect(run(undefined, "chat", "c1", "--tools", "read,teleport").status).toBe(2);
});

it("§18.7 §19.15 kill -9 mid-answer, then ratchet chat ID resumes: one answer, usage counted once", async () => {
  const { argv, env, dir, run } = setup();
  const child = spawn(process.execPath, argv("chat", "k1", "--message", "tell me", "--faux-rate", "15"), {
    cwd: dir,
    env,
  });
  let out = "";
  child.stdout.setEncoding("utf8");
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no partial answer: ${out}`)), 30_000);
    child.stdout.on("data", (d: string) => {
      out += d;
      if (/agent> You said/.test(out)) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  child.kill("SIGKILL");
  await new Promise((r) => child.once("exit", r));
  expect(out).not.toMatch(/real one\./); // killed mid-answer

  const again = run("", "chat", "k1");
  expect(again.status).toBe(0);
  expect(again.stdout).toContain("(resuming the answer in progress)");
  expect(again.stdout).toMatch(
    /You said: "tell me"\. This is the faux model; give --provider openai-compatible for a real one\./,
  );
  const t = JSON.parse(run(undefined, "--json", "conversation", "k1").stdout) as {
    entries: { kind: string }[];
  };
  expect(t.entries.map((e) => e.kind)).toEqual(["user", "system", "assistant"]);
  const usage = JSON.parse(run(undefined, "--json", "usage", "--conversation", "k1").stdout) as {
    totals: { responses: number };
  };
  expect(usage.totals.responses).toBe(1);
});
