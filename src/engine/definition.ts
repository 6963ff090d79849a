/**
 * Task definitions: the code for a task name. Records name definitions by
 * `name`; code lives in the process and may be registered or replaced while
 * the engine runs.
 */
import { DEFAULT_RETRY, type RetryPolicy } from "../core/backoff.js";
import { MAX_PRIORITY, MIN_PRIORITY } from "../core/priority.js";
import { ConfigError, ValidationError } from "../errors.js";
import type { TaskContext } from "./context.js";
import { type DefGates, type GateSpec, parseGates } from "./gates.js";
import { TASK_FACT_OUTCOMES, type TaskFactOutcome } from "./task-facts.js";

/** The Standard Schema interface (zod, valibot, arktype …), the part we use. */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly "~standard": {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>;
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
  };
}
type StandardResult<O> =
  | { readonly value: O; readonly issues?: undefined }
  | {
      readonly issues: readonly {
        readonly message: string;
        readonly path?: readonly unknown[] | undefined;
      }[];
    };

export interface TaskSpec<I, O> extends GateSpec<I> {
  name: string;
  /** Raise when the meaning of stored input changes. Default 1. */
  version?: number;
  /** Bound of one invocation; the lease is maxMs + grace (spec §4.1). Default 60 s. */
  maxMs?: number;
  retry?: Partial<RetryPolicy>;
  /** Integer in [-1000, 1000]; higher runs first; waiting tasks age upward (spec §3.5). Default 0. */
  priority?: number;
  /** Default queue for this task. Default "default". */
  queue?: string;
  schema?: StandardSchemaV1<unknown, I>;
  run(ctx: TaskContext, input: I): Promise<O> | O;
  /**
   * Runs once after an abort, in a fresh invocation, only when everything this
   * task owns has ended (bottom-up, spec §12.5). Its return value is stored as
   * the aborted task's result. Without it an aborted task just ends `aborted`.
   */
  onAbort?(ctx: TaskContext, input: I): Promise<unknown> | unknown;
  /**
   * Brings a task stored by an older `version` up to this one before it runs
   * (spec §12.9). Returns the new input (and checkpoint, for phase tasks).
   * Throwing blocks the task (`migration_failed`) until other code is registered.
   */
  migrate?(input: unknown, checkpoint: unknown, fromVersion: number): Migrated | Promise<Migrated>;
  /** Outcomes whose settlement writes a `task.<outcome>` fact to the outbox (spec §21.17). Default none. */
  facts?: readonly TaskFactOutcome[];
}

export interface Migrated {
  input: unknown;
  checkpoint?: unknown;
}

export interface TaskDefinition<I = any, O = any> {
  readonly name: string;
  readonly version: number;
  readonly maxMs: number;
  readonly retry: Readonly<RetryPolicy>;
  readonly priority: number;
  readonly queue: string;
  readonly schema: StandardSchemaV1<unknown, I> | undefined;
  readonly run: (ctx: TaskContext, input: I) => Promise<O> | O;
  readonly onAbort: ((ctx: TaskContext, input: I) => Promise<unknown> | unknown) | undefined;
  readonly migrate:
    | ((input: unknown, checkpoint: unknown, fromVersion: number) => Migrated | Promise<Migrated>)
    | undefined;
  /** Seats, rate limits and fairness (spec §14.9–§14.12). */
  readonly gates?: DefGates | undefined;
  /** The outcomes reported to the outbox (spec §21.17); undefined when none. */
  readonly facts?: ReadonlySet<TaskFactOutcome> | undefined;
}

/** Largest timer Node can arm. */
export const MAX_MS = 2 ** 31 - 1;

const NAME_RE = /^[^\p{Cc}\p{Cf}]+$/u;

/**
 * Names, queues, job names and dedupe keys: 1–200 characters, no control or
 * format characters, no lone surrogates (a driver would silently turn them into
 * U+FFFD, so the name read back would differ).
 */
export function checkName(value: unknown, what: string): string {
  if (
    typeof value !== "string" ||
    value.length === 0 ||
    value.length > 200 ||
    !NAME_RE.test(value) ||
    !(value as unknown as { isWellFormed(): boolean }).isWellFormed() ||
    value.trim() !== value
  ) {
    throw new ValidationError(
      `${what} must be a string of 1–200 characters without control characters or surrounding spaces (got ${describe(value)})`,
    );
  }
  return value;
}

/**
 * Refuses an options object with a key outside `allowed` (spec §2.1, §9.6): a misspelt option
 * (`{ dealyMs }`, `{ name }` for `dedupe`) must fail at the call, not be silently ignored.
 * `undefined` and `null` count as no options.
 */
export function checkKeys(value: unknown, allowed: ReadonlySet<string>, what: string): void {
  if (value === undefined || value === null) return;
  if (typeof value !== "object" || Array.isArray(value))
    throw new ValidationError(`${what} must be an object (got ${describe(value)})`);
  for (const k in value)
    if (Object.hasOwn(value, k) && !allowed.has(k))
      throw new ValidationError(
        `${what}: unknown option ${describe(k)} (allowed: ${[...allowed].join(", ")})`,
      );
}

export function describe(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (typeof v === "bigint") return `${v}n`;
  if (typeof v === "function") return "a function";
  try {
    return String(JSON.stringify(v) ?? v).slice(0, 60);
  } catch {
    return typeof v;
  }
}

function int(v: unknown, what: string, min: number, max: number): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    throw new ConfigError(`${what} must be an integer in [${min}, ${max}] (got ${describe(v)})`);
  }
  return v;
}

export function defineTask<I, O>(spec: TaskSpec<I, O>): TaskDefinition<I, O> {
  if (spec === null || typeof spec !== "object") throw new ConfigError("defineTask needs an object");
  let name: string;
  try {
    name = checkName(spec.name, "task name");
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
  if (typeof spec.run !== "function") throw new ConfigError(`task "${name}": run must be a function`);
  if (spec.onAbort !== undefined && typeof spec.onAbort !== "function")
    throw new ConfigError(`task "${name}": onAbort must be a function`);
  if (spec.migrate !== undefined && typeof spec.migrate !== "function")
    throw new ConfigError(`task "${name}": migrate must be a function`);
  const r = { ...DEFAULT_RETRY, ...(spec.retry ?? {}) };
  const retry: RetryPolicy = {
    maxAttempts: int(r.maxAttempts, `task "${name}": retry.maxAttempts`, 1, 1000),
    baseMs: int(r.baseMs, `task "${name}": retry.baseMs`, 0, MAX_MS),
    factor: r.factor,
    capMs: int(r.capMs, `task "${name}": retry.capMs`, 0, MAX_MS),
    floorMs: int(r.floorMs, `task "${name}": retry.floorMs`, 0, MAX_MS),
  };
  if (typeof retry.factor !== "number" || !(retry.factor >= 1 && retry.factor <= 100)) {
    throw new ConfigError(`task "${name}": retry.factor must be a number in [1, 100]`);
  }
  if (spec.schema !== undefined && typeof spec.schema?.["~standard"]?.validate !== "function") {
    throw new ConfigError(`task "${name}": schema must implement Standard Schema (e.g. a zod schema)`);
  }
  let queue: string;
  try {
    queue = checkName(spec.queue ?? "default", `task "${name}": queue`);
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
  return Object.freeze({
    name,
    version: int(spec.version ?? 1, `task "${name}": version`, 1, 1_000_000),
    maxMs: int(spec.maxMs ?? 60_000, `task "${name}": maxMs`, 1, MAX_MS),
    retry: Object.freeze(retry),
    priority: int(spec.priority ?? 0, `task "${name}": priority`, MIN_PRIORITY, MAX_PRIORITY),
    queue,
    schema: spec.schema,
    run: spec.run,
    onAbort: spec.onAbort,
    migrate: spec.migrate,
    gates: parseGates(name, spec),
    facts: parseFacts(name, spec.facts),
  });
}

/**
 * Validates input with the definition's schema; returns the schema's output, boxed. The box matters:
 * an async function's return value is awaited, so returning a Promise or any object with a `then`
 * method would run the caller's `then` and store what it resolved to. Boxed, such an input reaches
 * toStorableJson and is refused like any value with a function member (spec §4.6).
 */
export async function validateInput(def: TaskDefinition, input: unknown): Promise<{ value: unknown }> {
  if (!def.schema) return { value: input };
  const res = await def.schema["~standard"].validate(input);
  if (res.issues) {
    const detail = res.issues
      .slice(0, 5)
      .map(
        (i) =>
          `${i.path?.length ? `${i.path.map((p) => (typeof p === "object" && p !== null && "key" in p ? String((p as { key: unknown }).key) : String(p))).join(".")}: ` : ""}${i.message}`,
      )
      .join("; ");
    throw new ValidationError(`invalid input for task "${def.name}": ${detail}`);
  }
  return { value: res.value };
}

/** spec §21.17: the outcomes a task reports to the outbox, checked at definition. */
function parseFacts(
  name: string,
  facts: readonly TaskFactOutcome[] | undefined,
): ReadonlySet<TaskFactOutcome> | undefined {
  if (facts === undefined) return undefined;
  if (!Array.isArray(facts) || !facts.every((f) => (TASK_FACT_OUTCOMES as readonly string[]).includes(f)))
    throw new ConfigError(`task "${name}": facts must list outcomes among ${TASK_FACT_OUTCOMES.join(", ")}`);
  return facts.length === 0 ? undefined : new Set(facts);
}
