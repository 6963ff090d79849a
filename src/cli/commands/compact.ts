/**
 * `ratchet compact ID [--wait D] [--run NAME]` (spec §19.20): asks a conversation's agent to compact
 * its context now, by submitting the input `{ type: "compact" }`; the agent's run answers with a
 * custom `compacted` entry. Needs the agent's definition (--tasks or ratchet.config.js), as `send`.
 */
import type { Command } from "commander";
import { Conversations } from "../../agent/conversations.js";
import { option, parseDuration, UsageError } from "../args.js";
import { print, printJson } from "../format.js";
import { withSession } from "../session.js";

export function registerCompact(program: Command): void {
  program
    .command("compact")
    .description("compact a conversation's context now (the agent summarises older entries)")
    .argument("<id>", "conversation id")
    .option("--run <name>", "the run definition (default: the only one loaded)")
    .option("--wait <duration>", "how long to wait for the compaction (default 5m)", option(parseDuration))
    .action(async (id: string, o: { run?: string; wait?: number }, cmd: Command) => {
      await withSession(cmd, { definitions: true, requireDefinitions: true }, async (s) => {
        const c = Conversations.of(s.ratchet, { run: o.run });
        if (!(await c.get(id))) throw new UsageError(`there is no conversation "${id}"`);
        const sub = await c.submit(id, { type: "compact" });
        const settled = await sub.wait({ timeoutMs: o.wait ?? 300_000 });
        const answer =
          settled.status === "done"
            ? (await c.entries(id, { from: settled.answerSeq, limit: 1 }))[0]
            : undefined;
        const result = (answer?.data ?? null) as { applied?: boolean; reason?: string } | null;
        if (s.json) return printJson({ submission: settled.submission.id, status: settled.status, result });
        if (settled.status !== "done") return print(`not compacted: ${settled.reason}`);
        print(
          result?.applied
            ? `compacted (entry #${answer!.seq})`
            : `nothing compacted: ${result?.reason ?? "no answer"}`,
        );
      });
    });
}
