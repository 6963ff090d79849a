/**
 * A conversation's own agent configuration (spec §19.22): which of the agent's named models it
 * uses, its instructions, the subset of tools it may call, its working directory — stored in the
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
}

export const AGENT_CONFIG_KEY = "agent";

/** spec §19.22: checks a configuration; a bad one is refused before anything is written. */
export function checkAgentConfig(c: unknown): AgentConfig {
  if (c === null || typeof c !== "object" || Array.isArray(c))
    throw new ValidationError("an agent configuration must be an object");
  const o = c as Record<string, unknown>;
  for (const k of Object.keys(o))
    if (!["model", "instructions", "tools", "cwd"].includes(k))
      throw new ValidationError(
        `agent configuration: unknown field "${k}" (model, instructions, tools, cwd)`,
      );
  if (o.model !== undefined && (typeof o.model !== "string" || o.model.length === 0 || o.model.length > 200))
    throw new ValidationError("agent configuration: model must be a name of 1–200 characters");
  if (o.instructions !== undefined && (typeof o.instructions !== "string" || o.instructions.length > 100_000))
    throw new ValidationError(
      "agent configuration: instructions must be a string of at most 100,000 characters",
    );
  if (
    o.tools !== undefined &&
    (!Array.isArray(o.tools) ||
      o.tools.length > 200 ||
      o.tools.some((t) => typeof t !== "string" || t.length === 0 || t.length > 64))
  )
    throw new ValidationError("agent configuration: tools must be up to 200 tool names");
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
