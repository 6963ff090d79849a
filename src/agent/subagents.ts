/**
 * Subagents as tools (spec §19.13–§19.14): a tool call that hands a prompt to a child conversation
 * and, in the foreground, answers with the child's final answer.
 *
 * - Foreground: the child conversation is owned by the call's task (spec §17.1), so aborting or
 *   failing the call aborts the child's run (the engine's cascade), and the parent's run is idle
 *   only when the child is. The call waits for the child's run parked (no worker held) and reads
 *   its answer.
 * - Background: the child is anchored outside the cascade (no owner); the call answers at once
 *   with the child's id, and a background task posts the child's answer to the parent conversation
 *   as a follow-up whose request id is the child's, so a restart never posts twice.
 *
 * Invariant: one child conversation per call (its id is made from the call's task id) and one
 * submission per call (its request id is the call id): a rerun of the call finds them, never makes
 * new ones (spec §19.13).
 */
import { z } from "zod";
import { defineTask, type TaskDefinition } from "../engine/definition.js";
import { ConfigError } from "../errors.js";
import type { Conversations } from "./conversations.js";
import { defineTool, type ToolDefinition } from "./tools/define.js";

export interface SubagentOptions {
  name: string;
  description: string;
  /** The Conversations whose run serves the child (resolved at call time; the same process's). */
  conversations: () => Conversations;
  /** Background: the parent gets the answer later, as a follow-up (spec §19.14). Default false. */
  background?: boolean;
  /** How long a foreground call waits for the child after its run ended. Default 60 s. */
  settleMs?: number;
}

export interface Subagent {
  readonly tool: ToolDefinition<{ prompt: string }>;
  /** Background subagents' reporter: register it beside the run (absent in the foreground). */
  readonly task?: TaskDefinition<ReportInput, null>;
}

interface ReportInput {
  parent: string;
  child: string;
  runTaskId: number;
  submissionId: number;
}

/** The text of an answer entry, for the parent's model. */
function answerText(data: unknown): string {
  if (typeof data === "string") return data;
  const t = (data as { text?: unknown } | null)?.text;
  return typeof t === "string" ? t : JSON.stringify(data);
}

export function defineSubagent(o: SubagentOptions): Subagent {
  if (typeof o?.conversations !== "function")
    throw new ConfigError("defineSubagent needs conversations: () => Conversations");
  const settleMs = o.settleMs ?? 60_000;

  const report =
    o.background === true
      ? defineTask<ReportInput, null>({
          name: `ratchet.subagent-report:${o.name}`,
          maxMs: 60_000,
          async run(ctx, input) {
            // spec §19.14: parked until the child's run ended, then one follow-up to the parent.
            await ctx.waitFor([input.runTaskId]);
            const conv = o.conversations();
            const sub = await conv.submission(input.submissionId);
            const settled = sub ? await sub.wait({ timeoutMs: settleMs }) : null;
            let text = `subagent ${input.child} ended without an answer`;
            if (settled?.status === "done") {
              const [answer] = await conv.entries(input.child, { from: settled.answerSeq, limit: 1 });
              text = answerText(answer?.data);
            } else if (settled) text = `subagent ${input.child} ended unanswered (${settled.reason})`;
            await conv.submit(
              input.parent,
              { text, from: input.child },
              { requestId: `subagent:${input.child}` },
            );
            return null;
          },
        })
      : undefined;

  const tool = defineTool({
    name: o.name,
    description: o.description,
    schema: z.object({ prompt: z.string().min(1).max(100_000) }),
    replay: "safe",
    async execute(ctx, a) {
      const task = ctx.task;
      if (!task) throw new ConfigError(`subagent "${o.name}" runs only as a tool call (runRound)`);
      const conv = o.conversations();
      const child = `${ctx.conversationId ?? "sub"}:${o.name}:${task.taskId}`;
      if (report) {
        if (!ctx.conversationId)
          throw new ConfigError(`background subagent "${o.name}" needs the round's conversationId`);
        await conv.create(child, { title: `${o.name}: ${a.prompt.slice(0, 60)}` });
        const sub = await conv.submit(child, { text: a.prompt }, { requestId: `call:${ctx.callId}` });
        const runTaskId = sub.record.runTaskId ?? (await conv.get(child))?.runTaskId;
        if (runTaskId == null) return { content: `subagent ${child} could not start`, isError: true };
        await task.spawn(
          `report:${child}`,
          report,
          {
            parent: ctx.conversationId,
            child,
            runTaskId,
            submissionId: sub.id,
          },
          { background: true },
        );
        return {
          content: `started background subagent ${child}; its answer will arrive as a message`,
          details: { child },
        };
      }
      await conv.create(child, { ownerTaskId: task.taskId, title: `${o.name}: ${a.prompt.slice(0, 60)}` });
      const sub = await conv.submit(child, { text: a.prompt }, { requestId: `call:${ctx.callId}` });
      const now = await conv.submission(sub.id);
      const run = now?.record.runTaskId ?? null;
      // Parked until the child's run ended; the call's rerun comes back here and finds it ended.
      if (run !== null && now?.record.status === "placed") await task.waitFor([run]);
      const settled = await sub.wait({ timeoutMs: settleMs });
      if (settled.status !== "done")
        return {
          content: `subagent ${child} ended unanswered (${settled.reason})`,
          isError: true,
          details: { child },
        };
      const [answer] = await conv.entries(child, { from: settled.answerSeq, limit: 1 });
      return { content: answerText(answer?.data), details: { child, answerSeq: settled.answerSeq } };
    },
  });
  return { tool, ...(report ? { task: report } : {}) };
}
