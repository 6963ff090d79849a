#!/usr/bin/env node
/**
 * The `ratchet` command.
 *
 * Exit codes: 0 success; 1 a RatchetError (printed as `error [CODE]: message`,
 * never with a stack) or another failure; 2 a malformed command line (unknown
 * command or option, missing argument, bad value, bad JSON), printed in the same
 * format with the code RATCHET_USAGE and one hint line (the command's usage and
 * its --help), never commander's own wording or the whole help (spec §8.11).
 */
import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { Command, CommanderError } from "commander";
import { RatchetError } from "../errors.js";
import { UsageError } from "./args.js";
import { registerChat } from "./commands/chat.js";
import { registerCompact } from "./commands/compact.js";
import { registerConversations } from "./commands/conversations.js";
import { registerDemo } from "./commands/demo.js";
import { registerDispatch } from "./commands/dispatch.js";
import { registerEnqueue } from "./commands/enqueue.js";
import { registerInspect } from "./commands/inspect.js";
import { registerModels } from "./commands/models.js";
import { registerOutbox } from "./commands/outbox.js";
import { registerPullRequests } from "./commands/prs.js";
import { registerReset } from "./commands/reset.js";
import { registerRun } from "./commands/run.js";
import { registerServe } from "./commands/serve.js";
import { registerSteer } from "./commands/steer.js";
import { registerStream } from "./commands/stream.js";
import { DEFAULT_STORE } from "./config.js";

export const EXIT_OK = 0;
export const EXIT_ERROR = 1;
export const EXIT_USAGE = 2;

export function buildProgram(): Command {
  const program = new Command("ratchet");
  program
    .description("Durable tasks: steps, retries and DAGs that survive crashes.")
    .option(
      "--store <url>",
      `store: sqlite:PATH or sqlite::memory: (default: $RATCHET_STORE, ratchet.config.js, ${DEFAULT_STORE})`,
    )
    .option(
      "--tasks <module>",
      "JS module whose exports are task definitions (needed by worker, tick, enqueue)",
    )
    .option("--json", "print machine-readable JSON")
    .addHelpText(
      "after",
      `
Examples:
  ratchet demo                                   the demo (npm run demo)
  ratchet --tasks ./dist/tasks.js worker --concurrency 8
  ratchet --tasks ./dist/tasks.js enqueue send-mail '{"to":"a@b.c"}' --run-after +30s
  ratchet ls --status failed                     then: ratchet show ID, ratchet retry ID
  ratchet tick --budget 40s                      from cron or a serverless function

A ratchet.config.js (or .mjs) in the working directory may export { store, tasks }; flags win.`,
    );
  registerRun(program);
  registerEnqueue(program);
  registerInspect(program);
  registerSteer(program);
  registerStream(program);
  registerModels(program);
  registerConversations(program);
  registerChat(program);
  registerCompact(program);
  registerReset(program);
  registerDispatch(program);
  registerOutbox(program);
  registerPullRequests(program);
  registerDemo(program);
  registerServe(program);
  for (const c of everyCommand(program)) {
    // Commander's parse errors are reported by reportError, in the CLI's one format: silence its
    // own print, and remember which command failed (its usage goes in the hint).
    c.configureOutput({ outputError: () => {} });
    c.exitOverride((err) => {
      failedCommand.set(err, c);
      throw err;
    });
  }
  return program;
}

const failedCommand = new WeakMap<CommanderError, Command>();

function everyCommand(c: Command): Command[] {
  return [c, ...c.commands.flatMap(everyCommand)];
}

/** "ratchet enqueue [options] <name> <json>" */
function usageOf(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return `${names.join(" ")} ${cmd.usage()}`;
}

/** A usage error: the RatchetError format, then one hint line. */
function reportUsage(message: string, cmd: Command | undefined): number {
  process.stderr.write(`error [RATCHET_USAGE]: ${message}\n`);
  const usage = cmd ? usageOf(cmd) : "ratchet [options] [command]";
  const name = cmd ? usage.split(" [")[0]!.split(" <")[0] : "ratchet";
  process.stderr.write(`usage: ${usage} (see \`${name} --help\`)\n`);
  return EXIT_USAGE;
}

/** Prints an error the way its kind asks for and returns the exit code. */
export function reportError(err: unknown, cmd: Command | undefined): number {
  if (err instanceof CommanderError) {
    // Help and --version (exit 0), and help shown for a missing command, are printed already.
    if (err.exitCode === 0) return EXIT_OK;
    if (err.code === "commander.help" || err.code === "commander.helpDisplayed") return EXIT_USAGE;
    return reportUsage(err.message.replace(/^error: /, ""), failedCommand.get(err) ?? cmd);
  }
  if (err instanceof UsageError) return reportUsage(err.message, cmd);
  if (err instanceof RatchetError) {
    process.stderr.write(`error [${err.code}]: ${err.message}\n`);
    return EXIT_ERROR;
  }
  const e = err as Error;
  process.stderr.write(`error: ${e?.message ?? String(err)}\n`);
  if (process.env.RATCHET_DEBUG && e?.stack) process.stderr.write(`${e.stack}\n`);
  return EXIT_ERROR;
}

export async function main(argv: readonly string[] = process.argv): Promise<number> {
  const program = buildProgram();
  let current: Command | undefined;
  program.hook("preAction", (_self, action) => {
    current = action;
  });
  try {
    await program.parseAsync([...argv]);
    return typeof process.exitCode === "number" ? process.exitCode : EXIT_OK;
  } catch (err) {
    return reportError(err, current);
  }
}

function isEntryPoint(): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(script)).href;
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  // `ratchet ls --json | head` closes the pipe early; that is not an error.
  process.stdout.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EPIPE") process.exit(EXIT_OK);
    throw err;
  });
  // exitCode, not exit(): output to a pipe is flushed before the process ends.
  process.exitCode = await main();
}
