/**
 * Parsers for command-line values. Each one either returns a value the
 * engine accepts or throws UsageError, which the CLI turns into exit code 2
 * (wrong arguments), never into a RatchetError (exit code 1).
 */
import { InvalidArgumentError } from "commander";
import { OUTCOMES, type Outcome, STATUSES, type Status } from "../core/model.js";
import { RatchetError } from "../errors.js";

/**
 * A malformed command line (`RATCHET_USAGE`): printed as `error [RATCHET_USAGE]: …` with a
 * one-line hint, exit code 2, like commander's own parsing errors (main.ts).
 */
export class UsageError extends RatchetError {
  constructor(message: string) {
    super("RATCHET_USAGE", message);
  }
}

const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

const MAX_DURATION_MS = 100 * 365 * 86_400_000;
const DURATION_RE = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;

/**
 * Parses "500ms", "40s", "2m", "1h", "7d" (one number, one unit) into ms.
 * Bare numbers are refused on purpose: "--budget 40" could mean 40 ms or 40 s.
 */
export function parseDuration(text: string): number {
  const m = DURATION_RE.exec(text.trim());
  if (!m)
    throw new UsageError(`"${text}" is not a duration; use a number and a unit: 500ms, 40s, 2m, 1h, 7d`);
  const ms = Math.round(Number(m[1]) * UNIT_MS[m[2]!]!);
  if (ms > MAX_DURATION_MS) throw new UsageError(`duration "${text}" is longer than 100 years`);
  return ms;
}

/** Parses a whole number within [min, max]. */
export function parseInteger(text: string, what: string, min: number, max: number): number {
  if (!/^[+-]?\d+$/.test(text.trim())) throw new UsageError(`${what} must be an integer (got "${text}")`);
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new UsageError(`${what} must be an integer in [${min}, ${max}] (got ${text})`);
  }
  return n;
}

/** A task id argument. */
export function parseId(text: string): number {
  return parseInteger(text, "task id", 1, Number.MAX_SAFE_INTEGER);
}

/** A JSON argument (task input). A parse failure says where. */
export function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new UsageError(
      `${what} is not valid JSON (${(e as Error).message}); quote it for the shell, e.g. '{"n": 1}'`,
    );
  }
}

export type RunAfter = { runAfter: Date } | { delayMs: number };

/** "+30s" (a delay from now) or an ISO 8601 instant such as 2026-01-01T12:00:00Z. */
export function parseRunAfter(text: string): RunAfter {
  const t = text.trim();
  if (t.startsWith("+")) return { delayMs: parseDuration(t.slice(1)) };
  // Date.parse accepts many shapes; require something that starts like an ISO date.
  if (!/^\d{4}-\d{2}-\d{2}/.test(t) || Number.isNaN(Date.parse(t))) {
    throw new UsageError(
      `--run-after must be an ISO time (2026-01-01T12:00:00Z) or a delay (+30s), got "${text}"`,
    );
  }
  return { runAfter: new Date(t) };
}

/** "a,b" → ["a", "b"], dropping empty items. */
export function parseList(text: string): string[] {
  const items = text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  if (items.length === 0) throw new UsageError(`expected a comma-separated list, got "${text}"`);
  return items;
}

/** `ls --status`: a status, or an outcome (which implies terminal). */
export function parseStatusFilter(text: string): { status?: Status; outcome?: Outcome } {
  if ((STATUSES as readonly string[]).includes(text)) return { status: text as Status };
  if ((OUTCOMES as readonly string[]).includes(text)) return { status: "terminal", outcome: text as Outcome };
  throw new UsageError(`--status must be one of ${[...STATUSES, ...OUTCOMES].join(", ")} (got "${text}")`);
}

/** Adapts a parser to commander, which reports InvalidArgumentError as a usage error. */
export function option<T>(parse: (text: string) => T): (text: string) => T {
  return (text) => {
    try {
      return parse(text);
    } catch (e) {
      if (e instanceof UsageError) throw new InvalidArgumentError(e.message);
      throw e;
    }
  };
}
