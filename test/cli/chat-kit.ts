/** What the `ratchet chat` tests share: a store in a temp directory and a child's output to wait on. */
import { type ChildProcess, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const MAIN = path.join(ROOT, "dist/src/cli/main.js");

/** A temp directory with the chat's store (removed by `cleanup`), and ways to run the CLI on it. */
export function chatSetup(dirs: string[]) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ratchet-chat-"));
  dirs.push(dir);
  const env = { ...process.env };
  delete env.RATCHET_STORE;
  delete env.OPENAI_API_KEY;
  const argv = (...a: string[]) => [MAIN, "--store", `sqlite:${path.join(dir, "c.db")}`, ...a];
  const run = (input: string | undefined, ...a: string[]) =>
    spawnSync(process.execPath, argv(...a), { cwd: dir, encoding: "utf8", env, input, timeout: 60_000 });
  return { dir, env, argv, run };
}

/** A child's stdout as it grows, and a bounded wait for a pattern in it. */
export function output(child: ChildProcess) {
  let text = "";
  const waiters = new Set<() => void>();
  child.stdout!.setEncoding("utf8");
  child.stdout!.on("data", (d: string) => {
    text += d;
    for (const w of waiters) w();
  });
  return {
    get text() {
      return text;
    },
    /** The agent's streamed words alone: tool lines printed between its chunks taken out (spec §17.11
     * orders a watch per source, so a tool line may land inside an answer that streams beside it). */
    get spoken() {
      return text.replace(/^ {2}[[|].*\n/gm, "").replace(/\nagent> /g, "");
    },
    until(re: RegExp, timeoutMs = 30_000, of: "text" | "spoken" = "text"): Promise<void> {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!re.test(of === "text" ? text : this.spoken)) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no ${re} within ${timeoutMs} ms in:\n${text}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
  };
}

export function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((r) => child.once("exit", (code) => r(code)));
}
