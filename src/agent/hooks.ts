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

/**
 * spec §19.24: the hooks of the agent and of each selected extension, as one set, in that order:
 * beforeRequest and afterTool pass the prompt or result along the chain; afterResponse is seen by
 * all; beforeTool stops at the first veto and passes rewritten arguments on; beforeCompact skips
 * when any says false. A phase without a hook of a kind gets none (no step is made for it).
 */
export function composeHooks(list: readonly AgentHooks[]): AgentHooks {
  const all = list.filter((h) => h && typeof h === "object");
  if (all.length <= 1) return all[0] ?? {};
  const of = <K extends keyof AgentHooks>(k: K) =>
    all.map((h) => h[k]).filter((f): f is NonNullable<AgentHooks[K]> => typeof f === "function");
  const out: AgentHooks = {};
  const br = of("beforeRequest");
  if (br.length > 0)
    out.beforeRequest = async (e) => {
      let prompt = e.prompt;
      for (const f of br) prompt = (await f({ ...e, prompt })) ?? prompt;
      return prompt;
    };
  const ar = of("afterResponse");
  if (ar.length > 0)
    out.afterResponse = async (e) => {
      for (const f of ar) await f(e);
    };
  const bt = of("beforeTool");
  if (bt.length > 0)
    out.beforeTool = async (e) => {
      let call = e.call;
      let rewritten = false;
      for (const f of bt) {
        const d = await f({ ...e, call });
        if (d && "veto" in d) return d;
        if (d && "args" in d) {
          call = { ...call, args: d.args };
          rewritten = true;
        }
      }
      return rewritten ? { args: call.args } : undefined;
    };
  const at = of("afterTool");
  if (at.length > 0)
    out.afterTool = async (e) => {
      let result = e.result;
      let replaced = false;
      for (const f of at) {
        const r = await f({ ...e, result });
        if (r) {
          result = r;
          replaced = true;
        }
      }
      return replaced ? result : undefined;
    };
  const bc = of("beforeCompact");
  if (bc.length > 0)
    out.beforeCompact = async (e) => {
      for (const f of bc) if ((await f(e)) === false) return false;
      return undefined;
    };
  return out;
}
