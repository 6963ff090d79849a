/**
 * One durable model turn inside a task (spec §18.7): the seam the agent's turn loop calls.
 *
 * `generate(ctx, { name, model, prompt })` is a step (`model:<name>`): its request streams each
 * delta into the task's durable stream `<name>` as it arrives (committed at most every stream
 * interval, spec §16.2), and its answer — text, tool calls, finish reason, usage, cost and route —
 * is committed as the step's result together with its usage row and the stream's chunks still
 * buffered, in one fenced transaction (ctx.step's `commitWith`, spec §18.10, with
 * UsageOps.commitTurns). A rerun returns the committed answer without a request. Only the
 * engine's public TaskContext and its step options are used.
 *
 * A rerun of a turn that had not committed (its worker died mid-stream, or after the answer but
 * before the commit) RE-REQUESTS: a provider's stream cannot be resumed. It writes an `attempt`
 * chunk first, so readers drop the partial text after the previous marker; if the stream already
 * holds a finish from an earlier attempt (billed, never committed), that usage is recorded once
 * as a `failed` row.
 *
 * Failures leave the step as the engine's rules say: a 429 or a router with every route open and
 * a retry-after → RateLimitedError (deferred, no attempt used, spec §14.8); a non-retryable 4xx →
 * NonRetryableError; anything else retryable is thrown for the task's retry policy.
 *
 * Invariant: a committed answer's usage is counted exactly once — it is written in the step's
 * commit, keyed by task and step — and committed text is never lost (spec §18.7, §18.8).
 */
import type { TaskContext } from "../engine/context.js";
import { checkName } from "../engine/definition.js";
import type { StepCommitWith } from "../engine/step-commit.js";
import type { StreamWriter } from "../engine/stream.js";
import { ModelError, NonRetryableError, NoRouteError, RateLimitedError } from "../errors.js";
import type { UsageRow } from "../store/usage/ops.js";
import { defaultCatalog, type ModelCatalog } from "./catalog.js";
import {
  type LanguageModel,
  type ModelCallOptions,
  type ModelPrompt,
  type RouteInfo,
  streamModel,
  type Usage,
} from "./stream.js";

export interface GenerateOptions {
  /** The turn's name: its step is `model:<name>`, its stream `<name>` unless `stream` says. */
  name: string;
  /** A model or a router. */
  model: LanguageModel;
  prompt: ModelPrompt;
  stream?: string;
  /** Cancels the request; default ctx.signal (abort, deadline, lost lease). */
  signal?: AbortSignal;
  conversationId?: string | null;
  /**
   * The provider session identity (spec §18.7), for prompt caching; default the conversation id.
   * A fork or a child conversation has an id of its own, so a fresh session.
   */
  sessionId?: string;
  catalog?: ModelCatalog;
  idleTimeoutMs?: number;
  timeoutMs?: number;
  call?: ModelCallOptions;
  /**
   * The rate-limit unit the task's buckets count tokens in (e.g. "tokens", spec §14.10): after the
   * answer, its input + output tokens correct the estimate the buckets were charged at the start.
   */
  usageUnit?: string;
}

export interface TurnResult {
  text: string;
  reasoning: string;
  toolCalls: { id: string; name: string; input: string }[];
  finishReason: string;
  usage: Usage;
  /** USD from the catalog (0 for a model it does not know). */
  cost: number;
  provider: string;
  model: string;
  route: string;
  fallbacks: RouteInfo["fallbacks"];
}

/** What a turn's stream holds, chunk by chunk (spec §18.7). */
export type TurnChunk =
  | { t: "attempt"; attempt: number }
  | { t: "text"; d: string }
  | { t: "reasoning"; d: string }
  | { t: "tool-call"; id: string; name: string; input: string }
  | {
      t: "finish";
      reason: string;
      usage: Usage;
      cost: number;
      provider: string;
      model: string;
      route: string;
    }
  | { t: "error"; code: string; message: string };

/**
 * A turn's commit (spec §18.10): its still-buffered stream chunks, its answer and its usage rows in
 * one transaction, fenced (UsageOps.commitTurns). The engine group-commits the turns of concurrent
 * tasks that answered in one event-loop turn into one call (ctx.step's `commitWith`): one WAL flush
 * on PostgreSQL for all of them, measured in bench/models.ts. A repeat of a commit whose answer was
 * lost writes nothing (keyed rows, DO NOTHING steps, recognised stream batches).
 */
const COMMIT_TURNS: StepCommitWith<UsageRow[]>["write"] = (items, store) => store.usage.commitTurns(items);
/**
 * spec §18.7: one durable model turn, the step `model:<name>` (spec §4.2) whose commit writes its
 * usage rows and its stream's buffered tail in the same fenced transaction (spec §18.10), so a turn
 * that streams within one stream interval costs one transaction (PostgreSQL: one WAL flush, not
 * two; measured in bench/models.ts). A replay returns the committed answer without a request.
 */
export async function generate(ctx: TaskContext, opts: GenerateOptions): Promise<TurnResult> {
  const name = checkName(opts?.name, "turn name");
  let answer: TurnResult | undefined;
  let lost: { at: number; turn: Billed }[] = [];
  const stored = await ctx.step(
    `model:${name}`,
    async () => {
      const writer = await ctx.stream(opts.stream ?? name);
      if (writer.offset > 0) lost = await uncommittedFinishes(ctx, writer.name, writer.offset);
      writer.write({ t: "attempt", attempt: ctx.attempt } satisfies TurnChunk);
      answer = await request(ctx, opts, writer);
      return answer;
    },
    {
      commitWith: {
        write: COMMIT_TURNS,
        // The step's usage rows, keyed by task and stored step name (spec §18.8).
        rows: (w) => {
          const key = `${w.fence.taskId}:${w.name}`;
          const rows = [usageRow(ctx, opts, key, "committed", answer!)];
          for (const l of lost) rows.push(usageRow(ctx, opts, `${key}:lost:${l.at}`, "failed", l.turn));
          return rows;
        },
      },
    },
  );
  // Only the invocation that requested corrects the buckets it was charged (spec §14.10).
  if (answer !== undefined && opts.usageUnit !== undefined)
    await ctx.reportUsage({ [opts.usageUnit]: answer.usage.input + answer.usage.output });
  return stored;
}

async function request(ctx: TaskContext, opts: GenerateOptions, w: StreamWriter): Promise<TurnResult> {
  const out: TurnResult = {
    text: "",
    reasoning: "",
    toolCalls: [],
    finishReason: "other",
    usage: { input: 0, output: 0, cached: 0, reasoning: 0 },
    cost: 0,
    provider: opts.model.provider,
    model: opts.model.modelId,
    route: `${opts.model.provider}/${opts.model.modelId}`,
    fallbacks: [],
  };
  try {
    for await (const ev of streamModel(opts.model, opts.prompt, {
      signal: opts.signal ?? ctx.signal,
      idleTimeoutMs: opts.idleTimeoutMs,
      timeoutMs: opts.timeoutMs,
      call: withSession(opts),
    })) {
      if (ev.type === "text") {
        out.text += ev.delta;
        w.write({ t: "text", d: ev.delta } satisfies TurnChunk);
      } else if (ev.type === "reasoning") {
        out.reasoning += ev.delta;
        w.write({ t: "reasoning", d: ev.delta } satisfies TurnChunk);
      } else if (ev.type === "tool-call") {
        out.toolCalls.push({ id: ev.id, name: ev.name, input: ev.input });
        w.write({ t: "tool-call", id: ev.id, name: ev.name, input: ev.input } satisfies TurnChunk);
      } else {
        out.finishReason = ev.reason;
        out.usage = ev.usage;
        if (ev.route) {
          out.provider = ev.route.provider;
          out.model = ev.route.model;
          out.route = ev.route.name;
          out.fallbacks = ev.route.fallbacks;
        }
        out.cost = (opts.catalog ?? defaultCatalog).cost(out.provider, out.model, out.usage).usd;
        w.write({
          t: "finish",
          reason: out.finishReason,
          usage: out.usage,
          cost: out.cost,
          provider: out.provider,
          model: out.model,
          route: out.route,
        } satisfies TurnChunk);
      }
    }
  } catch (e) {
    throw await failed(e, w);
  }
  return out;
}

function withSession(opts: GenerateOptions): ModelCallOptions | undefined {
  const session = opts.sessionId ?? opts.conversationId ?? undefined;
  if (session === undefined) return opts.call;
  const po = opts.call?.providerOptions ?? {};
  return { ...opts.call, providerOptions: { ...po, ratchet: { ...po.ratchet, sessionId: session } } };
}

/** The engine's reading of a model failure (spec §18.7), after noting it in the stream. */
async function failed(e: unknown, w: StreamWriter): Promise<unknown> {
  if (!(e instanceof ModelError) && !(e instanceof NoRouteError)) return e;
  try {
    w.write({ t: "error", code: e.code, message: e.message } satisfies TurnChunk);
    await w.flush();
  } catch {
    // The stream is gone with the claim; the error itself still tells the engine what happened.
  }
  const after = e.retryAfterMs;
  if (after !== null && (e instanceof NoRouteError || e.code === "RATCHET_MODEL_RATE_LIMITED"))
    return new RateLimitedError({ retryAfterMs: after, message: e.message });
  if (e instanceof ModelError && !e.retryable) return new NonRetryableError(e.message, { cause: e });
  return e;
}

function usageRow(
  ctx: TaskContext,
  opts: GenerateOptions,
  key: string,
  status: UsageRow["status"],
  r: Pick<TurnResult, "usage" | "cost" | "provider" | "model" | "route">,
): UsageRow {
  return {
    key,
    status,
    conversationId: opts.conversationId ?? null,
    taskId: ctx.taskId,
    provider: r.provider,
    model: r.model,
    route: r.route,
    ...r.usage,
    cost: r.cost,
  };
}

type Billed = Pick<TurnResult, "usage" | "cost" | "provider" | "model" | "route">;

/** Lost answers a rerun records at most (a usage write carries at most MAX_USAGE_ROWS rows). */
const MAX_LOST = 50;

/**
 * Every finish in a turn's stream: answers the provider billed that no commit holds, since the
 * step is not committed (spec §18.8). Keyed by offset, so a later rerun's repeat writes nothing.
 */
async function uncommittedFinishes(
  ctx: TaskContext,
  name: string,
  length: number,
): Promise<{ at: number; turn: Billed }[]> {
  const found: { at: number; turn: Billed }[] = [];
  // Bounded by the stream's own bound (16 MiB, spec §16.4) and by MAX_LOST.
  for await (const c of ctx.readStream(name)) {
    if (c.offset >= length || found.length >= MAX_LOST) break;
    const ch = c.data as TurnChunk;
    if (ch?.t === "finish")
      found.push({
        at: c.offset,
        turn: { usage: ch.usage, cost: ch.cost, provider: ch.provider, model: ch.model, route: ch.route },
      });
  }
  return found;
}
