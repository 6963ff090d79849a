/**
 * Hooks of the agent loop (spec §19.21): code the application runs at the loop's phases — before a
 * request (may replace the prompt), after a response, before a tool call (may veto it or rewrite its
 * arguments), after a tool call (may replace its result), before a compaction (may skip it).
 *
 * Hooks are given as an object or as a function returning one; a function is called once per turn,
 * at its start, so a hook replaced while a turn runs takes effect at the next turn. afterResponse,
 * beforeTool and afterTool run as steps (spec §4.2): once per turn and call, their decisions
 * committed and replayed as made when the run reruns. beforeRequest and beforeCompact may run again
 * on a rerun; a committed turn or compaction is not redone whatever they answer.
 */
import type { TurnResult } from "../models/generate.js";
import type { ModelPrompt } from "../models/stream.js";
import type { ToolCall } from "./tools/calls.js";
import type { ToolResult } from "./tools/define.js";

type Maybe<T> = T | undefined | void | Promise<T | undefined | void>;

export interface AgentHooks {
  beforeRequest?(e: { turn: number; conversationId: string; prompt: ModelPrompt }): Maybe<ModelPrompt>;
  afterResponse?(e: { turn: number; conversationId: string; result: TurnResult }): Maybe<void>;
  /** `{ veto: reason }`: the call is not run and the model reads the reason; `{ args }`: run with these. */
  beforeTool?(e: {
    turn: number;
    conversationId: string;
    call: ToolCall;
  }): Maybe<{ veto: string } | { args: unknown }>;
  afterTool?(e: {
    turn: number;
    conversationId: string;
    call: ToolCall;
    result: ToolResult;
    interrupted: boolean;
  }): Maybe<ToolResult>;
  /** `false` skips this compaction. */
  beforeCompact?(e: { conversationId: string; reason: string }): Maybe<boolean>;
}

export type HooksSpec = AgentHooks | (() => AgentHooks);

export function hooksOf(spec: HooksSpec | undefined): AgentHooks {
  if (spec === undefined) return {};
  return typeof spec === "function" ? spec() : spec;
}
