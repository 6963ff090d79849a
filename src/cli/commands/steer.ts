/** Commands that change tasks without running them: `retry`, `abort`, `prune`. */
import type { Command } from "commander";
import { NotFoundError } from "../../errors.js";
import { option, parseDuration, parseId, parseInteger, parseJson, UsageError } from "../args.js";
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
      "abort a task and everything it owns: aborted, orphaned (no code), marked (it stops, drains its children, runs onAbort), or terminal:OUTCOME; with --scope every task of the task's scope (or of the named scope)",
    )
    .argument("[id]", "task id", option(parseId))
    .option("--scope [name]", "abort the whole scope: the task's own, or the one named")
    .option("--background", "with --scope: also abort background subtrees")
    .action(
      async (id: number | undefined, o: { scope?: string | true; background?: boolean }, cmd: Command) => {
        await withSession(cmd, READ, async (s) => {
          if (o.scope === undefined) {
            if (id === undefined) throw new UsageError("abort needs a task id, or --scope NAME");
            if (o.background) throw new UsageError("--background only applies with --scope");
            const res = await s.ratchet.abort(id);
            if (s.json) printJson(res);
            else print(res.state === "terminal" ? `terminal:${res.outcome}` : res.state);
            return;
          }
          let scope: string;
          if (o.scope === true) {
            if (id === undefined) throw new UsageError("--scope without a name needs a task id");
            const t = await s.ratchet.get(id);
            if (!t) throw new NotFoundError(`task ${id}`);
            scope = t.scope ?? String(t.id);
          } else {
            if (id !== undefined)
              throw new UsageError("give either a task id with --scope, or --scope NAME, not both");
            scope = o.scope;
          }
          const res = await s.ratchet.abortScope(scope, { background: o.background ?? false });
          if (s.json) printJson({ scope, ...res });
          else print(`scope ${scope}: marked ${res.marked} task${res.marked === 1 ? "" : "s"}`);
        });
      },
    );

  program
    .command("signal")
    .description("send a named signal (wakes ctx.waitForEvent(NAME); the first signal per name is kept)")
    .argument("<name>", "event name")
    .argument("[payload]", "JSON payload (default null)")
    .action(async (name: string, payload: string | undefined, _o: unknown, cmd: Command) => {
      await withSession(cmd, {}, async (s) => {
        const value = payload === undefined ? null : parseJson(payload, "payload");
        const res = await s.ratchet.signal(name, value);
        if (s.json) printJson(res);
        else
          print(
            `${res.first ? "sent" : "already sent (kept the first payload)"}; woke ${res.woken} task${res.woken === 1 ? "" : "s"}`,
          );
      });
    });

  program
    .command("concurrency")
    .description(
      "run-time concurrency limits (spec §14.9): list them; or set GROUP's limit (or one --key of it) for every worker; --clear goes back to the limit in code",
    )
    .argument("[group]", "concurrency group (a task name, or concurrencyGroup)")
    .argument(
      "[limit]",
      "tasks of one key that may run at once",
      option((t) => parseInteger(t, "limit", 0, 1_000_000)),
    )
    .option("--key <key>", "limit only this key of the group")
    .option("--clear", "remove the run-time limit")
    .action(
      async (
        group: string | undefined,
        limit: number | undefined,
        o: { key?: string; clear?: boolean },
        cmd: Command,
      ) => {
        await withSession(cmd, {}, async (s) => {
          if (group === undefined) {
            if (o.key !== undefined || o.clear) throw new UsageError("--key and --clear need a group");
            const { overrides } = await s.ratchet.concurrencyLimits();
            if (s.json) return printJson(overrides);
            if (overrides.length === 0)
              return print("no run-time concurrency limits (the limits in code apply)");
            for (const r of overrides) print(`${r.seat}\t${r.limit}`);
            return;
          }
          if ((limit === undefined) === !o.clear)
            throw new UsageError("give a LIMIT, or --clear to remove the run-time limit");
          const woken = await s.ratchet.setConcurrencyLimit(group, o.clear ? null : limit!, {
            ...(o.key === undefined ? {} : { key: o.key }),
          });
          const name = o.key === undefined ? group : `${group}:${o.key}`;
          if (s.json) printJson({ seat: name, limit: o.clear ? null : limit, woken });
          else
            print(
              `${name}: ${o.clear ? "limit in code" : `limit ${limit}`}; woke ${woken} parked task${woken === 1 ? "" : "s"}`,
            );
        });
      },
    );

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
