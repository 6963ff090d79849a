/**
 * Background compaction (spec §19.28). When a turn's prompt passes a soft threshold — below the
 * hard one at which the turn compacts inline (spec §19.18) — the run starts a compaction task beside
 * the conversation instead of waiting for one: the task summarises the context as it finds it (a
 * durable turn of its own) and returns the summary as its result, writing nothing to the
 * conversation. The run applies it at a later turn's start, the boundary where the context is read:
 * appended as a compaction entry only if the context's head is still the one the summary was made
 * for; a reset, a handoff or another compaction committed meanwhile makes it stale, and it is
 * dropped. One background compaction is in flight per conversation, recorded in the conversation's
 * state under `agent.background-compaction` with the task that makes it.
 *
 * Modes of the record: absent (none in flight) → `{ taskId }` when a turn passes the soft threshold
 * (two keyed commits: the task, then the record) → absent again when a turn finds the task ended
 * (applied, stale, or failed: one keyed commit clears it, with the entry when applied).
 *
 * Invariant: a background summary reaches the transcript only through `applySummary`, under the
 * same stale rule as an inline one (spec §19.20).
 */
import type { TaskContext } from "../engine/context.js";
import { defineTask, type TaskDefinition } from "../engine/definition.js";
import { ConfigError } from "../errors.js";
import type { LanguageModel } from "../models/stream.js";
import {
  applySummary,
  type CompactionData,
  contextFor,
  headOf,
  selectSummary,
  summarize,
} from "./compaction.js";
import type { RunContext, RunDefinition } from "./run.js";

export const BACKGROUND_KEY = "agent.background-compaction";
/** Default distance of the soft threshold below the hard one, at most a quarter of the hard one. */
export const DEFAULT_BACKGROUND_TOKENS = 32_768;

export interface BackgroundInput {
  conversationId: string;
  keepRecentTokens: number;
  /** The configuration's model name (spec §19.22), or none for the agent's model. */
  model?: string;
}

/** What the task returns: the summary and the head it was made for, or why there is none. */
export type BackgroundResult =
  | { made: true; headSeq: number | null; data: CompactionData }
  | { made: false; reason: "nothing-to-summarize" };

/** The soft threshold under a hard `limit`: `limit − backgroundTokens` (0 turns it off). */
export function softLimit(limit: number, backgroundTokens: number | undefined): number {
  if (!Number.isFinite(limit)) return Number.POSITIVE_INFINITY;
  const gap = backgroundTokens ?? Math.min(DEFAULT_BACKGROUND_TOKENS, Math.floor(limit / 4));
  return gap <= 0 ? Number.POSITIVE_INFINITY : limit - gap;
}

/** The compaction task of an agent: registered beside its run by `Conversations` (attach). */
export function defineBackgroundCompaction(
  name: string,
  run: () => RunDefinition<null>,
  modelOf: (name: string | undefined) => LanguageModel | undefined,
): TaskDefinition<BackgroundInput, BackgroundResult> {
  return defineTask<BackgroundInput, BackgroundResult>({
    name: `${name}.compaction`,
    maxMs: 60_000,
    retry: { maxAttempts: 3, baseMs: 1_000, capMs: 10_000 },
    async run(ctx: TaskContext, input) {
      const conv = run().bound;
      if (!conv) throw new ConfigError(`agent "${name}" has no Conversations in this process`);
      const model = modelOf(input.model);
      if (!model) throw new ConfigError(`agent "${name}" has no model named "${input.model}"`);
      const id = input.conversationId;
      const reader = {
        context: (limit?: number) => conv.context(id, { limit: limit ?? 10_000 }),
        entries: (r: { from?: number; to?: number; limit?: number }) => conv.entries(id, r),
      };
      // The head is read with the entries: the summary is made for the context as found now.
      const headSeq = await ctx.step("head", () => headOf(reader));
      const entries = await contextFor(reader);
      const sel = selectSummary(entries, input.keepRecentTokens, "background");
      if (!sel) return { made: false, reason: "nothing-to-summarize" };
      const text = await summarize(ctx, { name: "summary", model, conversationId: id }, sel.older);
      return {
        made: true,
        headSeq,
        data: {
          text,
          keptFrom: sel.keptFrom,
          summarized: [sel.older[0]!.seq, sel.older[sel.older.length - 1]!.seq],
          tokensBefore: sel.total,
          reason: "background",
        },
      };
    },
  });
}

/** The record of the background compaction in flight, if any. */
export function inFlight(state: Record<string, unknown>): { taskId: number } | null {
  const r = state[BACKGROUND_KEY] as { taskId?: unknown } | undefined;
  return typeof r?.taskId === "number" ? { taskId: r.taskId } : null;
}

/**
 * spec §19.28: at a turn's start, applies the background summary that ended meanwhile (or drops a
 * stale or failed one). Returns whether a compaction entry was appended.
 */
export async function applyBackground(rc: RunContext, state: Record<string, unknown>): Promise<boolean> {
  const f = inFlight(state);
  if (!f) return false;
  const t = await rc.task(f.taskId);
  if (t && t.status !== "terminal") return false;
  const clear = { [BACKGROUND_KEY]: null };
  const r = t?.outcome === "completed" ? (t.result as BackgroundResult | null) : null;
  const name = `background-${f.taskId}`;
  if (!r?.made) {
    await rc.commit(name, { state: clear });
    return false;
  }
  return (await applySummary(rc, name, r.headSeq, r.data, clear)).applied;
}

/** spec §19.28: starts the background compaction (once per conversation at a time). */
export async function startBackground(
  rc: RunContext,
  task: TaskDefinition<BackgroundInput, BackgroundResult>,
  turn: number,
  input: Omit<BackgroundInput, "conversationId">,
): Promise<void> {
  const made = await rc.commit(`background-start-${turn}`, {
    tasks: [{ task, input: { conversationId: rc.conversationId, ...input } }],
  });
  const taskId = made.taskIds[0];
  if (taskId !== undefined)
    await rc.commit(`background-mark-${turn}`, { state: { [BACKGROUND_KEY]: { taskId } } });
}
