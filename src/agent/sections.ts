/**
 * The system prompt as named sections (spec §19.25). Before each request the turn renders the
 * sections it wants — the selected extensions' sections in order, then `environment` (the tools'
 * working directory, when the turn offers tools), then `instructions` — and compares them with what
 * the context has already shown: the `system` entries written since the context's head (its newest
 * reset, handoff or compaction), replayed in order. When they differ it appends one positional
 * `system` entry before asking: a *baseline* (every section, in order) when nothing was shown since
 * the head or the order changed, else a *patch* with only the changed, added and removed sections.
 * The model reads the head's baseline as its leading system message and each later patch where it
 * stands in the transcript, so an unchanged prefix stays unchanged for the provider's prompt cache.
 *
 * Invariant: what the model was shown is exactly what the transcript's system entries say; no
 * section text lives anywhere else (spec §19.25).
 */
import type { EntryRecord } from "../store/conversations/types.js";
import type { PromptSection, SectionInput } from "./extensions.js";

/** A `system` entry's data when the agent wrote it: sections in order; `null` removes one. */
export interface SectionsData {
  sections: [string, string | null][];
  baseline?: true;
}

export function isSectionsEntry(e: EntryRecord): e is EntryRecord & { data: SectionsData } {
  return e.kind === "system" && Array.isArray((e.data as { sections?: unknown } | null)?.sections);
}

const isHead = (e: EntryRecord | undefined) => e?.kind === "reset" || e?.kind === "compaction";

/**
 * The section entries that count for a context (`contextFor`'s order: the head, the kept range,
 * the rest): only those written after the head; a kept range's are superseded by a new baseline.
 */
export function sectionEntries(entries: readonly EntryRecord[]): (EntryRecord & { data: SectionsData })[] {
  const after = isHead(entries[0]) ? entries[0]!.seq : -1;
  return entries.filter((e) => e.seq > after).filter(isSectionsEntry);
}

/** The sections in effect after replaying `entries`' section entries, in order. */
export function shownSections(entries: readonly EntryRecord[]): Map<string, string> {
  let shown = new Map<string, string>();
  for (const e of sectionEntries(entries)) {
    if (e.data.baseline) shown = new Map();
    for (const [k, v] of e.data.sections) {
      if (v === null) shown.delete(k);
      else shown.set(k, v);
    }
  }
  return shown;
}

/** A section's text as the model reads it: tagged `<key>…</key>` unless `tag: false`. */
function framed(s: PromptSection, text: string): string {
  return s.tag === false ? text : `<${s.key}>\n${text}\n</${s.key}>`;
}

/**
 * The sections this request wants, in order. A section whose render throws keeps what was shown
 * (nothing is resent for it), so one broken extension does not stop the conversation.
 */
export async function renderSections(
  sections: readonly PromptSection[],
  input: SectionInput,
  shown: ReadonlyMap<string, string>,
): Promise<[string, string][]> {
  const out: [string, string][] = [];
  for (const s of sections) {
    let text: string | undefined;
    try {
      text = await s.render(input);
    } catch {
      const before = shown.get(s.key);
      if (before !== undefined) out.push([s.key, before]);
      continue;
    }
    if (typeof text === "string" && text.length > 0) out.push([s.key, framed(s, text)]);
  }
  return out;
}

/** spec §19.25: the system entry to append, or null when the wanted sections are what was shown. */
export function planSections(
  shown: ReadonlyMap<string, string>,
  wanted: readonly [string, string][],
): SectionsData | null {
  const keys = wanted.map(([k]) => k);
  const shownKeys = [...shown.keys()];
  const same =
    keys.length === shownKeys.length && wanted.every(([k, v], i) => shownKeys[i] === k && shown.get(k) === v);
  if (same) return null;
  const kept = shownKeys.filter((k) => keys.includes(k));
  const added = keys.filter((k) => !shown.has(k));
  // A patch can drop a section, change one in place or append one; any other order is restated.
  const inOrder = [...kept, ...added].every((k, i) => keys[i] === k);
  if (shown.size === 0 || !inOrder) return { sections: wanted.map(([k, v]) => [k, v]), baseline: true };
  const patch: [string, string | null][] = shownKeys.filter((k) => !keys.includes(k)).map((k) => [k, null]);
  for (const [k, v] of wanted) if (shown.get(k) !== v) patch.push([k, v]);
  return { sections: patch };
}

/** The text of a section entry for the model: its sections joined; a removed one said so. */
export function sectionsText(d: SectionsData): string {
  return d.sections.map(([k, v]) => (v === null ? `[the section "${k}" no longer applies]` : v)).join("\n\n");
}
