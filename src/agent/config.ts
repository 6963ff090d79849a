/**
 * A conversation's own agent configuration (spec §19.22): which of the agent's named models it
 * uses, its instructions, the subset of tools it may call, its working directory, the extensions it
 * selects by name (spec §19.24) and its thinking level — stored in the
 * conversation's state under the key `agent`, so it is durable, forked with the conversation, and read
 * at the start of every turn (a change takes effect at the next turn).
 */
import { ValidationError } from "../errors.js";
import type { Conversations } from "./conversations.js";

export interface AgentConfig {
  /** A name among the agent's `models`. */
  model?: string;
  instructions?: string;
  /** Tool names the conversation may call (a subset of the agent's tools). */
  tools?: string[];
  /** Absolute working directory of the conversation's tools. */
  cwd?: string;
  /** Extension names, in order (spec §19.24); absent: every installed extension. */
  extensions?: string[];
  /** How hard the model thinks (the request's reasoning effort); "off" asks for none. */
  thinking?: ThinkingLevel;
}

export const THINKING_LEVELS = ["off", "minimal", "low", "medium", "high", "xhigh"] as const;
export type ThinkingLevel = (typeof THINKING_LEVELS)[number];
const FIELDS = ["model", "instructions", "tools", "cwd", "extensions", "thinking"];

/** The request's reasoning option for a thinking level (the AI SDK's `reasoning`). */
export function reasoningOf(
  level: ThinkingLevel | undefined,
): "none" | Exclude<ThinkingLevel, "off"> | undefined {
  return level === undefined ? undefined : level === "off" ? "none" : level;
}

function names(v: unknown, max: number, maxLen: number): boolean {
  return (
    Array.isArray(v) &&
    v.length <= max &&
    v.every((t) => typeof t === "string" && t.length > 0 && t.length <= maxLen)
  );
}

export const AGENT_CONFIG_KEY = "agent";

/** spec §19.22: checks a configuration; a bad one is refused before anything is written. */
export function checkAgentConfig(c: unknown): AgentConfig {
  if (c === null || typeof c !== "object" || Array.isArray(c))
    throw new ValidationError("an agent configuration must be an object");
  const o = c as Record<string, unknown>;
  for (const k of Object.keys(o))
    if (!FIELDS.includes(k))
      throw new ValidationError(`agent configuration: unknown field "${k}" (${FIELDS.join(", ")})`);
  if (o.model !== undefined && (typeof o.model !== "string" || o.model.length === 0 || o.model.length > 200))
    throw new ValidationError("agent configuration: model must be a name of 1–200 characters");
  if (o.instructions !== undefined && (typeof o.instructions !== "string" || o.instructions.length > 100_000))
    throw new ValidationError(
      "agent configuration: instructions must be a string of at most 100,000 characters",
    );
  if (o.tools !== undefined && !names(o.tools, 200, 64))
    throw new ValidationError("agent configuration: tools must be up to 200 tool names");
  if (o.extensions !== undefined && !names(o.extensions, 100, 64))
    throw new ValidationError("agent configuration: extensions must be up to 100 extension names");
  if (o.thinking !== undefined && !(THINKING_LEVELS as readonly unknown[]).includes(o.thinking))
    throw new ValidationError(`agent configuration: thinking must be one of ${THINKING_LEVELS.join(", ")}`);
  if (o.cwd !== undefined && (typeof o.cwd !== "string" || !o.cwd.startsWith("/") || o.cwd.length > 4096))
    throw new ValidationError("agent configuration: cwd must be an absolute path");
  return o as AgentConfig;
}

/** Stores a conversation's agent configuration (replacing the one before) in one commit. */
export async function setAgentConfig(
  conversations: Conversations,
  id: string,
  config: AgentConfig,
): Promise<void> {
  await conversations.commit(id, { state: { [AGENT_CONFIG_KEY]: checkAgentConfig(config) } });
}

/** The configuration stored with a conversation, or {} (a malformed one is ignored, not trusted). */
export function agentConfigOf(state: Record<string, unknown>): AgentConfig {
  try {
    return state[AGENT_CONFIG_KEY] === undefined ? {} : checkAgentConfig(state[AGENT_CONFIG_KEY]);
  } catch {
    return {};
  }
}
