/**
 * What one turn runs with (spec §19.22, §19.24): resolved once, at the turn's start, from the
 * conversation's stored configuration, the agent's settings (read at each use, so getters make them
 * live) and one snapshot of the installed extensions. Nothing in it changes while the turn runs:
 * a replaced extension, hook or setting reaches the next turn.
 */
import { ConfigError } from "../errors.js";
import type { LanguageModel } from "../models/stream.js";
import type { AgentSpec } from "./agent.js";
import { type AgentConfig, agentConfigOf, reasoningOf } from "./config.js";
import { type PromptSection, type ResolvedTool, resolveExtensions, section } from "./extensions.js";
import { type AgentHooks, composeHooks, hooksOf } from "./hooks.js";
import type { RunContext } from "./run.js";
import type { ToolCalls } from "./tools/calls.js";

export interface TurnSetup {
  config: AgentConfig;
  model: LanguageModel;
  hooks: AgentHooks;
  /** The tools this turn offers, by name, with the extension each came from. */
  tools: Map<string, ResolvedTool>;
  /** The configuration's tool subset, or null for every tool. */
  enabled: ReadonlySet<string> | null;
  /** What runs the calls: the agent's ToolCalls, or its extensions' (none: no tools at all). */
  calls: ToolCalls | undefined;
  sections: PromptSection[];
  instructions: string | undefined;
  cwd: string;
  /** The request's reasoning effort, from the thinking level. */
  reasoning: ReturnType<typeof reasoningOf>;
}

/** The ToolCalls an agent's rounds run through; one that can run its extensions' tools (spec §19.24). */
export function callsOf(spec: AgentSpec): ToolCalls | undefined {
  if (spec.tools && spec.extensions && spec.tools.extensions !== spec.extensions)
    throw new ConfigError(
      `agent "${spec.name}": with extensions, make its tools with defineToolCalls({ tools, extensions })`,
    );
  return spec.tools ?? spec.extensions?.calls;
}

const ENVIRONMENT = section("environment", ({ cwd }) => `Working directory: ${cwd}`);

export async function setupTurn(
  spec: AgentSpec,
  rc: RunContext,
  calls: ToolCalls | undefined,
): Promise<TurnSetup> {
  const config = agentConfigOf(await rc.state());
  const model =
    config.model === undefined
      ? typeof spec.model === "function"
        ? (spec.model as () => LanguageModel)()
        : spec.model
      : spec.models?.[config.model];
  if (!model) throw new ConfigError(`agent "${spec.name}" has no model named "${config.model}"`);
  // spec §19.24: one snapshot per turn; a replacement during the turn reaches the next one.
  const resolved = resolveExtensions(
    spec.extensions?.snapshot() ?? [],
    config.extensions,
    spec.tools?.tools.values(),
  );
  const enabled = config.tools === undefined ? null : new Set(config.tools);
  const tools = new Map([...resolved.tools].filter(([name]) => !enabled || enabled.has(name)));
  const cwd =
    config.cwd ??
    (typeof spec.cwd === "function" ? spec.cwd(rc.conversationId) : (spec.cwd ?? process.cwd()));
  const instructions = config.instructions ?? spec.instructions;
  // spec §19.25: extension sections, then the environment (when tools are offered), then instructions.
  const sections = [
    ...resolved.sections,
    ...(calls && tools.size > 0 ? [ENVIRONMENT] : []),
    ...(instructions ? [section("instructions", () => instructions, { tag: false })] : []),
  ];
  return {
    config,
    model,
    hooks: composeHooks([hooksOf(spec.hooks), ...resolved.hooks]),
    tools,
    enabled,
    calls,
    sections,
    instructions,
    cwd,
    reasoning: reasoningOf(config.thinking ?? spec.thinking),
  };
}

/** The tools as the request declares them (spec §19.6: name, description, JSON Schema). */
export function offeredOf(setup: TurnSetup) {
  if (!setup.calls || setup.tools.size === 0) return undefined;
  return [...setup.tools.values()].map(({ tool }) => ({
    type: "function" as const,
    name: tool.name,
    description: tool.description,
    inputSchema: tool.parameters as never,
  }));
}
