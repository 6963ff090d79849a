/** Commands that change tasks without running them: `retry`, `abort`, `prune`. */
import type { Command } from "commander";
import { option, parseDuration, parseId, parseInteger } from "../args.js";
import { print, printJson, stateOf } from "../format.js";
import { withSession } from "../session.js";

const READ = { mustExist: true } as const;
/** One prune transaction deletes at most this many tasks, so writers are never blocked for long. */
const PRUNE_BATCH = 500;

export function registerSteer(program: Command): void {
  program
    .command("retry")
    .description("run a failed, aborted, faulted or orphaned task again")
    .argument("<id>", "task id", option(parseId))
    .action(async (id: number, _o: unknown, cmd: Command) => {
      await withSession(cmd, READ, async (s) => {
        const t = await s.ratchet.retry(id);
        if (s.json) printJson(t);
        else print(`task ${t.id}: ${stateOf(t)}`);
      });
    });

  program
    .command("abort")
    .description(
      "abort a task: aborted (was not running), marked (its running attempt stops), or terminal:OUTCOME",
    )
    .argument("<id>", "task id", option(parseId))
    .action(async (id: number, _o: unknown, cmd: Command) => {
      await withSession(cmd, READ, async (s) => {
        const res = await s.ratchet.abort(id);
        if (s.json) printJson(res);
        else print(res.state === "terminal" ? `terminal:${res.outcome}` : res.state);
      });
    });

  program
    .command("migrate")
    .description("create or upgrade the store's schema (every command also does this on open)")
    .action(async (_o: unknown, cmd: Command) => {
      await withSession(cmd, {}, async (s) => {
        const version = await s.ratchet.store.schemaVersion();
        if (s.json) printJson({ store: s.store, version });
        else print(`schema is at version ${version}`);
      });
    });

  program
    .command("prune")
    .description("delete terminal tasks (with their steps and events) that ended before a cutoff")
    .requiredOption("--older-than <duration>", "age of the end, e.g. 7d", option(parseDuration))
    .option(
      "--limit <n>",
      "delete at most n tasks (default: all)",
      option((t) => parseInteger(t, "--limit", 1, Number.MAX_SAFE_INTEGER)),
    )
    .action(async (o: { olderThan: number; limit?: number }, cmd: Command) => {
      await withSession(cmd, READ, async (s) => {
        const limit = o.limit ?? Number.POSITIVE_INFINITY;
        let pruned = 0;
        while (pruned < limit) {
          const batch = Math.min(PRUNE_BATCH, limit - pruned);
          const n = await s.ratchet.store.prune(o.olderThan, batch);
          pruned += n;
          if (n < batch) break;
        }
        if (s.json) printJson({ pruned });
        else print(`pruned ${pruned} task${pruned === 1 ? "" : "s"}`);
      });
    });
}
