/**
 * `ratchet demo`: runs examples/demo. The demo lives with the examples (it
 * is one of them) and is loaded on demand, so the other commands work in an
 * installed package that ships only dist/src.
 */
import type { Command } from "commander";
import { ConfigError } from "../../errors.js";
import { option, parseInteger } from "../args.js";
import { globalFlags } from "../session.js";

interface DemoFlags {
  fresh?: boolean;
  docs?: number;
  concurrency?: number;
  seed?: number;
  crashAfter?: number;
}

type DemoModule = typeof import("../../../examples/demo/run.js");

async function loadDemo(): Promise<DemoModule> {
  try {
    return await import("../../../examples/demo/run.js");
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === "ERR_MODULE_NOT_FOUND") {
      throw new ConfigError(
        "the demo is not part of this installation; run it from a clone: npm install && npm run demo",
      );
    }
    throw e;
  }
}

export function registerDemo(program: Command): void {
  program
    .command("demo")
    .description(
      "fetch, summarise (flaky, rate-limited model) and report on documents; resumable after a kill",
    )
    .option("--fresh", "delete the demo database and ledger first")
    .option(
      "--docs <n>",
      "documents (default 300)",
      option((t) => parseInteger(t, "--docs", 1, 1000)),
    )
    .option(
      "--concurrency <n>",
      "tasks run at once (default 16)",
      option((t) => parseInteger(t, "--concurrency", 1, 10_000)),
    )
    .option(
      "--seed <n>",
      "seed of the simulated latencies and failures (default 42)",
      option((t) => parseInteger(t, "--seed", 0, 2 ** 32 - 1)),
    )
    .option(
      "--crash-after <n>",
      "SIGKILL this process after n tasks finished in this run (then run the demo again)",
      option((t) => parseInteger(t, "--crash-after", 1, 1_000_000)),
    )
    .addHelpText(
      "after",
      "\nThe store defaults to sqlite:./ratchet-demo.db (not RATCHET_STORE); --store chooses another.",
    )
    .action(async (o: DemoFlags, cmd: Command) => {
      const { runDemo, DEMO_STORE } = await loadDemo();
      const flags = globalFlags(cmd);
      const summary = await runDemo({
        // The demo never touches the store of RATCHET_STORE or a config file unless asked with --store.
        store: flags.store ?? DEMO_STORE,
        fresh: o.fresh === true,
        docs: o.docs ?? 300,
        concurrency: o.concurrency ?? 16,
        seed: o.seed ?? 42,
        crashAfter: o.crashAfter,
        json: flags.json === true,
      });
      if (summary.outcome !== "completed") process.exitCode = 1;
    });
}
