/**
 * `ratchet stream ID NAME [--from N] [--follow]`: a task's durable output stream (spec §16.8).
 * String chunks are printed as they are (a model's tokens read as text); other chunks as one JSON
 * line each; with the global `--json`, one `{ offset, data }` line per chunk. Without `--follow`
 * it prints what is committed and exits; with it, it follows until the stream closes, the task
 * ends, or SIGINT/SIGTERM.
 */
import type { Command } from "commander";
import { option, parseId, parseInteger } from "../args.js";
import { nextSignal, withSession } from "../session.js";

export function registerStream(program: Command): void {
  program
    .command("stream")
    .description("print a task's durable output stream (strings as text, other chunks as JSON lines)")
    .argument("<id>", "task id", option(parseId))
    .argument("<name>", "stream name")
    .option(
      "--from <n>",
      "first offset to print (default 0)",
      option((t) => parseInteger(t, "--from", 0, Number.MAX_SAFE_INTEGER)),
    )
    .option("--follow", "keep printing chunks as they are committed, until the stream ends")
    .action(async (id: number, name: string, o: { from?: number; follow?: boolean }, cmd: Command) => {
      await withSession(cmd, { mustExist: true }, async (s) => {
        const stop = new AbortController();
        void nextSignal().then(() => stop.abort());
        let tail = "\n";
        for await (const c of s.ratchet.readStream(id, name, {
          from: o.from ?? 0,
          follow: o.follow === true,
          signal: stop.signal,
        })) {
          const text = s.json
            ? `${JSON.stringify(c)}\n`
            : typeof c.data === "string"
              ? c.data
              : `${JSON.stringify(c.data)}\n`;
          if (text.length > 0) tail = text;
          process.stdout.write(text);
        }
        // Text chunks rarely end with a newline; a terminal's prompt should not start mid-line.
        if (!tail.endsWith("\n") && process.stdout.isTTY) process.stdout.write("\n");
      });
    });
}
