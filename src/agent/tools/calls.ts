/**
 * Tool calls as durable child tasks (spec §19.10–§19.12). A turn that asks for tools runs them as
 * one round: each call is a child task of the turn named by its call id (an idempotent spawn, so
 * a rerun of the turn finds the same calls), its output a durable stream of the call's task, its
 * result the task's result.
 *
 * The call's intent is committed (a step) before its code runs. A rerun of the call's task that
 * finds the intent of an earlier attempt knows that attempt died mid-call: a `safe` tool runs
 * again; an `unsafe` one settles as an `interrupted` error result carrying the output the dead
 * attempt had committed — the model decides what to do, not the engine.
 *
 * Invariant: an unsafe tool's code runs at most once per call while its worker stays up, and is
 * never started again after a crash (spec §19.10).
 */
import type { TaskContext } from "../../engine/context.js";
import { defineTask, type TaskDefinition } from "../../engine/definition.js";
import { ConfigError, ValidationError } from "../../errors.js";
import { LocalEnv } from "../env/local.js";
import type { ExecutionEnv } from "../env/types.js";
import type { Extensions } from "../extensions.js";
import { runTool, type ToolDefinition, type ToolResult } from "./define.js";
import { PROCESSES_STREAM, reapLeftovers, recordingEnv } from "./leftovers.js";
import { HeadTail } from "./truncate.js";

/** What the model asked for: one call of a round. */
export interface ToolCall {
  callId: string;
  tool: string;
  args: unknown;
  /** The extension whose tool the turn offered (spec §19.24); absent: the agent's own tool. */
  extension?: string;
}

export interface ToolCallInput extends ToolCall {
  /** The conversation's working directory, for the environment. */
  cwd: string;
  /** The conversation the round belongs to, if the round said. */
  conversationId?: string;
}

/** A call's answer, in call order. `interrupted`: its worker died mid-call and the tool is unsafe. */
export interface ToolCallOutcome {
  callId: string;
  tool: string;
  result: ToolResult;
  interrupted?: boolean;
}

/** Calls one round may hold (spec §19.11). */
export const MAX_CALLS_PER_ROUND = 64;
const CALL_ID = /^[A-Za-z0-9_.:-]{1,128}$/;
const OUTPUT = "output";
/** Characters of a dead attempt's output an interrupted result carries. */
const INTERRUPTED_KEEP = 10_000;

export interface ToolCallsOptions {
  tools: readonly ToolDefinition<unknown>[];
  /** The environment of a call's cwd. Default: a LocalEnv over it. */
  env?: (cwd: string) => ExecutionEnv;
  /** The child task's name. Default "ratchet.tool-call". */
  name?: string;
  /**
   * Bound of one call's invocation before a heartbeat (spec §4.1, §3.8): a running call heartbeats
   * every maxMs / 3, so a live tool runs on while a dead worker's call is taken over within
   * maxMs + leaseGraceMs. Default 10 min.
   */
  maxMs?: number;
  /** Extensions whose tools these calls may run, resolved when a call starts (spec §19.24). */
  extensions?: Extensions;
}

export interface ToolCalls {
  /** Register it with the Ratchet that runs the turns. */
  readonly task: TaskDefinition<ToolCallInput, ToolCallOutcome>;
  readonly tools: ReadonlyMap<string, ToolDefinition<unknown>>;
  readonly extensions?: Extensions;
  /** Runs a round from inside the turn's task; resolves with every call's outcome, in call order. */
  runRound(
    ctx: TaskContext,
    calls: readonly ToolCall[],
    opts: { cwd: string; conversationId?: string },
  ): Promise<ToolCallOutcome[]>;
}

export function defineToolCalls(o: ToolCallsOptions): ToolCalls {
  const tools = new Map<string, ToolDefinition<unknown>>();
  for (const t of o.tools) {
    if (t?.kind !== "ratchet.tool") throw new ConfigError("tools must be defineTool results");
    if (tools.has(t.name)) throw new ConfigError(`two tools are named "${t.name}"`);
    tools.set(t.name, t);
  }
  const envOf = o.env ?? ((cwd: string) => new LocalEnv({ cwd }));
  const maxMs = o.maxMs ?? 600_000;
  // spec §19.24: a call's implementation is resolved once, when its task starts: an extension's
  // tool from the extension the turn named, as installed now; the agent's own tool otherwise.
  const resolve = (c: ToolCall): ToolDefinition<unknown> | undefined =>
    c.extension === undefined
      ? tools.get(c.tool)
      : o.extensions?.get(c.extension)?.tools?.find((t) => t.name === c.tool);

  async function interrupted(
    ctx: TaskContext,
    input: ToolCallInput,
    why: string,
    reaped: string,
  ): Promise<ToolCallOutcome> {
    const kept = new HeadTail(INTERRUPTED_KEEP);
    for await (const c of ctx.readStream(OUTPUT))
      kept.add(typeof c.data === "string" ? c.data : JSON.stringify(c.data));
    const so = kept.chars > 0 ? `; its output so far:\n${kept.text()}` : "; it wrote no output";
    const procs = reaped ? `; ${reaped}` : "";
    return {
      callId: input.callId,
      tool: input.tool,
      interrupted: true,
      result: { content: `${input.tool} was interrupted: ${why}${procs}${so}`, isError: true },
    };
  }

  const task = defineTask<ToolCallInput, ToolCallOutcome>({
    name: o.name ?? "ratchet.tool-call",
    maxMs,
    retry: { maxAttempts: 3, baseMs: 1_000, capMs: 10_000 },
    async run(ctx, input) {
      const tool = resolve(input);
      if (!tool)
        return {
          callId: input.callId,
          tool: input.tool,
          result: {
            content:
              input.extension === undefined
                ? `unknown tool "${input.tool}" (known: ${[...tools.keys()].join(", ")})`
                : `tool "${input.tool}" is no longer available (extension "${input.extension}" was removed or changed)`,
            isError: true,
          },
        };
      // spec §19.10: the intent, committed before the code runs, says which attempt started it.
      const intent = await ctx.step("intent", () => ({ attempt: ctx.attempt }));
      const env = envOf(input.cwd);
      const procs = await ctx.stream(PROCESSES_STREAM);
      // spec §19.30: an earlier attempt died mid-call; the groups it left on this host end first.
      const reaped = intent.attempt !== ctx.attempt ? await reapLeftovers(ctx, env, procs) : "";
      if (intent.attempt !== ctx.attempt && tool.replay === "unsafe")
        return interrupted(
          ctx,
          input,
          `the worker running it stopped (attempt ${intent.attempt}) and it is not safe to run again`,
          reaped,
        );
      const out = await ctx.stream(OUTPUT);
      // A long command keeps its lease (spec §3.8): maxMs can stay short, so a dead worker's call is
      // taken over soon, while a live one runs as long as its tool allows.
      const beat = setInterval(
        () => void ctx.heartbeat().catch(() => {}),
        Math.max(250, Math.floor(maxMs / 3)),
      );
      const result = await runTool(
        tool,
        {
          callId: input.callId,
          env: recordingEnv(env, procs, ctx.attempt),
          signal: ctx.signal,
          output: (text) => out.write(text),
          task: ctx,
          ...(input.conversationId === undefined ? {} : { conversationId: input.conversationId }),
        },
        input.args,
      ).finally(() => clearInterval(beat));
      await out.close();
      if (procs.offset > 0) await procs.close();
      return { callId: input.callId, tool: input.tool, result };
    },
    // spec §19.12: aborted mid-call, after its own children drained: the output it had is its answer;
    // spec §19.30: a group whose worker died before the abort reached it ends here.
    onAbort: async (ctx, input) =>
      interrupted(
        ctx,
        input,
        "the call was aborted",
        await reapLeftovers(ctx, envOf(input.cwd), await ctx.stream(PROCESSES_STREAM)),
      ),
  });

  async function runRound(
    ctx: TaskContext,
    calls: readonly ToolCall[],
    ro: { cwd: string; conversationId?: string },
  ) {
    checkRound(calls, ro.cwd);
    const outcomes = new Map<string, ToolCallOutcome>();
    // Consecutive parallel calls go together; a sequential call runs alone, after what came before.
    const groups: ToolCall[][] = [];
    for (const c of calls) {
      const seq = resolve(c)?.sequential === true;
      const last = groups[groups.length - 1];
      if (seq || !last || last.some((x) => resolve(x)?.sequential)) groups.push([c]);
      else last.push(c);
    }
    for (const group of groups) {
      // One transaction for the round's calls (spec §12.1), not one per call: a PostgreSQL commit
      // each made a round of 8 calls 8 WAL flushes before the first call could start.
      const ids = await ctx.spawnMany(
        group.map((c) => ({
          name: `tool:${c.callId}`,
          task,
          input: {
            ...c,
            cwd: ro.cwd,
            ...(ro.conversationId === undefined ? {} : { conversationId: ro.conversationId }),
          } satisfies ToolCallInput,
        })),
      );
      const ended = await ctx.waitFor(ids);
      for (const [i, e] of ended.entries()) {
        const c = group[i]!;
        outcomes.set(c.callId, outcomeOf(c, e.outcome, e.result, e.error?.message));
      }
    }
    return calls.map((c) => outcomes.get(c.callId)!);
  }

  return { task, tools, runRound, ...(o.extensions ? { extensions: o.extensions } : {}) };
}

/** A call task's end as the model's answer: its result, or an error result saying why there is none. */
function outcomeOf(
  c: ToolCall,
  outcome: string,
  result: unknown,
  error: string | undefined,
): ToolCallOutcome {
  const r = result as ToolCallOutcome | null;
  if (r && typeof r === "object" && "result" in r) return r;
  return {
    callId: c.callId,
    tool: c.tool,
    result: { content: `${c.tool} ended ${outcome}${error ? `: ${error}` : ""}`, isError: true },
  };
}

/** spec §19.11: bad rounds are refused before any call is spawned. */
function checkRound(calls: readonly ToolCall[], cwd: string): void {
  if (!Array.isArray(calls) || calls.length === 0 || calls.length > MAX_CALLS_PER_ROUND)
    throw new ValidationError(`a round holds 1–${MAX_CALLS_PER_ROUND} tool calls`);
  const seen = new Set<string>();
  for (const c of calls) {
    if (typeof c?.callId !== "string" || !CALL_ID.test(c.callId))
      throw new ValidationError(
        `a call id must match ${CALL_ID} (got ${JSON.stringify(c?.callId)?.slice(0, 60)})`,
      );
    if (seen.has(c.callId)) throw new ValidationError(`call id "${c.callId}" appears twice in one round`);
    seen.add(c.callId);
    if (typeof c.tool !== "string" || c.tool.length === 0 || c.tool.length > 64)
      throw new ValidationError("a call's tool must be a name of 1–64 characters");
  }
  if (typeof cwd !== "string" || !cwd.startsWith("/"))
    throw new ValidationError("a round's cwd must be an absolute path");
}
