/**
 * A conversation driven by ordinary task code (spec §17): no model, a "calculator agent". Each run
 * reads its inputs, records a tool call, runs the tool as a child task (durable, in the
 * conversation's scope, so an abort reaches it), records the result, lets steers join at the turn
 * boundary, and answers. The run replays from the top after its wait; its commits are keyed, so
 * the replay writes nothing twice.
 */
import { defineRun } from "../../src/agent/index.js";
import { defineTask } from "../../src/index.js";

/** The tool: evaluates "a op b" for + - * /. A `wait` input parks it until the signal "release". */
export const calc = defineTask({
  name: "example.calc",
  async run(ctx, input: { expr: string }) {
    if (input.expr === "wait") await ctx.waitForEvent("release", { timeoutMs: 60_000 });
    const m = /^\s*(-?\d+(?:\.\d+)?)\s*([-+*/])\s*(-?\d+(?:\.\d+)?)\s*$/.exec(input.expr);
    if (!m) return { error: `cannot compute "${input.expr}"` };
    const [a, op, b] = [Number(m[1]), m[2], Number(m[3])];
    return { value: op === "+" ? a + b : op === "-" ? a - b : op === "*" ? a * b : a / b };
  },
});

export const calculator = defineRun({
  name: "example.calculator",
  maxMs: 30_000,
  async run(run, ctx) {
    const [first] = await run.inputs();
    const expr = (first!.input as { text: string }).text;
    await run.commit("call", { entries: [{ kind: "tool-call", data: { tool: "calc", expr } }] });
    const child = await ctx.spawn("calc", calc, { expr });
    const [done] = await ctx.waitFor([child]);
    const result = done!.result as { value?: number; error?: string };
    await run.commit("result", {
      entries: [{ kind: "tool-result", data: result }],
      state: { lastValue: result.value ?? null },
    });
    const steers = await run.boundary("after-calc");
    const note =
      steers.length > 0
        ? ` (also noted: ${steers.map((s) => (s.input as { text: string }).text).join("; ")})`
        : "";
    const text = result.error ?? `${expr} = ${result.value}`;
    await run.answer({ kind: "assistant", data: { text: `${text}${note}` } });
  },
});
