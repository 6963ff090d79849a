/**
 * One durable model turn inside a task (spec §18.7): the seam the agent's turn loop calls.
 *
 * `generate(ctx, { name, model, prompt })` is a step (`model:<name>`): its request streams each
 * delta into the task's durable stream `<name>` as it arrives (committed at most every stream
 * interval, spec §16.2), and its answer — text, tool calls, finish reason, usage, cost and route —
 * is committed as the step's result together with its usage row, in one fenced transaction
 * (UsageOps.commitStepWithUsage). A rerun returns the committed answer without a request.
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
import { toStorableJson } from "../core/json.js";
import { Batcher } from "../engine/batcher.js";
import type { TaskContext } from "../engine/context.js";
import { Invocation } from "../engine/context.js";
import { checkName } from "../engine/definition.js";
import { retryStore } from "../engine/store-retry.js";
import type { StreamWriter } from "../engine/stream.js";
import {
  AbortedError,
  ConfigError,
  DuplicateStepError,
  LeaseLostError,
  ModelError,
  NonRetryableError,
  NoRouteError,
  RateLimitedError,
} from "../errors.js";
import type { SettleResult, Store } from "../store/store.js";
import type { StepUsageWrite, UsageRow } from "../store/usage/ops.js";
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

/** Stream pages a rerun reads at most looking for an uncommitted finish. */
const MAX_SCAN_PAGES = 256;

/**
 * Turn commits of one store, group-committed like step results (src/engine/batcher.ts): the turns
 * of concurrent tasks that answered in one event-loop turn share one transaction (one WAL flush on
 * PostgreSQL instead of one each; measured in bench/models.ts).
 */
const COMMITS = new WeakMap<Store, Batcher<StepUsageWrite, SettleResult>>();

function commits(store: Store): Batcher<StepUsageWrite, SettleResult> {
  let b = COMMITS.get(store);
  if (!b) {
    // A repeat of a commit whose answer was lost writes nothing (keyed rows, DO NOTHING steps).
    b = new Batcher((items) => retryStore(() => store.usage.commitStepsWithUsage(items)));
    COMMITS.set(store, b);
  }
  return b;
}

function holder(ctx: TaskContext): Invocation {
  // Seam: TaskContext does not expose the fence or the store; the engine's invocation holds both.
  if (!(ctx instanceof Invocation))
    throw new ConfigError("generate must be called with a Ratchet task's ctx");
  return ctx;
}

/** Turn results this invocation knows are committed (loaded once, then kept up to date). */
const KNOWN = new WeakMap<Invocation, Map<string, unknown>>();
/** Turn step keys this invocation used: a name twice in one run is a bug, as for ctx.step (spec §4.2). */
const USED = new WeakMap<Invocation, Set<string>>();

async function committedTurns(inv: Invocation): Promise<Map<string, unknown>> {
  let m = KNOWN.get(inv);
  // A fresh task has no committed steps (ClaimedTask.fresh): no read.
  if (!m) {
    m = inv.task.fresh ? new Map() : await retryStore(() => inv.deps.store.loadSteps(inv.taskId));
    KNOWN.set(inv, m);
  }
  return m;
}

/**
 * spec §18.7: one durable model turn. Memoized like ctx.step (the step `model:<name>`), but
 * committed by its own fenced write with its usage rows rather than through ctx.step, whose own
 * step commit after it would be a second transaction per turn changing nothing (PostgreSQL: one
 * WAL flush more per turn, measured in bench/models.ts).
 */
export async function generate(ctx: TaskContext, opts: GenerateOptions): Promise<TurnResult> {
  const inv = holder(ctx);
  const stepName = `model:${checkName(opts?.name, "turn name")}`;
  const key = inv.stepPrefix + stepName;
  let used = USED.get(inv);
  if (!used) {
    used = new Set();
    USED.set(inv, used);
  }
  if (used.has(key)) throw new DuplicateStepError(stepName);
  used.add(key);
  const known = await committedTurns(inv);
  if (known.has(key)) return known.get(key) as TurnResult;
  const store = inv.deps.store;
  const writer = await ctx.stream(opts.stream ?? opts.name);
  const lost =
    writer.offset > 0 ? await uncommittedFinishes(store, inv.taskId, writer.name, writer.offset) : [];
  writer.write({ t: "attempt", attempt: ctx.attempt } satisfies TurnChunk);
  const result = await request(ctx, opts, writer);
  const rows: UsageRow[] = [usageRow(inv, opts, `${inv.taskId}:${key}`, "committed", result)];
  for (const l of lost) rows.push(usageRow(inv, opts, `${inv.taskId}:${key}:lost:${l.at}`, "failed", l.turn));
  const text = toStorableJson(result, `result of turn "${opts.name}"`, inv.deps.maxStepBytes);
  // spec §16.2: what the invocation streamed commits before the step does.
  await inv.pendingStreams?.commitAll();
  const r = await commits(store).submit({ fence: inv.fence, name: key, result: text, rows });
  if (r === "abort_marked") {
    inv.end({ kind: "aborted" });
    throw new AbortedError(inv.taskId);
  }
  if (r === "lease_lost") {
    inv.end({ kind: "lease_lost" });
    throw new LeaseLostError(inv.taskId, inv.fence.token);
  }
  const stored = JSON.parse(text) as TurnResult;
  known.set(key, stored);
  if (opts.usageUnit !== undefined)
    await ctx.reportUsage({ [opts.usageUnit]: result.usage.input + result.usage.output });
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
  inv: Invocation,
  opts: GenerateOptions,
  key: string,
  status: UsageRow["status"],
  r: Pick<TurnResult, "usage" | "cost" | "provider" | "model" | "route">,
): UsageRow {
  return {
    key,
    status,
    conversationId: opts.conversationId ?? null,
    taskId: inv.taskId,
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
  store: Store,
  taskId: number,
  name: string,
  length: number,
): Promise<{ at: number; turn: Billed }[]> {
  const found: { at: number; turn: Billed }[] = [];
  let from = 0;
  for (let page = 0; page < MAX_SCAN_PAGES && from < length && found.length < MAX_LOST; page++) {
    const r = await store.readStream(taskId, name, from);
    if (r.chunks.length === 0) break;
    for (const c of r.chunks) {
      const ch = c.data as TurnChunk;
      if (ch?.t === "finish" && found.length < MAX_LOST)
        found.push({
          at: c.offset,
          turn: { usage: ch.usage, cost: ch.cost, provider: ch.provider, model: ch.model, route: ch.route },
        });
    }
    from = r.chunks[r.chunks.length - 1]!.offset + 1;
  }
  return found;
}
