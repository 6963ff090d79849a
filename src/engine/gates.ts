/**
 * Flow control on a definition (spec §14.9–§14.12): seats, rate limits and
 * fairness, validated at defineTask and turned into the store's form at
 * enqueue. The keys are computed where the task is enqueued, from its
 * (validated) input.
 */
import { ConfigError, ValidationError } from "../errors.js";
import { KEY_SEP } from "../store/gates.js";
import type { ClaimLimits, Gates, RateCharge } from "../store/store.js";
import { checkName, describe } from "./definition.js";

/** Group and rate-limit names: short identifiers, so "group:key" reads unambiguously. */
const GROUP_RE = /^[A-Za-z0-9_.-]{1,100}$/;
const MAX_LIMIT = 1_000_000;
const MAX_PERIOD_MS = 7 * 86_400_000;
const MAX_COST = 1e12;
const MAX_RATE_LIMITS = 8;
/** Default fairness step: each task pushes its key's next start tag this far, divided by its weight. */
export const DEFAULT_FAIR_STEP_MS = 1_000;

export interface ConcurrencySpec<I> {
  /** Tasks of one key that may run at once, across every worker of the store. */
  limit?: number;
  /** The key within the group; default: one key for the whole group. */
  key?: (input: I) => string;
  /** Shared by several definitions; default: the task name. */
  group?: string;
}

export interface RateLimitSpec<I> {
  /** Shared by several definitions (e.g. "openai-tpm"); default: the task name. */
  name?: string;
  key?: (input: I) => string;
  /** `limit` per `periodMs`, refilled continuously. */
  limit: number;
  periodMs: number;
  /** Largest burst; default `limit`. */
  burst?: number;
  /** Charged at each start; a number or a function of the input (e.g. estimated tokens). Default 1. */
  cost?: number | ((input: I) => number);
  /** What `ctx.reportUsage({ [unit]: n })` corrects, e.g. "tokens". */
  unit?: string;
}

export interface FairnessSpec<I> {
  key: (input: I) => string;
  /** Share of the key relative to others (default 1); a number or a function of the input. */
  weight?: number | ((input: I) => number);
  /** How far one task pushes its key's next start tag, before dividing by weight. Default 1 s. */
  stepMs?: number;
}

export interface GateSpec<I> {
  concurrency?: ConcurrencySpec<I>;
  /** Shorthand for `concurrency: { group }`. */
  concurrencyGroup?: string;
  rateLimit?: RateLimitSpec<I> | readonly RateLimitSpec<I>[];
  fairness?: FairnessSpec<I>;
}

export interface DefGates {
  seat: { group: string; limit: number | null; key: ((input: unknown) => string) | undefined } | null;
  rates: {
    name: string;
    key: ((input: unknown) => string) | undefined;
    limit: number;
    periodMs: number;
    burst: number;
    cost: number | ((input: unknown) => number);
    unit: string | undefined;
  }[];
  fair: {
    key: (input: unknown) => string;
    weight: number | ((input: unknown) => number);
    stepMs: number;
  } | null;
}

function num(v: unknown, what: string, min: number, max: number, integer = true): number {
  if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v)))
    throw new ConfigError(
      `${what} must be ${integer ? "an integer" : "a number"} in [${min}, ${max}] (got ${describe(v)})`,
    );
  return v;
}

function groupName(v: unknown, what: string): string {
  if (typeof v !== "string" || !GROUP_RE.test(v))
    throw new ConfigError(`${what} must be 1–100 letters, digits, '_', '.' or '-' (got ${describe(v)})`);
  return v;
}

function fn<T>(v: unknown, what: string): T | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "function") throw new ConfigError(`${what} must be a function of the input`);
  return v as T;
}

/** Validates a definition's flow control (spec §14.9–§14.12); undefined when it has none. */
export function parseGates(task: string, spec: GateSpec<any>): DefGates | undefined {
  const { concurrency, concurrencyGroup, rateLimit, fairness } = spec;
  if (
    concurrency === undefined &&
    concurrencyGroup === undefined &&
    rateLimit === undefined &&
    fairness === undefined
  )
    return undefined;
  const fallback = GROUP_RE.test(task) ? task : null;
  let seat: DefGates["seat"] = null;
  if (concurrency !== undefined || concurrencyGroup !== undefined) {
    const c = concurrency ?? {};
    if (c === null || typeof c !== "object")
      throw new ConfigError(`task "${task}": concurrency must be an object`);
    if (concurrencyGroup !== undefined && c.group !== undefined && c.group !== concurrencyGroup)
      throw new ConfigError(`task "${task}": concurrencyGroup and concurrency.group disagree`);
    const g = concurrencyGroup ?? c.group ?? fallback;
    if (g === null)
      throw new ConfigError(
        `task "${task}": its name cannot name a concurrency group; give concurrency.group (letters, digits, '_', '.', '-')`,
      );
    const group = groupName(g, `task "${task}": concurrency group`);
    const limit =
      c.limit === undefined ? null : num(c.limit, `task "${task}": concurrency.limit`, 1, MAX_LIMIT);
    if (limit === null && concurrencyGroup === undefined && c.group === undefined)
      throw new ConfigError(`task "${task}": concurrency needs a limit`);
    seat = { group, limit, key: fn(c.key, `task "${task}": concurrency.key`) };
  }
  const rates: DefGates["rates"] = [];
  const list = rateLimit === undefined ? [] : Array.isArray(rateLimit) ? rateLimit : [rateLimit];
  if (list.length > MAX_RATE_LIMITS)
    throw new ConfigError(`task "${task}": at most ${MAX_RATE_LIMITS} rate limits`);
  for (const [i, r] of list.entries()) {
    const what = `task "${task}": rateLimit${list.length > 1 ? `[${i}]` : ""}`;
    if (r === null || typeof r !== "object") throw new ConfigError(`${what} must be { limit, periodMs, … }`);
    const n = r.name ?? fallback;
    if (n === null) throw new ConfigError(`${what}: the task name cannot name a rate limit; give name`);
    const name = groupName(n, `${what}.name`);
    if (rates.some((x) => x.name === name)) throw new ConfigError(`${what}: two rate limits named "${name}"`);
    const limit = num(r.limit, `${what}.limit`, 0.001, MAX_COST, false);
    const periodMs = num(r.periodMs, `${what}.periodMs`, 1, MAX_PERIOD_MS);
    const burst = r.burst === undefined ? limit : num(r.burst, `${what}.burst`, 0.001, MAX_COST, false);
    const cost =
      typeof r.cost === "function"
        ? (r.cost as (input: unknown) => number)
        : r.cost === undefined
          ? 1
          : num(r.cost, `${what}.cost`, 0, MAX_COST, false);
    const unit = r.unit === undefined ? undefined : groupName(r.unit, `${what}.unit`);
    rates.push({ name, key: fn(r.key, `${what}.key`), limit, periodMs, burst, cost, unit });
  }
  let fair: DefGates["fair"] = null;
  if (fairness !== undefined) {
    if (fairness === null || typeof fairness !== "object" || typeof fairness.key !== "function")
      throw new ConfigError(`task "${task}": fairness must be { key: (input) => string, weight? }`);
    const w = fairness.weight ?? 1;
    const weight =
      typeof w === "function"
        ? (w as (input: unknown) => number)
        : num(w, `task "${task}": fairness.weight`, 0.001, 1000, false);
    const stepMs = num(
      fairness.stepMs ?? DEFAULT_FAIR_STEP_MS,
      `task "${task}": fairness.stepMs`,
      1,
      86_400_000,
    );
    fair = { key: fairness.key as (input: unknown) => string, weight, stepMs };
  }
  return { seat, rates, fair };
}

function keyOf(f: (input: unknown) => string, input: unknown, what: string): string {
  let k: unknown;
  try {
    k = f(input);
  } catch (e) {
    throw new ValidationError(`${what} threw: ${(e as Error)?.message ?? String(e)}`);
  }
  return checkName(k, what);
}

function numberFrom(
  f: number | ((input: unknown) => number),
  input: unknown,
  what: string,
  min: number,
  max: number,
) {
  if (typeof f === "number") return f;
  let v: unknown;
  try {
    v = f(input);
  } catch (e) {
    throw new ValidationError(`${what} threw: ${(e as Error)?.message ?? String(e)}`);
  }
  if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max)
    throw new ValidationError(`${what} must return a number in [${min}, ${max}] (got ${describe(v)})`);
  return v;
}

/** The store form of a task's flow control, computed from its input at enqueue. */
export function gatesFor(task: string, g: DefGates | undefined, input: unknown): Gates | null {
  if (!g) return null;
  const seat = g.seat
    ? g.seat.key
      ? `${g.seat.group}${KEY_SEP}${keyOf(g.seat.key, input, `task "${task}": concurrency.key`)}`
      : g.seat.group
    : null;
  const rate: RateCharge[] = g.rates.map((r) => {
    const bucket = r.key
      ? `${r.name}${KEY_SEP}${keyOf(r.key, input, `task "${task}": rateLimit "${r.name}" key`)}`
      : r.name;
    const cost = numberFrom(r.cost, input, `task "${task}": rateLimit "${r.name}" cost`, 0, MAX_COST);
    return r.unit === undefined ? { bucket, cost } : { bucket, cost, unit: r.unit };
  });
  const fair = g.fair
    ? {
        key: keyOf(g.fair.key, input, `task "${task}": fairness.key`),
        stepMs:
          g.fair.stepMs / numberFrom(g.fair.weight, input, `task "${task}": fairness.weight`, 0.001, 1000),
      }
    : null;
  return { seat, rate: rate.length > 0 ? rate : null, fair };
}

/**
 * The limits a worker enforces at its claims: one per seat group and rate-limit
 * name across its definitions. Definitions that share a name must agree.
 */
export function claimLimits(defs: Iterable<{ name: string; gates?: DefGates | undefined }>): ClaimLimits {
  const seats: Record<string, number> = {};
  const seatFrom: Record<string, string> = {};
  const rates: Record<string, { limit: number; periodMs: number; burst: number }> = {};
  const rateFrom: Record<string, string> = {};
  for (const d of defs) {
    const g = d.gates;
    if (!g) continue;
    if (g.seat && g.seat.limit !== null) {
      const had = seats[g.seat.group];
      if (had !== undefined && had !== g.seat.limit)
        throw new ConfigError(
          `concurrency group "${g.seat.group}": task "${d.name}" says limit ${g.seat.limit}, task "${seatFrom[g.seat.group]}" says ${had}`,
        );
      seats[g.seat.group] = g.seat.limit;
      seatFrom[g.seat.group] = d.name;
    }
    for (const r of g.rates) {
      const had = rates[r.name];
      if (had && (had.limit !== r.limit || had.periodMs !== r.periodMs || had.burst !== r.burst))
        throw new ConfigError(
          `rate limit "${r.name}": task "${d.name}" and task "${rateFrom[r.name]}" configure it differently`,
        );
      rates[r.name] = { limit: r.limit, periodMs: r.periodMs, burst: r.burst };
      rateFrom[r.name] = d.name;
    }
  }
  return { seats, rates };
}
