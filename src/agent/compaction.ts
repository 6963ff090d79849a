/**
 * Context management of the agent loop (spec §19.18–§19.20): token accounting per entry, and
 * compaction — older entries summarised by a model call (a durable turn), recent ones kept
 * verbatim — when the context nears the model's window minus a reserve, when the provider says the
 * context overflowed (compact, then retry the turn once), or when asked (`{ type: "compact" }`).
 *
 * A compaction is a `compaction` entry appended to the conversation: `{ text, keptFrom }`, the
 * summary and the first seq kept verbatim. The conversation's context starts at its newest
 * compaction or reset (spec §17.3); the agent reads the kept range [keptFrom, compaction seq) back
 * beside it. A summary is applied only if the context's head is still the one it was made for:
 * a reset or another compaction committed meanwhile makes it stale, and it is discarded.
 *
 * Invariant: a compaction never drops an entry from what the model sees without a summary that
 * covers it, and never splits a turn's tool calls from their results (spec §19.19).
 */
import type { TaskContext } from "../engine/context.js";
import { generate } from "../models/generate.js";
import type { LanguageModel, ModelPrompt } from "../models/stream.js";
import type { EntryRecord } from "../store/conversations/types.js";
import type { RunContext } from "./run.js";

export interface CompactionPolicy {
  /** The model's context window in tokens; without it, only overflow and asked compaction happen. */
  contextWindow?: number;
  /** Room kept for the answer: compaction starts above contextWindow − reserveTokens. Default 16,384. */
  reserveTokens?: number;
  /** About how many tokens of the most recent entries are kept verbatim. Default 20,000. */
  keepRecentTokens?: number;
  /**
   * How far below contextWindow − reserveTokens a compaction starts in the background (spec §19.28).
   * Default 32,768, at most a quarter of that limit; 0 turns background compaction off.
   */
  backgroundTokens?: number;
}

export const DEFAULT_RESERVE_TOKENS = 16_384;
export const DEFAULT_KEEP_RECENT_TOKENS = 20_000;
/** Characters of transcript one summary request carries at most (its tail is kept). */
const MAX_SUMMARY_INPUT_CHARS = 400_000;

const SUMMARY_INSTRUCTIONS =
  "Summarize the conversation below for the assistant who continues it: the user's goals and " +
  "constraints, decisions taken, files and commands touched and their results, and what remains " +
  "to do. Be complete but brief; write it as notes, not as a reply.";

/** spec §19.18: an entry's tokens — the provider's count where known, else about 4 characters a token. */
export function entryTokens(e: EntryRecord): number {
  const d = e.data as { usage?: { output?: number } } | null;
  if (e.kind === "assistant" && typeof d?.usage?.output === "number" && d.usage.output > 0)
    return d.usage.output;
  return Math.ceil(JSON.stringify(e.data ?? null).length / 4);
}

/** A prompt's tokens, estimated (about 4 characters a token). */
export function promptTokens(prompt: ModelPrompt): number {
  return Math.ceil(JSON.stringify(prompt).length / 4);
}

/** What `contextFor` reads: a run's context, or a conversation's from outside its run. */
export interface ContextReader {
  context(limit?: number): Promise<EntryRecord[]>;
  entries(range: { from?: number; to?: number; limit?: number }): Promise<EntryRecord[]>;
}

/** The entries the model sees: the newest head, the range it kept, what came after (spec §19.19). */
export async function contextFor(rc: ContextReader): Promise<EntryRecord[]> {
  const ctx = await rc.context();
  const head = ctx[0];
  const kept =
    (head?.kind === "compaction" ? (head.data as { keptFrom?: number | null }).keptFrom : null) ?? null;
  if (head === undefined || kept === null || kept >= head.seq) return ctx;
  // `to` is exclusive (spec §17.2): the kept range runs up to the compaction entry itself.
  const range = await rc.entries({ from: kept, to: head.seq, limit: 10_000 });
  return [head, ...range.filter((e) => e.seq < head.seq), ...ctx.slice(1)];
}

/** The seq of the context's head (its newest reset or compaction), or null: what a summary is made for. */
export async function headOf(rc: ContextReader): Promise<number | null> {
  const [first] = await rc.context(1);
  return first && (first.kind === "reset" || first.kind === "compaction") ? first.seq : null;
}

/** Where the verbatim tail starts: about `keep` tokens back, at a user entry (a turn's start). */
export function splitPoint(entries: readonly EntryRecord[], keep: number): number {
  let tokens = 0;
  let i = entries.length;
  while (i > 0 && tokens + entryTokens(entries[i - 1]!) <= keep) tokens += entryTokens(entries[--i]!);
  // Never start the tail mid-turn: a tool result without its call would be dropped (spec §19.16).
  while (i < entries.length && entries[i]!.kind !== "user") i++;
  return i;
}

function transcript(entries: readonly EntryRecord[]): string {
  const lines = entries.map((e) => {
    const d = e.data as { text?: unknown; toolCalls?: unknown; tool?: unknown; content?: unknown } | null;
    if (e.kind === "tool-result")
      return `[${String(d?.tool)} result] ${JSON.stringify(d?.content ?? null).slice(0, 2_000)}`;
    if (e.kind === "compaction") return `[summary so far] ${String(d?.text ?? "")}`;
    const text = typeof d?.text === "string" ? d.text : JSON.stringify(d);
    const calls = d?.toolCalls ? ` [calls ${JSON.stringify(d.toolCalls).slice(0, 2_000)}]` : "";
    return `${e.kind}: ${text}${calls}`;
  });
  const all = lines.join("\n");
  return all.length > MAX_SUMMARY_INPUT_CHARS ? all.slice(all.length - MAX_SUMMARY_INPUT_CHARS) : all;
}

export interface CompactResult {
  applied: boolean;
  /** Why nothing was applied: nothing old enough to summarise, or the summary went stale. */
  reason?: "nothing-to-summarize" | "stale" | "skipped";
  /** The compaction entry's seq. */
  seq?: number;
}

/** A compaction entry's data (spec §19.19). */
export interface CompactionData {
  text: string;
  keptFrom: number | null;
  summarized: [number, number];
  tokensBefore: number;
  reason: string;
}

/**
 * spec §19.19: what a summary of `entries` covers — the entries before the verbatim tail — or null
 * when there is nothing old enough. An overflow or a request keeps at most half of the context.
 */
export function selectSummary(
  entries: readonly EntryRecord[],
  keepRecentTokens: number,
  reason: string,
): { older: EntryRecord[]; keptFrom: number | null; total: number } | null {
  const total = entries.reduce((n, e) => n + entryTokens(e), 0);
  const keep =
    reason === "threshold" || reason === "background"
      ? keepRecentTokens
      : Math.min(keepRecentTokens, Math.floor(total / 2));
  const k = splitPoint(entries, keep);
  const older = entries.slice(0, k);
  if (older.length === 0 || (older.length === 1 && older[0]!.kind === "compaction")) return null;
  return { older, keptFrom: entries[k]?.seq ?? null, total };
}

/** The summary of `older`, asked as the durable turn `name` of the calling task (spec §18.7). */
export async function summarize(
  ctx: TaskContext,
  o: { name: string; model: LanguageModel; conversationId: string },
  older: readonly EntryRecord[],
): Promise<string> {
  const prompt: ModelPrompt = [
    { role: "system", content: SUMMARY_INSTRUCTIONS },
    { role: "user", content: [{ type: "text", text: transcript(older) }] },
  ];
  const r = await generate(ctx, { name: o.name, model: o.model, prompt, conversationId: o.conversationId });
  return r.text;
}

/**
 * spec §19.19: summarises the entries before the verbatim tail with a durable turn named `name`
 * and appends the compaction entry, unless the context's head moved meanwhile (stale, §19.20).
 */
export async function compact(
  rc: RunContext,
  ctx: TaskContext,
  o: { name: string; model: LanguageModel; keepRecentTokens: number; reason: string },
): Promise<CompactResult> {
  const entries = await contextFor(rc);
  const headSeq = await headOf(rc);
  const sel = selectSummary(entries, o.keepRecentTokens, o.reason);
  if (!sel) return { applied: false, reason: "nothing-to-summarize" };
  const text = await summarize(ctx, { ...o, conversationId: rc.conversationId }, sel.older);
  return applySummary(rc, o.name, headSeq, {
    text,
    keptFrom: sel.keptFrom,
    summarized: [sel.older[0]!.seq, sel.older[sel.older.length - 1]!.seq],
    tokensBefore: sel.total,
    reason: o.reason,
  });
}

/** spec §19.20: appends the summary only if the context's head is still the one it was made for. */
export async function applySummary(
  rc: RunContext,
  name: string,
  madeForHead: number | null,
  data: CompactionData,
  state?: Record<string, unknown>,
): Promise<CompactResult> {
  if ((await headOf(rc)) !== madeForHead) {
    if (state) await rc.commit(name, { state });
    return { applied: false, reason: "stale" };
  }
  const c = await rc.commit(name, { entries: [{ kind: "compaction", data }], ...(state ? { state } : {}) });
  return { applied: true, ...(c.seqs[0] === undefined ? {} : { seq: c.seqs[0] }) };
}

/** spec §19.18: a provider's answer that the prompt is longer than the model's window. */
export function isContextOverflow(err: unknown): boolean {
  for (let e: unknown = err, i = 0; e && i < 5; e = (e as { cause?: unknown }).cause, i++) {
    const m = String((e as { message?: unknown }).message ?? "");
    if (/context[_ ]length|context window|maximum context|too many tokens|prompt is too long/i.test(m))
      return true;
  }
  return false;
}
