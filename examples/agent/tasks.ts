/**
 * The agent example's three definitions:
 *
 * - `agent.turn` — the agent loop, as phases (spec §12.8). `plan` asks a fake
 *   model which tools to call, spawns one child per tool call and parks on
 *   them; `observe` reads their outcomes and starts the next turn. In turn 0
 *   it also spawns one background subagent.
 * - `agent.tool` — one tool call: fake work that stops when `ctx.signal`
 *   aborts, and an `onAbort` that discards what the call left behind.
 * - `agent.subagent` — long-lived helper work, spawned with `background: true`:
 *   outside the agent's abort cascade and completing hold (spec §12.2).
 */
import { definePhases, defineTask, type TaskTree } from "../../src/index.js";
import { type AgentWorld, work } from "./world.js";

export interface ToolCall {
  tool: string;
  /** How long the fake call takes. */
  ms: number;
  /** Start the call this much later (a rate-limited tool). */
  delayMs?: number;
}

/** The fake model's plan per turn. Turn 1 has fast calls, slow calls and one that starts late. */
const PLAN: ToolCall[][] = [
  [
    { tool: "search", ms: 150 },
    { tool: "read_file", ms: 250 },
  ],
  [
    { tool: "grep", ms: 150 },
    { tool: "fetch_docs", ms: 300 },
    { tool: "run_tests", ms: 6_000 },
    { tool: "build", ms: 6_000 },
    { tool: "notify", ms: 100, delayMs: 30_000 },
  ],
  [{ tool: "write_answer", ms: 200 }],
];

export interface AgentInput {
  goal: string;
  turns: number;
}

interface AgentState {
  turn: number;
  subagent: number | null;
  observations: string[];
}

interface ToolInput {
  turn: number;
  tool: string;
  ms: number;
}

/** Counts a subtree's children by outcome (or status, for live ones). */
function countBelow(tree: TaskTree): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const c of tree.children) {
    if (c.task.background) continue;
    const k = c.task.outcome ?? c.task.status;
    counts[k] = (counts[k] ?? 0) + 1;
  }
  return counts;
}

export function agentTasks(w: AgentWorld) {
  const note = (text: string) => w.timeline.note(text);

  const tool = defineTask({
    name: "agent.tool",
    maxMs: 30_000,
    retry: { maxAttempts: 1 },
    async run(ctx, input: ToolInput) {
      const label = `#${ctx.taskId} ${input.tool}`;
      note(`${label} started`);
      try {
        await work(input.ms, ctx.signal);
      } catch (e) {
        const code = (ctx.signal.reason as { code?: string } | undefined)?.code ?? "?";
        note(`${label} saw ctx.signal abort (${code}) and stopped`);
        throw e;
      }
      note(`${label} finished`);
      return { tool: input.tool, output: `${input.tool}: ok` };
    },
    // Runs once, in a fresh invocation, after the call was aborted while or after it started (spec §12.5).
    onAbort(ctx, input: ToolInput) {
      note(`#${ctx.taskId} ${input.tool} onAbort (mode "${ctx.mode}"): discarded its partial output`);
      return { discarded: input.tool };
    },
  });

  const subagent = defineTask({
    name: "agent.subagent",
    maxMs: 30_000,
    async run(ctx, input: { topic: string; rounds: number }) {
      const notes: string[] = [];
      for (let i = 0; i < input.rounds; i++) {
        const found = await ctx.step(`research:${i}`, async () => {
          await work(250, ctx.signal);
          note(`#${ctx.taskId} subagent round ${i} done`);
          return `note ${i}`;
        });
        notes.push(found);
        // Durable pause: frees the worker slot; the task runs again from the top and replays its steps.
        await ctx.sleep(`pause:${i}`, 250);
      }
      return { topic: input.topic, notes };
    },
  });

  const agent = definePhases<AgentInput, AgentState, { turns: number; observations: string[] }>({
    name: "agent.turn",
    maxMs: 30_000,
    retry: { maxAttempts: 1 },
    initial: () => ({ phase: "plan", state: { turn: 0, subagent: null, observations: [] } }),
    phases: {
      async plan(ctx, state, input) {
        // The model's answer is decided once per turn: a rerun of this phase replays the step.
        const calls = await ctx.step("model", () => PLAN[state.turn] ?? []);
        const ids: number[] = [];
        for (const c of calls) {
          const opts = c.delayMs ? { delayMs: c.delayMs } : {};
          // The spawn name is unique per owner, so a rerun gets the same child back (spec §12.1).
          ids.push(await ctx.spawn(`t${state.turn}.${c.tool}`, tool, { turn: state.turn, ...c }, opts));
        }
        let sub = state.subagent;
        if (sub === null) {
          sub = await ctx.spawn("subagent", subagent, { topic: input.goal, rounds: 5 }, { background: true });
        }
        note(`#${ctx.taskId} agent turn ${state.turn}: spawned ${ids.length} tool calls, parks on them`);
        return { next: "observe", state: { ...state, subagent: sub }, wait: ids };
      },
      observe(ctx, state, input) {
        const outs = ctx.outcomes ?? [];
        note(`#${ctx.taskId} agent turn ${state.turn}: resumed with ${outs.length} outcomes`);
        const observations = [...state.observations, ...outs.map((o) => `${o.name}#${o.id}: ${o.outcome}`)];
        const turn = state.turn + 1;
        if (turn < input.turns) return { next: "plan", state: { ...state, turn, observations } };
        return { done: { turns: turn, observations } };
      },
    },
    // Runs after every ordinary child has ended, so it sees their final outcomes (spec §12.5).
    async onAbort(ctx) {
      const tree = await w.ratchet!.tree(ctx.taskId);
      const below = countBelow(tree);
      note(`#${ctx.taskId} agent onAbort: tool calls below ${JSON.stringify(below)}`);
      return { stopped: true, toolCalls: below };
    },
  });

  return { agent, tool, subagent };
}
