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
import type { TaskContext } from "../engine/context.js";
import { ConfigError } from "../errors.js";
import { generate, type TurnResult } from "../models/generate.js";
import type { LanguageModel, ModelPrompt } from "../models/stream.js";
import {
  applyBackground,
  BACKGROUND_KEY,
  defineBackgroundCompaction,
  inFlight,
  softLimit,
  startBackground,
} from "./background.js";
import {
  type CompactionPolicy,
  compact,
  contextFor,
  DEFAULT_KEEP_RECENT_TOKENS,
  DEFAULT_RESERVE_TOKENS,
  isContextOverflow,
  promptTokens,
} from "./compaction.js";
import type { ThinkingLevel } from "./config.js";
import type { Extensions } from "./extensions.js";
import { type HooksSpec, hooksOf } from "./hooks.js";
import { promptOf } from "./prompt.js";
import { applyControl, handoffFromTool } from "./reset.js";
import { runHookedRound } from "./round.js";
import { defineRun, type RunContext, type RunDefinition, type RunSpec } from "./run.js";
import { planSections, renderSections, shownSections } from "./sections.js";
import type { ToolCalls } from "./tools/calls.js";
import { callsOf, offeredOf, setupTurn, type TurnSetup } from "./turn.js";

export { promptOf } from "./prompt.js";

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
  /** Installed extensions: their tools, sections, hooks and tasks (spec §19.23–§19.24). */
  extensions?: Extensions;
  /** The default thinking level (a conversation's configuration may choose another). */
  thinking?: ThinkingLevel;
  /** Models a conversation may choose by name in its configuration (spec §19.22). */
  models?: Record<string, LanguageModel>;
  /** The run task's fairness and rate limits (spec §14.10, §14.12), keyed from `{ conversationId }`. */
  fairness?: RunSpec<null>["fairness"];
  rateLimit?: RunSpec<null>["rateLimit"];
  /** At most `limit` runs of one tenant's conversations at once (spec §19.31). */
  tenant?: RunSpec<null>["tenant"];
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
  const calls = callsOf(spec);
  const modelOf = () =>
    typeof spec.model === "function" ? (spec.model as () => LanguageModel)() : spec.model;

  const background = defineBackgroundCompaction(
    spec.name,
    () => def,
    (name) => (name === undefined ? modelOf() : spec.models?.[name]),
  );
  const def: RunDefinition<null> = defineRun<null>({
    name: spec.name,
    version: spec.version,
    maxMs,
    fairness: spec.fairness,
    rateLimit: spec.rateLimit,
    ...(spec.tenant === undefined ? {} : { tenant: spec.tenant }),
    async run(rc: RunContext, ctx: TaskContext) {
      // Settings are read at each use (spec §19.24): a getter on the spec makes them live.
      const keepRecentTokens = () => spec.compaction?.keepRecentTokens ?? DEFAULT_KEEP_RECENT_TOKENS;
      let hooks = hooksOf(spec.hooks);
      const compactAs = async (name: string, reason: string, model: LanguageModel = modelOf()) =>
        (await hooks.beforeCompact?.({ conversationId: rc.conversationId, reason })) === false
          ? { applied: false as const, reason: "skipped" as const }
          : compact(rc, ctx, { name, model, keepRecentTokens: keepRecentTokens(), reason });
      // spec §19.20: an input { type: "compact" } (ratchet compact) compacts now and answers that it did.
      const [first] = await rc.inputs();
      if ((first?.input as { type?: unknown } | undefined)?.type === "compact") {
        const c = await compactAs("compact-asked", "asked");
        await rc.answer({ kind: "custom", name: "compacted", data: c });
        return null;
      }
      // spec §19.26–§19.27: a reset or handoff that started this run is applied first.
      if ((await applyControl(rc, await rc.inputs(), "control-start")).kind === "ended") return null;
      for (let turn = 0; turn < maxTurns; turn++) {
        // spec §19.28: a background summary that ended meanwhile is applied (or dropped) first.
        const state = await rc.state();
        if (await applyBackground(rc, state)) delete state[BACKGROUND_KEY];
        // spec §19.22, §19.24: configuration, extensions and hooks, resolved once for this turn.
        const setup = await setupTurn(spec, rc, calls);
        hooks = setup.hooks;
        const { model } = setup;
        const window = spec.compaction?.contextWindow;
        const limit =
          window === undefined
            ? Number.POSITIVE_INFINITY
            : window - (spec.compaction?.reserveTokens ?? DEFAULT_RESERVE_TOKENS);
        const offered = offeredOf(setup);
        const prepare = (tag: string) => preparePrompt(rc, setup, `system-${turn}${tag}`);
        let prompt = await prepare("");
        // spec §19.18: near the window, compact before asking.
        const tokens = promptTokens(prompt);
        if (tokens > limit && (await compactAs(`compact-${turn}`, "threshold", model)).applied)
          prompt = await prepare("-compacted");
        else if (
          tokens > softLimit(limit, spec.compaction?.backgroundTokens) &&
          tokens <= limit &&
          !inFlight(state) &&
          (await hooks.beforeCompact?.({ conversationId: rc.conversationId, reason: "background" })) !== false
        )
          // spec §19.28: past the soft threshold, summarise beside the conversation.
          await startBackground(rc, background, turn, {
            keepRecentTokens: keepRecentTokens(),
            ...(setup.config.model === undefined ? {} : { model: setup.config.model }),
          });
        // A long answer keeps the run's lease (spec §3.8): maxMs stays short, so a dead worker's
        // run is taken over soon after, while a live one streams as long as the model talks.
        const beat = setInterval(
          () => void ctx.heartbeat().catch(() => {}),
          Math.max(250, Math.floor(maxMs / 3)),
        );
        const call = {
          ...(offered ? { tools: offered } : {}),
          ...(setup.reasoning ? { reasoning: setup.reasoning } : {}),
        };
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
            ...(Object.keys(call).length > 0 ? { call } : {}),
          });
        prompt = (await hooks.beforeRequest?.({ turn, conversationId: rc.conversationId, prompt })) ?? prompt;
        const r = await ask(`turn-${turn}`, prompt)
          .catch(async (err: unknown) => {
            // spec §19.18: the provider says the context overflowed: compact, then retry the turn once.
            if (
              !isContextOverflow(err) ||
              !(await compactAs(`compact-${turn}-overflow`, "overflow", model)).applied
            )
              throw err;
            return ask(`turn-${turn}-retry`, await prepare("-retry"));
          })
          .finally(() => clearInterval(beat));
        // A step: once per turn, not again when the run replays the turn (spec §19.21).
        const after = hooks.afterResponse;
        if (after)
          await ctx.step(`hook:afterResponse:${turn}`, async () => {
            await after({ turn, conversationId: rc.conversationId, result: r });
            return null;
          });
        const asked = r.toolCalls.map((c) => ({ id: c.id, name: c.name, input: parseInput(c.input) }));
        const data: AssistantData = { text: r.text, usage: r.usage, cost: r.cost, route: r.route };
        if (r.fallbacks.length > 0) data.fallbacks = r.fallbacks;
        if (asked.length === 0) {
          await rc.answer({ kind: "assistant", data });
          return null;
        }
        if (!calls) {
          // spec §19.15: asking for tools that are not there ends the run with a clear error.
          await rc.answer({
            kind: "assistant",
            data: {
              ...data,
              toolCalls: asked,
              error: `the model asked for ${asked.map((c) => c.name).join(", ")}, but this agent has no tools`,
            },
          });
          return null;
        }
        await rc.commit(`assistant-${turn}`, {
          entries: [{ kind: "assistant", data: { ...data, toolCalls: asked } }],
        });
        const outcomes = await runHookedRound(setup, calls, ctx, turn, rc.conversationId, asked);
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
        // spec §19.27: a tool's handoff (the last in call order) starts the fresh context before the
        // boundary, so steers placed there stay in it.
        const handing = outcomes.filter((o) => o.result.control?.handoff).at(-1);
        if (handing)
          await handoffFromTool(rc, `handoff-${turn}`, handing.tool, handing.result.control!.handoff!);
        const steers = await rc.boundary(`turn-${turn}`);
        // spec §19.26: a reset or handoff placed at this boundary applies here.
        if ((await applyControl(rc, steers, `control-${turn}`)).kind === "ended") return null;
        if (handing) continue;
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
  // spec §19.24: the Conversations that serves this agent registers its extensions' tasks.
  def.attach = (ratchet) => {
    if (!ratchet.definitions().includes(background)) ratchet.register(background);
    spec.extensions?.attach(ratchet);
  };
  return def;
}

/**
 * spec §19.25: the request's prompt from the context, after appending the section entry that brings
 * what the model was shown up to what this turn wants (none when nothing changed).
 */
async function preparePrompt(rc: RunContext, setup: TurnSetup, name: string): Promise<ModelPrompt> {
  let entries = await contextFor(rc);
  const shown = shownSections(entries);
  const input = { conversationId: rc.conversationId, cwd: setup.cwd, config: setup.config };
  const plan = planSections(shown, await renderSections(setup.sections, input, shown));
  if (plan) {
    await rc.commit(name, { entries: [{ kind: "system", data: plan }] });
    entries = await contextFor(rc);
  }
  return promptOf(undefined, entries);
}
