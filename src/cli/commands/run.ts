/** `ratchet worker` and `ratchet tick`: the two ways to run tasks. */
import type { Command } from "commander";
import { consoleLogger } from "../../engine/options.js";
import type { TickReport } from "../../engine/ratchet.js";
import { option, parseDuration, parseInteger, parseList } from "../args.js";
import { pairs, print, printJson } from "../format.js";
import { nextSignal, withSession } from "../session.js";

const concurrency = option((t) => parseInteger(t, "--concurrency", 1, 10_000));

export function registerRun(program: Command): void {
  program
    .command("worker")
    .description("run tasks until SIGINT or SIGTERM, then stop gracefully")
    .option("--concurrency <n>", "tasks run at once (default 16)", concurrency)
    .option(
      "--prefetch <n>",
      "tasks claimed ahead of free slots, for big claim and settle batches (default 0; spec §8.7)",
      option((t) => parseInteger(t, "--prefetch", 0, 10_000)),
    )
    .option(
      "--queues <list>",
      "comma-separated queues to serve (default: the definitions' queues)",
      option(parseList),
    )
    .option(
      "--shutdown-timeout <duration>",
      "how long to wait for running tasks at shutdown",
      option(parseDuration),
    )
    .action(
      async (
        o: { concurrency?: number; prefetch?: number; queues?: string[]; shutdownTimeout?: number },
        cmd: Command,
      ) => {
        await withSession(
          cmd,
          { definitions: true, requireDefinitions: true, logger: consoleLogger },
          async (s) => {
            await s.ratchet.start({
              concurrency: o.concurrency ?? 16,
              prefetch: o.prefetch,
              queues: o.queues,
              shutdownTimeoutMs: o.shutdownTimeout,
            });
            const names = s.ratchet.definitions().map((d) => d.name);
            if (s.json)
              printJson({ event: "started", workerId: s.ratchet.workerId, store: s.store, tasks: names });
            else print(`worker ${s.ratchet.workerId} on ${s.store}: ${names.join(", ")} (Ctrl-C to stop)`);
            const sig = await nextSignal();
            // A second signal while draining means "now": leave without waiting.
            const force = () => process.exit(130);
            process.once("SIGINT", force);
            process.once("SIGTERM", force);
            if (s.json) printJson({ event: "stopping", signal: sig });
            else print(`${sig}: stopping; running tasks finish or are released (signal again to force)`);
            await s.ratchet.stop();
            if (s.json) printJson({ event: "stopped" });
            else print("stopped");
          },
        );
      },
    );

  program
    .command("tick")
    .description("run what fits in a time budget, then exit (for cron and serverless)")
    .requiredOption("--budget <duration>", "time budget, e.g. 40s", option(parseDuration))
    .option("--concurrency <n>", "tasks run at once (default 6)", concurrency)
    .option(
      "--max <n>",
      "most tasks to start (default 50)",
      option((t) => parseInteger(t, "--max", 0, 1_000_000)),
    )
    .option("--queues <list>", "comma-separated queues to serve", option(parseList))
    .action(
      async (o: { budget: number; concurrency?: number; max?: number; queues?: string[] }, cmd: Command) => {
        await withSession(
          cmd,
          { definitions: true, requireDefinitions: true, logger: consoleLogger },
          async (s) => {
            const report = await s.ratchet.tick({
              budgetMs: o.budget,
              concurrency: o.concurrency,
              max: o.max,
              queues: o.queues,
            });
            if (s.json) printJson(report);
            else print(renderTick(report));
          },
        );
      },
    );
}

function renderTick(r: TickReport): string {
  return pairs([
    ["ran", String(r.ran)],
    ["done", String(r.done)],
    ["failed", String(r.failed)],
    ["retried", String(r.retried)],
    ["skipped", `${r.skipped}${r.skipped > 0 ? " (ready, but too long for the budget left)" : ""}`],
    ["ms", String(r.ms)],
    ["budgetLeft", `${r.budgetLeft} ms`],
  ]);
}
