/**
 * The model's prompt from a conversation's context (spec §19.16).
 */
import type { LanguageModelV4Message } from "@ai-sdk/provider";
import type { ModelPrompt } from "../models/stream.js";
import type { EntryRecord } from "../store/conversations/types.js";
import type { AssistantData, ToolResultData } from "./agent.js";
import { isSectionsEntry, sectionEntries, sectionsText } from "./sections.js";

export function textOf(data: unknown): string {
  if (typeof data === "string") return data;
  const t = (data as { text?: unknown } | null)?.text;
  return typeof t === "string" ? t : JSON.stringify(data);
}

/**
 * spec §19.16, §19.25: the model's prompt from the conversation's context — `instructions` when
 * given, then the first section entry since the context's head as the leading system message, then
 * each entry as its message (later section entries where they stand); consecutive tool results as
 * one tool message; a result synthesized for every call that has none; custom entries left out.
 */
export function promptOf(instructions: string | undefined, entries: readonly EntryRecord[]): ModelPrompt {
  const out: LanguageModelV4Message[] = [];
  if (instructions) out.push({ role: "system", content: instructions });
  const counted = new Set(sectionEntries(entries));
  const [lead] = counted;
  if (lead) out.push({ role: "system", content: sectionsText(lead.data) });
  let open = new Map<string, string>();
  const closeOpen = () => {
    if (open.size === 0) return;
    out.push({
      role: "tool",
      content: [...open].map(([id, name]) => ({
        type: "tool-result" as const,
        toolCallId: id,
        toolName: name,
        output: { type: "text" as const, value: "error: no result was recorded for this call" },
      })),
    });
    open = new Map();
  };
  for (const e of entries) {
    if (e.kind === "tool-result") {
      const d = e.data as ToolResultData;
      if (!open.has(d.callId)) continue;
      open.delete(d.callId);
      const value = typeof d.content === "string" ? d.content : JSON.stringify(d.content);
      const part = {
        type: "tool-result" as const,
        toolCallId: d.callId,
        toolName: d.tool,
        output: { type: "text" as const, value: d.isError ? `error: ${value}` : value },
      };
      const last = out[out.length - 1];
      if (last?.role === "tool") last.content.push(part);
      else out.push({ role: "tool", content: [part] });
      continue;
    }
    closeOpen();
    if (e.kind === "user") out.push({ role: "user", content: [{ type: "text", text: textOf(e.data) }] });
    else if (isSectionsEntry(e)) {
      // A kept range's section entries were superseded by the baseline written after the head.
      if (counted.has(e) && e !== lead) out.push({ role: "system", content: sectionsText(e.data) });
    } else if (e.kind === "system") out.push({ role: "system", content: textOf(e.data) });
    else if (e.kind === "compaction" || e.kind === "reset") {
      const t = textOf(e.data);
      // spec §19.26–§19.27: a handoff's note is the next agent's message; a reset's, a note kept.
      const label =
        e.kind === "compaction"
          ? "[summary of the conversation so far]\n"
          : (e.data as { reason?: unknown } | null)?.reason === "handoff"
            ? ""
            : "[note kept from before the reset]\n";
      if (t) out.push({ role: "user", content: [{ type: "text", text: `${label}${t}` }] });
    } else if (e.kind === "assistant") {
      const d = e.data as AssistantData;
      if (d?.error && !d.text && !d.toolCalls) continue;
      const content: Extract<LanguageModelV4Message, { role: "assistant" }>["content"] = [];
      if (d?.text) content.push({ type: "text", text: d.text });
      for (const c of d?.toolCalls ?? []) {
        content.push({ type: "tool-call", toolCallId: c.id, toolName: c.name, input: c.input });
        open.set(c.id, c.name);
      }
      if (content.length > 0) out.push({ role: "assistant", content });
    }
  }
  closeOpen();
  return out;
}
