/** `ratchet enqueue NAME JSON`: validates the input with NAME's schema, then writes one task. */
import type { Command } from "commander";
import type { EnqueueOptions } from "../../engine/ratchet.js";
import {
  option,
  parseId,
  parseInteger,
  parseJson,
  parseList,
  parseRunAfter,
  type RunAfter,
} from "../args.js";
import { print, printJson } from "../format.js";
import { withSession } from "../session.js";

interface Flags {
  dedupe?: string;
  priority?: number;
  runAfter?: RunAfter;
  queue?: string;
  job?: string;
  needs?: number[];
}

export function registerEnqueue(program: Command): void {
  program
    .command("enqueue")
    .description("enqueue one task; prints its id (the existing id when --dedupe matched)")
    .argument("<name>", "task name; its definition must be in --tasks")
    .argument("<json>", "task input as JSON, e.g. '{\"n\": 1}'")
    .option("--dedupe <key>", "dedupe key: a live or completed task with this key is returned instead")
    .option(
      "--priority <n>",
      "integer in [-1000, 1000]; higher runs first",
      option((t) => parseInteger(t, "--priority", -1000, 1000)),
    )
    .option("--run-after <when>", "ISO time or a delay such as +30s", option(parseRunAfter))
    .option("--queue <queue>", "queue (default: the definition's)")
    .option("--job <job>", "job name")
    .option(
      "--needs <ids>",
      "comma-separated ids of tasks that must complete first",
      option((t) => parseList(t).map(parseId)),
    )
    .action(async (name: string, json: string, o: Flags, cmd: Command) => {
      const input = parseJson(json, "the JSON argument");
      await withSession(cmd, { definitions: true }, async (s) => {
        const opts: EnqueueOptions = {
          dedupe: o.dedupe,
          priority: o.priority,
          queue: o.queue,
          job: o.job,
          needs: o.needs,
          ...(o.runAfter ?? {}),
        };
        const id = await s.ratchet.enqueue(name, input, opts);
        if (s.json) printJson({ id });
        else print(String(id));
      });
    });
}
