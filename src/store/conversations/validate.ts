/**
 * Bounds and checks of the conversation operations (spec §17.10), run before the first write of
 * every operation: a hostile id, kind or payload is refused with a typed error and changes nothing.
 */
import { DEFAULT_MAX_PAYLOAD_BYTES } from "../../core/json.js";
import { ValidationError } from "../../errors.js";
import { ENTRY_KINDS, type EntryKind, type NewEntry, type StateWrite } from "./types.js";

/** Bounds (spec §17.10). */
export const CONVERSATION_LIMITS = {
  idLength: 200,
  /** Shorter than other ids: its engine scope, `conversation:<id>`, is a name of at most 200 (spec §2.1). */
  conversationIdLength: 180,
  titleLength: 1_000,
  metadataBytes: 64 * 1024,
  entryBytes: DEFAULT_MAX_PAYLOAD_BYTES,
  entriesPerCommit: 1_000,
  statePerCommit: 1_000,
  stateValueBytes: DEFAULT_MAX_PAYLOAD_BYTES,
  tasksPerCommit: 1_000,
  /** Bytes of one commit's entries and state together. */
  commitBytes: 8 * DEFAULT_MAX_PAYLOAD_BYTES,
  entriesPerConversation: 1_000_000,
  inputBytes: DEFAULT_MAX_PAYLOAD_BYTES,
  listLimit: 1_000,
  readLimit: 10_000,
} as const;

/** Ids, request ids, state keys and custom kind names: printable, no spaces at either end. */
const ID_RE = /^[A-Za-z0-9_.:@/+=-][\x21-\x7e]*$/;

/** Checks an id-like string (conversation id, request id, state key, custom name). */
export function checkId(value: unknown, what: string): string {
  if (typeof value !== "string" || value.length === 0 || value.length > CONVERSATION_LIMITS.idLength) {
    throw new ValidationError(
      `${what} must be a string of 1–${CONVERSATION_LIMITS.idLength} characters (got ${typeof value === "string" ? `${value.length} characters` : typeof value})`,
    );
  }
  if (!ID_RE.test(value)) {
    throw new ValidationError(
      `${what} may hold only printable ASCII without spaces (got ${JSON.stringify(value.slice(0, 40))})`,
    );
  }
  return value;
}

/** A conversation id: as checkId, at most 180 characters (spec §17.1). */
export function checkConversationId(value: unknown, what = "a conversation id"): string {
  checkId(value, what);
  if ((value as string).length > CONVERSATION_LIMITS.conversationIdLength)
    throw new ValidationError(
      `${what} must be at most ${CONVERSATION_LIMITS.conversationIdLength} characters`,
    );
  return value as string;
}

export function checkTitle(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== "string" || value.length > CONVERSATION_LIMITS.titleLength)
    throw new ValidationError(
      `a title must be a string of at most ${CONVERSATION_LIMITS.titleLength} characters`,
    );
  if (/\p{Cc}/u.test(value)) throw new ValidationError("a title may not hold control characters");
  return value;
}

export function checkBytes(text: string, max: number, what: string): void {
  // A UTF-16 length bounds the UTF-8 size from above by 3×; measure only when that could pass max.
  if (text.length * 3 <= max) return;
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > max)
    throw new ValidationError(`${what} is ${bytes} bytes, more than ${max}`, "RATCHET_PAYLOAD_TOO_LARGE");
}

export function checkKind(kind: unknown, name: unknown): { kind: EntryKind; name: string | null } {
  if (typeof kind !== "string" || !(ENTRY_KINDS as readonly string[]).includes(kind))
    throw new ValidationError(
      `an entry kind must be one of ${ENTRY_KINDS.join(", ")} (got ${String(kind).slice(0, 40)})`,
    );
  if (kind === "custom") return { kind, name: checkId(name, "a custom entry's name") };
  if (name !== null && name !== undefined)
    throw new ValidationError(`only a custom entry has a name (kind ${kind})`);
  return { kind: kind as EntryKind, name: null };
}

export function checkEntries(entries: readonly NewEntry[]): number {
  if (!Array.isArray(entries)) throw new ValidationError("entries must be an array");
  if (entries.length > CONVERSATION_LIMITS.entriesPerCommit)
    throw new ValidationError(`a commit holds at most ${CONVERSATION_LIMITS.entriesPerCommit} entries`);
  let bytes = 0;
  for (const e of entries) {
    checkKind(e?.kind, e?.name);
    if (typeof e.data !== "string") throw new ValidationError("an entry's data must be JSON text");
    checkBytes(e.data, CONVERSATION_LIMITS.entryBytes, "entry data");
    bytes += e.data.length;
  }
  return bytes;
}

export function checkState(state: readonly StateWrite[]): number {
  if (!Array.isArray(state)) throw new ValidationError("state must be an array");
  if (state.length > CONVERSATION_LIMITS.statePerCommit)
    throw new ValidationError(`a commit writes at most ${CONVERSATION_LIMITS.statePerCommit} state keys`);
  const seen = new Set<string>();
  let bytes = 0;
  for (const w of state) {
    checkId(w?.key, "a state key");
    if (seen.has(w.key)) throw new ValidationError(`state key "${w.key}" is written twice in one commit`);
    seen.add(w.key);
    if (w.value !== null) {
      if (typeof w.value !== "string") throw new ValidationError("a state value must be JSON text or null");
      checkBytes(w.value, CONVERSATION_LIMITS.stateValueBytes, `state "${w.key}"`);
      bytes += w.value.length;
    }
  }
  return bytes;
}

/** A list or read limit: a positive integer up to `max`. */
export function checkLimit(limit: unknown, max: number): number {
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > max)
    throw new ValidationError(`limit must be an integer from 1 to ${max}`);
  return limit;
}

export function checkSeq(seq: unknown, what: string): number {
  if (typeof seq !== "number" || !Number.isSafeInteger(seq) || seq < 0)
    throw new ValidationError(`${what} must be a non-negative integer`);
  return seq;
}
