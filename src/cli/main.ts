#!/usr/bin/env node
/**
 * The `ratchet` command.
 *
 * Exit codes: 0 success; 1 a RatchetError (printed as `error [CODE]: message`,
 * never with a stack) or another failure; 2 a malformed command line (unknown
 * command or option, bad value, bad JSON), printed with the usage.
 */
import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { Command, CommanderError } from "commander";
import { RatchetError } from "../errors.js";
import { UsageError } from "./args.js";
import { registerDemo } from "./commands/demo.js";
import { registerEnqueue } from "./commands/enqueue.js";
import { registerInspect } from "./commands/inspect.js";
import { registerRun } from "./commands/run.js";
import { registerServe } from "./commands/serve.js";
import { registerSteer } from "./commands/steer.js";
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
    // Set before the subcommands are added: they inherit both.
    .exitOverride()
    .showHelpAfterError()
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
  registerDemo(program);
  registerServe(program);
  return program;
}

/** "ratchet enqueue [options] <name> <json>" */
function usageOf(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return `${names.join(" ")} ${cmd.usage()}`;
}

/** Prints an error the way its kind asks for and returns the exit code. */
export function reportError(err: unknown, cmd: Command | undefined): number {
  if (err instanceof CommanderError) {
    // Commander has printed the message (and the help) already; help and --version exit 0.
    return err.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
  }
  if (err instanceof UsageError) {
    process.stderr.write(`error: ${err.message}\n`);
    if (cmd) process.stderr.write(`usage: ${usageOf(cmd)}\n(see ${usageOf(cmd).split(" [")[0]} --help)\n`);
    return EXIT_USAGE;
  }
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
