/**
 * `ratchet reset ID [--note TEXT]` and `ratchet handoff ID --note TEXT [--model NAME]
 * [--instructions TEXT]` (spec §19.26–§19.27): start a fresh context, or hand the conversation to
 * another agent configuration, by submitting the control input; a busy conversation applies it at
 * its run's next boundary. Needs the agent's definition (--tasks or ratchet.config.js), as `send`.
 * With `--wait`, waits until it was applied.
 */
import type { Command } from "commander";
import { Conversations } from "../../agent/conversations.js";
import { handoff, reset } from "../../agent/reset.js";
import { option, parseDuration, UsageError } from "../args.js";
import { print, printJson } from "../format.js";
import { withSession } from "../session.js";

interface ControlOptions {
  note?: string;
  model?: string;
  instructions?: string;
  requestId?: string;
  run?: string;
  wait?: number;
}

export function registerReset(program: Command): void {
  for (const control of ["reset", "handoff"] as const) {
    const cmd = program
      .command(control)
      .description(
        control === "reset"
          ? "start a fresh context (at the running run's next boundary when busy)"
          : "hand the conversation to another agent configuration with a fresh context that starts with the note",
      )
      .argument("<id>", "conversation id")
      .option(
        "--note <text>",
        control === "reset" ? "a note the fresh context keeps" : "the next agent's task (required)",
      )
      .option("--request-id <id>", "idempotency key: a repeat returns the first submission")
      .option("--run <name>", "the run definition (default: the only one loaded)")
      .option("--wait <duration>", "wait until it was applied (e.g. 30s)", option(parseDuration));
    if (control === "handoff")
      cmd
        .option("--model <name>", "one of the agent's named models")
        .option("--instructions <text>", "the new instructions");
    cmd.action(async (id: string, o: ControlOptions, c: Command) => {
      await withSession(c, { definitions: true, requireDefinitions: true }, async (s) => {
        const conv = Conversations.of(s.ratchet, { run: o.run });
        if (!(await conv.get(id))) throw new UsageError(`there is no conversation "${id}"`);
        const requestId = o.requestId === undefined ? {} : { requestId: o.requestId };
        const config = {
          ...(o.model === undefined ? {} : { model: o.model }),
          ...(o.instructions === undefined ? {} : { instructions: o.instructions }),
        };
        if (control === "handoff" && !o.note) throw new UsageError("handoff needs --note");
        const sub =
          control === "reset"
            ? await reset(conv, id, { ...(o.note === undefined ? {} : { note: o.note }), ...requestId })
            : await handoff(conv, id, {
                note: o.note as string,
                ...(Object.keys(config).length > 0 ? { config } : {}),
                ...requestId,
              });
        const settled = o.wait === undefined ? null : await sub.wait({ timeoutMs: o.wait });
        const status = settled?.status ?? sub.record.status;
        if (s.json) return printJson({ submission: sub.id, created: sub.created, status });
        print(
          `${control} ${sub.created ? "submitted" : "already submitted"} (submission ${sub.id}, ${status})`,
        );
      });
    });
  }
}
