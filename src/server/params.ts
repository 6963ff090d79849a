/**
 * Parsing of what a request carries: path ids, query values, cursors and
 * JSON bodies. Every parser returns a value the engine accepts or throws a
 * ValidationError (400) that says which parameter was wrong; the engine then
 * validates again, exactly as for a library call.
 */
import { OUTCOMES, type Outcome, STATUSES, type Status } from "../core/model.js";
import { checkName, describe } from "../engine/definition.js";
import { ValidationError } from "../errors.js";
import type { TaskId } from "../store/store.js";
import { checkJsonContentType } from "./auth.js";

export function parseTaskId(text: string | undefined): TaskId {
  const n = Number(text);
  if (!text || !/^\d{1,16}$/.test(text) || !Number.isSafeInteger(n) || n < 1)
    throw new ValidationError(`task id must be a positive integer (got ${describe(text)})`);
  return n;
}

/** An optional integer query value within [min, max]. */
export function parseIntParam(
  text: string | undefined,
  what: string,
  min: number,
  max: number,
): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!/^-?\d{1,16}$/.test(text) || !Number.isSafeInteger(n) || n < min || n > max)
    throw new ValidationError(`${what} must be an integer in [${min}, ${max}] (got ${describe(text)})`);
  return n;
}

export function parseName(text: string | undefined, what: string): string | undefined {
  return text === undefined ? undefined : checkName(text, what);
}

export function parseStatus(text: string | undefined): Status | undefined {
  if (text === undefined) return undefined;
  if (!(STATUSES as readonly string[]).includes(text))
    throw new ValidationError(`status must be one of ${STATUSES.join(", ")} (got ${describe(text)})`);
  return text as Status;
}

export function parseOutcome(text: string | undefined): Outcome | undefined {
  if (text === undefined) return undefined;
  if (!(OUTCOMES as readonly string[]).includes(text))
    throw new ValidationError(`outcome must be one of ${OUTCOMES.join(", ")} (got ${describe(text)})`);
  return text as Outcome;
}

export function parseBoolean(text: string | undefined, what: string): boolean | undefined {
  if (text === undefined) return undefined;
  if (text === "true" || text === "1") return true;
  if (text === "false" || text === "0") return false;
  throw new ValidationError(`${what} must be true or false (got ${describe(text)})`);
}

/** A comma-separated list of task ids, at most `max` of them, without duplicates. */
export function parseIdList(text: string | undefined, what: string, max: number): TaskId[] {
  if (text === undefined || text === "") return [];
  const parts = text.split(",");
  if (parts.length > max) throw new ValidationError(`${what} lists at most ${max} task ids`);
  return [...new Set(parts.map((p) => parseTaskId(p.trim())))];
}

/**
 * Cursors are opaque to clients: base64url of "v1:<id>", where <id> is the
 * last task id of the page before (pages run newest first, by id). A cursor
 * carries no filters; it stays valid whatever is enqueued meanwhile.
 */
export function encodeCursor(before: TaskId): string {
  return Buffer.from(`v1:${before}`, "utf8").toString("base64url");
}

export function decodeCursor(text: string | undefined): TaskId | undefined {
  if (text === undefined) return undefined;
  const raw = text.length <= 64 ? Buffer.from(text, "base64url").toString("utf8") : "";
  const m = /^v1:(\d{1,16})$/.exec(raw);
  const id = m ? Number(m[1]) : Number.NaN;
  if (!Number.isSafeInteger(id) || id < 1)
    throw new ValidationError("cursor is not one this server returned");
  return id;
}

/**
 * The parsed JSON body: an empty body is `{}`; anything else must be a JSON
 * object. Every route that changes something reads its body here, even an
 * empty one, because this is where Content-Type: application/json is
 * required (auth.ts says why; a test sends every non-GET route a form post).
 */
export async function readObject(req: {
  header(name: string): string | undefined;
  text(): Promise<string>;
}): Promise<Record<string, unknown>> {
  checkJsonContentType(req.header("content-type"));
  const text = await req.text();
  if (text.trim() === "") return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ValidationError(
      `request body is not valid JSON: ${(e as Error).message}`,
      "RATCHET_INVALID_JSON",
    );
  }
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw new ValidationError("request body must be a JSON object");
  return value as Record<string, unknown>;
}

/** Refuses keys outside `allowed`: a misspelt option must not be silently ignored. */
export function onlyKeys(obj: Record<string, unknown>, allowed: readonly string[], what: string): void {
  for (const k of Object.keys(obj))
    if (!allowed.includes(k))
      throw new ValidationError(`${what}: unknown field ${describe(k)} (allowed: ${allowed.join(", ")})`);
}

/**
 * Where a resumable SSE read starts (spec §16.8, §17.11): after the `Last-Event-ID` the client saw
 * (an offset or seq of at most 15 digits), else at `?from`, else 0.
 */
export function resumeFrom(lastEventId: string | undefined, from: string | undefined, what: string): number {
  if (lastEventId !== undefined && lastEventId !== "") {
    if (!/^\d{1,15}$/.test(lastEventId))
      throw new ValidationError(`Last-Event-ID must be ${what} (got "${lastEventId.slice(0, 40)}")`);
    return Number(lastEventId) + 1;
  }
  return parseIntParam(from, "from", 0, Number.MAX_SAFE_INTEGER) ?? 0;
}
