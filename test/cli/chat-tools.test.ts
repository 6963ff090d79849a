/**
 * `ratchet chat --tools` (spec §19.32) from real processes: Ctrl-C (SIGINT) during a tool round
 * aborts it bottom-up and the chat goes on; `kill -9` during a bash call and `ratchet chat ID` again
 * reruns the safe call that was in flight and answers the bash call `interrupted`, its orphaned
 * process group killed (spec §19.30).
 */
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { afterEach, expect, it } from "vitest";
import { Ratchet, silentLogger } from "../../src/index.js";
import { until } from "../engine/helpers.js";
import { alive } from "../fixtures/procs.js";
import { chatSetup, exited, output } from "./chat-kit.js";

const dirs: string[] = [];
const pids: number[] = [];
afterEach(() => {
  for (const pid of pids.splice(0))
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Gone.
    }
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/** A bash call that leaves a long sleep in its group's background and says so. */
const BASH_SLEEP = `/call bash {"command":"sleep 300 & echo $! > sleep.pid; echo started; wait"}`;

async function storeOf(dir: string) {
  return Ratchet.open({ store: `sqlite:${path.join(dir, "c.db")}`, logger: silentLogger });
}

it("§19.32 §19.12 Ctrl-C during a tool round aborts it bottom-up — the bash group is gone, the call answers from its abort handler before the run ends — and the chat goes on", async () => {
  const { argv, env, dir } = chatSetup(dirs);
  const child = spawn(process.execPath, argv("chat", "x1", "--tools", "bash,read", "--cwd", dir), {
    cwd: dir,
    env,
  });
  pids.push(child.pid!);
  const out = output(child);
  child.stdin.write(`${BASH_SLEEP}\n`);
  await out.until(/\| started/);
  const sleepPid = Number(fs.readFileSync(path.join(dir, "sleep.pid"), "utf8"));
  pids.push(sleepPid);
  expect(alive(sleepPid)).toBe(true);
  child.kill("SIGINT");
  await out.until(/\(aborted\)/);
  await until(() => !alive(sleepPid), "the bash call's process group to be gone", 5_000);
  child.stdin.write("hello again\n");
  await out.until(/agent> You said: "hello again"/);
  child.stdin.end();
  expect(await exited(child)).toBe(0);

  const r = await storeOf(dir);
  try {
    const [call] = await r.list({ name: "ratchet.tool-call", limit: 10 });
    const runs = await r.list({ name: "ratchet.chat", limit: 10 });
    const aborted = runs.find((t) => t.outcome === "aborted")!;
    expect(call!.outcome).toBe("aborted");
    expect(call!.ownerId).toBe(aborted.id);
    // Bottom-up: the call's abort handler answered with its output before its run ended.
    expect((call!.result as { result: { content: string } }).result.content).toMatch(
      /^bash was interrupted: the call was aborted.*; its output so far:\nstarted/s,
    );
    expect(call!.endedAt!).toBeLessThanOrEqual(aborted.endedAt!);
    expect(runs.filter((t) => t.outcome === "completed").length).toBe(1);
  } finally {
    await r.close();
  }
}, 60_000);

it("§19.32 §19.10 kill -9 during a bash call, then ratchet chat ID: the safe call in flight runs again, bash is interrupted and its group killed, the chat goes on", async () => {
  const { argv, env, dir } = chatSetup(dirs);
  // A read of a FIFO blocks until a writer comes: a safe call still running when the chat dies.
  const fifo = path.join(dir, "slow.fifo");
  expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
  const first = spawn(
    process.execPath,
    argv(
      "chat",
      "k2",
      "--tools",
      "bash,read",
      "--cwd",
      dir,
      "--message",
      `/call read {"path":"slow.fifo"}\n${BASH_SLEEP}`,
    ),
    { cwd: dir, env },
  );
  pids.push(first.pid!);
  await output(first).until(/\| started/);
  const sleepPid = Number(fs.readFileSync(path.join(dir, "sleep.pid"), "utf8"));
  pids.push(sleepPid);
  first.kill("SIGKILL");
  await exited(first);
  expect(alive(sleepPid)).toBe(true); // its own process group: the SIGKILL did not reach it

  const again = spawn(process.execPath, argv("chat", "k2", "--tools", "bash,read", "--cwd", dir), {
    cwd: dir,
    env,
  });
  pids.push(again.pid!);
  const out = output(again);
  again.stdin.write("next\n");
  again.stdin.end();
  await out.until(/\(resuming the answer in progress\)/);
  // Each open of the FIFO for writing lets one blocked open of the rerun read through.
  const feeder = setInterval(() => {
    try {
      fs.closeSync(fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK));
    } catch {
      // No reader yet.
    }
  }, 50);
  try {
    await out.until(/The tools answered: read, bash \(error\)\./, 45_000, "spoken");
  } finally {
    clearInterval(feeder);
  }
  // Tool results and the answer are different sources of the watch, ordered each on its own (spec
  // §17.11): the answer's last words can print before a result's line arrives.
  await out.until(/\[bash error\] bash was interrupted: the worker running it stopped/);
  await out.until(/\[read\] /);
  expect(out.text).toMatch(/\[bash error\] bash was interrupted: the worker running it stopped/);
  expect(out.text).toMatch(/\[read\] /);
  await out.until(/agent> You said: "next"/);
  expect(await exited(again)).toBe(0);
  expect(alive(sleepPid)).toBe(false);

  const r = await storeOf(dir);
  try {
    const calls = await r.list({ name: "ratchet.tool-call", limit: 10 });
    const byTool = (tool: string) => calls.find((c) => (c.input as { tool: string }).tool === tool)!;
    const read = byTool("read");
    const bash = byTool("bash");
    expect([read.outcome, read.attempts]).toEqual(["completed", 2]);
    expect((read.result as { interrupted?: boolean }).interrupted).toBeUndefined();
    expect((bash.result as { interrupted?: boolean; result: { content: string } }).interrupted).toBe(true);
    expect((bash.result as { result: { content: string } }).result.content).toMatch(
      /its process group \d+ was still running and was killed; its output so far:\nstarted/,
    );
  } finally {
    await r.close();
  }
}, 90_000);
