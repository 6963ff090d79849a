/**
 * A tool round with its hooks (spec §19.21): vetoed calls answered without a task, rewritten ones run
 * with their new arguments, every result passed through afterTool, in call order; calls to tools the
 * conversation's configuration leaves out are answered "not enabled" (spec §19.22).
 */
import type { TaskContext } from "../engine/context.js";
import type { ToolCall, ToolCallOutcome, ToolCalls } from "./tools/calls.js";
import type { TurnSetup } from "./turn.js";

/**
 * spec §19.21: a round with its hooks — vetoed calls answered without a task, rewritten ones run with
 * their new arguments, every result passed through afterTool — in call order.
 */
export async function runHookedRound(
  setup: TurnSetup,
  tools: ToolCalls,
  ctx: TaskContext,
  turn: number,
  conversationId: string,
  calls: { id: string; name: string; input: unknown }[],
): Promise<ToolCallOutcome[]> {
  const { hooks, enabled, cwd } = setup;
  const planned: (ToolCall | ToolCallOutcome)[] = [];
  for (const c of calls) {
    // spec §19.24: the implementation the turn resolved: the extension it came from goes with the call.
    const from = setup.tools.get(c.name)?.extension;
    const call: ToolCall = {
      callId: c.id,
      tool: c.name,
      args: c.input,
      ...(from ? { extension: from } : {}),
    };
    if (enabled && !enabled.has(c.name)) {
      // spec §19.22: a tool the conversation's configuration leaves out is not run.
      planned.push({
        callId: c.id,
        tool: c.name,
        result: { content: `tool "${c.name}" is not enabled in this conversation`, isError: true },
      });
      continue;
    }
    const before = hooks.beforeTool;
    // Steps: a decision is made once and replayed as made (spec §19.21).
    const d = before
      ? await ctx.step(
          `hook:beforeTool:${turn}:${c.id}`,
          async () => (await before({ turn, conversationId, call })) ?? null,
        )
      : null;
    if (d && "veto" in d)
      planned.push({ callId: c.id, tool: c.name, result: { content: `not run: ${d.veto}`, isError: true } });
    else planned.push(d && "args" in d ? { ...call, args: d.args } : call);
  }
  const toRun = planned.filter((p): p is ToolCall => !("result" in p));
  const ran = toRun.length > 0 ? await tools.runRound(ctx, toRun, { cwd, conversationId }) : [];
  const byId = new Map(ran.map((o) => [o.callId, o]));
  const out: ToolCallOutcome[] = [];
  for (const p of planned) {
    const o = "result" in p ? p : byId.get(p.callId)!;
    const call = "result" in p ? { callId: p.callId, tool: p.tool, args: null } : p;
    const afterTool = hooks.afterTool;
    const replaced = afterTool
      ? await ctx.step(
          `hook:afterTool:${turn}:${p.callId}`,
          async () =>
            (await afterTool({
              turn,
              conversationId,
              call,
              result: o.result,
              interrupted: o.interrupted === true,
            })) ?? null,
        )
      : null;
    out.push(replaced ? { ...o, result: replaced } : o);
  }
  return out;
}
