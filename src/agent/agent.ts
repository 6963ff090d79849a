/**
 * `defineAgent` (spec §19.15–§19.16): a conversation's run as an agent loop. Each turn builds the
 * model's context from the conversation (entries since the newest reset or compaction), asks the
 * model through `generate` (a durable turn, spec §18.7), commits the answer as an assistant entry,
 * runs the tool calls it asked for as one round of child tasks (spec §19.10–§19.11), commits their
 * results, and delivers queued steers at the boundary before the next turn. It stops at a final
 * answer (a turn without tool calls) or at `maxTurns`.
 *
 * Every write is keyed by the run and the turn, so a rerun after a crash replays committed turns
 * (no second request, no second usage row), finds its round's calls by their ids, and writes no
 * entry twice.
 *
 * Invariant: a tool-call entry is always followed, in the model's context, by a result for each of
 * its calls — a synthesized error result where none was committed (spec §19.16).
 */
import type { LanguageModelV4Message } from "@ai-sdk/provider";
import type { TaskContext } from "../engine/context.js";
import { ConfigError } from "../errors.js";
import { generate, type TurnResult } from "../models/generate.js";
import type { LanguageModel, ModelPrompt } from "../models/stream.js";
import type { EntryRecord } from "../store/conversations/types.js";
import {
  type CompactionPolicy,
  compact,
  contextFor,
  DEFAULT_KEEP_RECENT_TOKENS,
  DEFAULT_RESERVE_TOKENS,
  isContextOverflow,
  promptTokens,
} from "./compaction.js";
import { agentConfigOf } from "./config.js";
import { type AgentHooks, type HooksSpec, hooksOf } from "./hooks.js";
import { defineRun, type RunContext, type RunDefinition, type RunSpec } from "./run.js";
import type { ToolCall, ToolCallOutcome, ToolCalls } from "./tools/calls.js";

export const DEFAULT_MAX_TURNS = 20;
export const MAX_MAX_TURNS = 500;

export interface AgentSpec {
  name: string;
  /** A model or a router (spec §18); a function is resolved at each turn. */
  model: LanguageModel | (() => LanguageModel);
  /** The system prompt. */
  instructions?: string;
  /** The tools the model may call (defineToolCalls); register `tools.task` beside the agent's task. */
  tools?: ToolCalls;
  /** The working directory of the conversation's tools. Default: this process's cwd. */
  cwd?: string | ((conversationId: string) => string);
  /** Turns one run may take (spec §19.15). Default 20. */
  maxTurns?: number;
  /** Bound of the run's invocation between heartbeats; a turn heartbeats every maxMs / 3. Default 60 s. */
  maxMs?: number;
  version?: number;
  /** Per-turn stream idle and overall timeouts (spec §18.4). */
  idleTimeoutMs?: number;
  timeoutMs?: number;
  /** When and how to compact the context (spec §19.18–§19.20). */
  compaction?: CompactionPolicy;
  /** Code run at the loop's phases (spec §19.21); a function is read once per turn. */
  hooks?: HooksSpec;
  /** Models a conversation may choose by name in its configuration (spec §19.22). */
  models?: Record<string, LanguageModel>;
  /** The run task's fairness and rate limits (spec §14.10, §14.12), keyed from `{ conversationId }`. */
  fairness?: RunSpec<null>["fairness"];
  rateLimit?: RunSpec<null>["rateLimit"];
}

/** What an assistant entry of the agent holds. */
export interface AssistantData {
  text: string;
  toolCalls?: { id: string; name: string; input: unknown }[];
  usage?: TurnResult["usage"];
  cost?: number;
  route?: string;
  /** Routes the router tried before `route`, with the code each failed with (spec §18.5). */
  fallbacks?: TurnResult["fallbacks"];
  error?: string;
}

/** What a tool-result entry of the agent holds. */
export interface ToolResultData {
  callId: string;
  tool: string;
  content: unknown;
  isError?: boolean;
  interrupted?: boolean;
}

function parseInput(input: string): unknown {
  try {
    return JSON.parse(input);
  } catch {
    return input;
  }
}

export function defineAgent(spec: AgentSpec): RunDefinition<null> {
  const maxTurns = spec.maxTurns ?? DEFAULT_MAX_TURNS;
  const maxMs = spec.maxMs ?? 60_000;
  if (!Number.isInteger(maxTurns) || maxTurns < 1 || maxTurns > MAX_MAX_TURNS)
    throw new ConfigError(`agent "${spec.name}": maxTurns must be an integer in [1, ${MAX_MAX_TURNS}]`);
  if (spec.model === undefined || spec.model === null)
    throw new ConfigError(`agent "${spec.name}" needs a model`);
  const modelOf = () =>
    typeof spec.model === "function" ? (spec.model as () => LanguageModel)() : spec.model;
  const cwdOf = (id: string) => (typeof spec.cwd === "function" ? spec.cwd(id) : (spec.cwd ?? process.cwd()));
  const toolSpecs = spec.tools
    ? [...spec.tools.tools.values()].map((t) => ({
        type: "function" as const,
        name: t.name,
        description: t.description,
        inputSchema: t.parameters as never,
      }))
    : undefined;

  return defineRun<null>({
    name: spec.name,
    version: spec.version,
    maxMs,
    fairness: spec.fairness,
    rateLimit: spec.rateLimit,
    async run(rc: RunContext, ctx: TaskContext) {
      const keepRecentTokens = spec.compaction?.keepRecentTokens ?? DEFAULT_KEEP_RECENT_TOKENS;
      let hooks: AgentHooks = hooksOf(spec.hooks);
      const compactAs = async (name: string, reason: string) =>
        (await hooks.beforeCompact?.({ conversationId: rc.conversationId, reason })) === false
          ? { applied: false as const, reason: "skipped" as const }
          : compact(rc, ctx, { name, model: modelOf(), keepRecentTokens, reason });
      // spec §19.20: an input { type: "compact" } (ratchet compact) compacts now and answers that it did.
      const [first] = await rc.inputs();
      if ((first?.input as { type?: unknown } | undefined)?.type === "compact") {
        const c = await compactAs("compact-asked", "asked");
        await rc.answer({ kind: "custom", name: "compacted", data: c });
        return null;
      }
      const window = spec.compaction?.contextWindow;
      const limit =
        window === undefined
          ? Number.POSITIVE_INFINITY
          : window - (spec.compaction?.reserveTokens ?? DEFAULT_RESERVE_TOKENS);
      for (let turn = 0; turn < maxTurns; turn++) {
        hooks = hooksOf(spec.hooks);
        // spec §19.22: the conversation's own configuration, read at each turn.
        const cfg = agentConfigOf(await rc.state());
        const model = cfg.model === undefined ? modelOf() : spec.models?.[cfg.model];
        if (!model) throw new ConfigError(`agent "${spec.name}" has no model named "${cfg.model}"`);
        const instructions = cfg.instructions ?? spec.instructions;
        const enabled = cfg.tools === undefined ? null : new Set(cfg.tools);
        const offered = enabled ? toolSpecs?.filter((t) => enabled.has(t.name)) : toolSpecs;
        let prompt = promptOf(instructions, await contextFor(rc));
        // spec §19.18: near the window, compact before asking.
        if (promptTokens(prompt) > limit && (await compactAs(`compact-${turn}`, "threshold")).applied)
          prompt = promptOf(instructions, await contextFor(rc));
        // A long answer keeps the run's lease (spec §3.8): maxMs stays short, so a dead worker's
        // run is taken over soon after, while a live one streams as long as the model talks.
        const beat = setInterval(
          () => void ctx.heartbeat().catch(() => {}),
          Math.max(250, Math.floor(maxMs / 3)),
        );
        const ask = (name: string, p: ModelPrompt) =>
          generate(ctx, {
            name,
            model,
            prompt: p,
            conversationId: rc.conversationId,
            // spec §18.7: the conversation is the provider session; a fork or child has its own id.
            sessionId: rc.conversationId,
            ...(spec.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: spec.idleTimeoutMs }),
            ...(spec.timeoutMs === undefined ? {} : { timeoutMs: spec.timeoutMs }),
            ...(offered ? { call: { tools: offered } } : {}),
          });
        prompt = (await hooks.beforeRequest?.({ turn, conversationId: rc.conversationId, prompt })) ?? prompt;
        const r = await ask(`turn-${turn}`, prompt)
          .catch(async (err: unknown) => {
            // spec §19.18: the provider says the context overflowed: compact, then retry the turn once.
            if (!isContextOverflow(err) || !(await compactAs(`compact-${turn}-overflow`, "overflow")).applied)
              throw err;
            return ask(`turn-${turn}-retry`, promptOf(instructions, await contextFor(rc)));
          })
          .finally(() => clearInterval(beat));
        // A step: once per turn, not again when the run replays the turn (spec §19.21).
        const after = hooks.afterResponse;
        if (after)
          await ctx.step(`hook:afterResponse:${turn}`, async () => {
            await after({ turn, conversationId: rc.conversationId, result: r });
            return null;
          });
        const calls = r.toolCalls.map((c) => ({ id: c.id, name: c.name, input: parseInput(c.input) }));
        const data: AssistantData = { text: r.text, usage: r.usage, cost: r.cost, route: r.route };
        if (r.fallbacks.length > 0) data.fallbacks = r.fallbacks;
        if (calls.length === 0) {
          await rc.answer({ kind: "assistant", data });
          return null;
        }
        if (!spec.tools) {
          // spec §19.15: asking for tools that are not there ends the run with a clear error.
          await rc.answer({
            kind: "assistant",
            data: {
              ...data,
              toolCalls: calls,
              error: `the model asked for ${calls.map((c) => c.name).join(", ")}, but this agent has no tools`,
            },
          });
          return null;
        }
        await rc.commit(`assistant-${turn}`, {
          entries: [{ kind: "assistant", data: { ...data, toolCalls: calls } }],
        });
        const outcomes = await runHookedRound(
          spec.tools,
          hooks,
          ctx,
          turn,
          rc.conversationId,
          cfg.cwd ?? cwdOf(rc.conversationId),
          calls,
          enabled,
        );
        await rc.commit(`results-${turn}`, {
          entries: outcomes.map((o) => ({
            kind: "tool-result" as const,
            data: {
              callId: o.callId,
              tool: o.tool,
              content: o.result.content,
              ...(o.result.isError ? { isError: true } : {}),
              ...(o.interrupted ? { interrupted: true } : {}),
            } satisfies ToolResultData,
          })),
        });
        await rc.boundary(`turn-${turn}`);
        // spec §19.21: a tool's result may end the run after its round.
        const stop = outcomes.find((o) => o.result.control?.terminate);
        if (stop) {
          await rc.answer({ kind: "assistant", data: { text: r.text, terminatedBy: stop.tool } });
          return null;
        }
      }
      await rc.answer({
        kind: "assistant",
        data: { text: "", error: `stopped after ${maxTurns} turns (maxTurns)` } satisfies AssistantData,
      });
      return null;
    },
  });
}

function textOf(data: unknown): string {
  if (typeof data === "string") return data;
  const t = (data as { text?: unknown } | null)?.text;
  return typeof t === "string" ? t : JSON.stringify(data);
}

/**
 * spec §19.16: the model's prompt from the conversation's context — the instructions, then each
 * entry as its message; consecutive tool results as one tool message; a result synthesized for every
 * call that has none; custom entries left out.
 */
export function promptOf(instructions: string | undefined, entries: readonly EntryRecord[]): ModelPrompt {
  const out: LanguageModelV4Message[] = [];
  if (instructions) out.push({ role: "system", content: instructions });
  let open = new Map<string, string>();
  const closeOpen = () => {
    if (open.size === 0) return;
    out.push({
      role: "tool",
      content: [...open].map(([id, name]) => ({
        type: "tool-result" as const,
        toolCallId: id,
        toolName: name,
        output: { type: "text" as const, value: "error: no result was recorded for this call" },
      })),
    });
    open = new Map();
  };
  for (const e of entries) {
    if (e.kind === "tool-result") {
      const d = e.data as ToolResultData;
      if (!open.has(d.callId)) continue;
      open.delete(d.callId);
      const value = typeof d.content === "string" ? d.content : JSON.stringify(d.content);
      const part = {
        type: "tool-result" as const,
        toolCallId: d.callId,
        toolName: d.tool,
        output: { type: "text" as const, value: d.isError ? `error: ${value}` : value },
      };
      const last = out[out.length - 1];
      if (last?.role === "tool") last.content.push(part);
      else out.push({ role: "tool", content: [part] });
      continue;
    }
    closeOpen();
    if (e.kind === "user") out.push({ role: "user", content: [{ type: "text", text: textOf(e.data) }] });
    else if (e.kind === "system") out.push({ role: "system", content: textOf(e.data) });
    else if (e.kind === "compaction" || e.kind === "reset") {
      const t = textOf(e.data);
      if (t)
        out.push({
          role: "user",
          content: [{ type: "text", text: `[summary of the conversation so far]\n${t}` }],
        });
    } else if (e.kind === "assistant") {
      const d = e.data as AssistantData;
      if (d?.error && !d.text && !d.toolCalls) continue;
      const content: Extract<LanguageModelV4Message, { role: "assistant" }>["content"] = [];
      if (d?.text) content.push({ type: "text", text: d.text });
      for (const c of d?.toolCalls ?? []) {
        content.push({ type: "tool-call", toolCallId: c.id, toolName: c.name, input: c.input });
        open.set(c.id, c.name);
      }
      if (content.length > 0) out.push({ role: "assistant", content });
    }
  }
  closeOpen();
  return out;
}

/**
 * spec §19.21: a round with its hooks — vetoed calls answered without a task, rewritten ones run with
 * their new arguments, every result passed through afterTool — in call order.
 */
async function runHookedRound(
  tools: ToolCalls,
  hooks: AgentHooks,
  ctx: TaskContext,
  turn: number,
  conversationId: string,
  cwd: string,
  calls: { id: string; name: string; input: unknown }[],
  enabled: ReadonlySet<string> | null,
): Promise<ToolCallOutcome[]> {
  const planned: (ToolCall | ToolCallOutcome)[] = [];
  for (const c of calls) {
    const call: ToolCall = { callId: c.id, tool: c.name, args: c.input };
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
