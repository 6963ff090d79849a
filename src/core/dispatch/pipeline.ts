/**
 * Pipelines (spec §20.9–§20.10): steps, edges on outcomes, and the checks a
 * pipeline passes at registration. Pure.
 *
 * An attempt that settles takes its step's edge for its outcome: the forced
 * failure's own key first (`stalled`, `timed-out`, …), then `failed` for any
 * failure, then the default (succeeded → the item is done; failed → closed).
 * An edge goes to a step (`to`, optionally `resume: true` to revive the kept
 * session there, optionally `max` times per item) or ends the item (`end`).
 */
import { type ConfigError, RatchetError } from "../../errors.js";
import { ATTEMPT_MODES, type AttemptMode, FORCED_FAILURES, type ForcedFailure } from "./model.js";
import { PR_WAITS, type PrWait } from "./pulls.js";
import { DEFAULT_STEP_TIMEOUT_MINUTES, resolveSleep, type SleepRules } from "./timeouts.js";

export type EdgeKey = "succeeded" | "failed" | ForcedFailure;
export const EDGE_KEYS: readonly EdgeKey[] = ["succeeded", "failed", ...FORCED_FAILURES];

/** `waitFor`: the item moves on only once its pull request is merged, closed or has green checks (spec §22.7). */
export type Edge =
  | { readonly to: string; readonly resume?: boolean; readonly max?: number; readonly waitFor?: PrWait }
  | { readonly end: "done" | "closed"; readonly waitFor?: PrWait };

/** How a step's session is started: strings may hold `{{item.id}}`, `{{input.a.b}}`, `{{attempt.id}}`, `{{step}}`. */
export interface SpawnTemplate {
  readonly command: readonly string[];
  readonly prompt?: string;
  readonly cwd?: string;
  readonly env?: Readonly<Record<string, string>>;
}

export interface StepSpec {
  readonly name: string;
  /** The worker kind (adapter) that hosts this step's sessions. */
  readonly worker: string;
  readonly spawn: SpawnTemplate;
  /** Agent mode: close `timed-out` this long after the stretch start (default 120). */
  readonly timeoutMinutes?: number;
  readonly mode?: AttemptMode;
  readonly on?: Readonly<Partial<Record<EdgeKey, Edge>>>;
}

export interface PipelineSpec {
  readonly name: string;
  readonly steps: readonly StepSpec[];
  /** The first step of a new item (default: the first listed). */
  readonly start?: string;
  readonly sleep?: Partial<SleepRules>;
}

export interface Step extends StepSpec {
  readonly timeoutMinutes: number;
  readonly mode: AttemptMode;
  readonly on: Readonly<Partial<Record<EdgeKey, Edge>>>;
}

/** A pipeline that passed registration. */
export interface Pipeline {
  readonly name: string;
  readonly start: string;
  readonly steps: ReadonlyMap<string, Step>;
  readonly sleep: SleepRules;
}

export type PipelineProblem =
  | "invalid"
  | "duplicate_step"
  | "unknown_step"
  | "unknown_worker"
  | "unreachable_step"
  | "unbounded_cycle"
  /** An edge waits on a pull request but no forge watches pull requests (spec §22.7). */
  | "no_forge";

/** A pipeline refused at registration (spec §20.10). Nothing was registered. */
export class PipelineError extends RatchetError {
  constructor(
    readonly pipeline: string,
    readonly problem: PipelineProblem,
    message: string,
    /** The steps involved: the unknown or unreachable one, or the cycle's path. */
    readonly steps: readonly string[] = [],
  ) {
    super("RATCHET_INVALID_PIPELINE", `pipeline "${pipeline}": ${message}`);
  }
}

/** Bounds (spec §20.10). */
export const MAX_STEPS = 100;
export const MAX_EDGE_TAKES = 1_000;
export const MAX_TEMPLATE_CHARS = 16_384;
export const MAX_COMMAND_ARGS = 100;
export const MAX_ENV_ENTRIES = 100;
export const MAX_STEP_TIMEOUT_MINUTES = 7 * 24 * 60;
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/;
const PLACEHOLDER_RE = /\{\{\s*([^{}]*?)\s*\}\}/g;
const PATH_RE = /^(item\.id|attempt\.id|step|input(\.[A-Za-z0-9_-]+)*)$/;

function fail(p: string, problem: PipelineProblem, msg: string, steps: readonly string[] = []): never {
  throw new PipelineError(p, problem, msg, steps);
}

function checkTemplate(p: string, where: string, text: unknown): void {
  if (typeof text !== "string") fail(p, "invalid", `${where} must be a string`);
  if (text.length > MAX_TEMPLATE_CHARS)
    fail(p, "invalid", `${where} is longer than ${MAX_TEMPLATE_CHARS} characters`);
  for (const m of text.matchAll(PLACEHOLDER_RE)) {
    if (!PATH_RE.test(m[1]!)) fail(p, "invalid", `${where} has an unknown placeholder {{${m[1]}}}`);
  }
  if (text.replace(PLACEHOLDER_RE, "").includes("{{")) fail(p, "invalid", `${where} has an unclosed "{{"`);
}

function checkSpawn(p: string, step: string, s: SpawnTemplate | undefined): void {
  if (typeof s !== "object" || s === null) fail(p, "invalid", `step "${step}" needs a spawn template`);
  if (!Array.isArray(s.command) || s.command.length === 0 || s.command.length > MAX_COMMAND_ARGS)
    fail(p, "invalid", `step "${step}": spawn.command must list 1–${MAX_COMMAND_ARGS} strings`);
  for (const [i, a] of s.command.entries()) checkTemplate(p, `step "${step}" spawn.command[${i}]`, a);
  if (s.prompt !== undefined) checkTemplate(p, `step "${step}" spawn.prompt`, s.prompt);
  if (s.cwd !== undefined) checkTemplate(p, `step "${step}" spawn.cwd`, s.cwd);
  const env = Object.entries(s.env ?? {});
  if (env.length > MAX_ENV_ENTRIES)
    fail(p, "invalid", `step "${step}": more than ${MAX_ENV_ENTRIES} env entries`);
  for (const [k, v] of env) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) fail(p, "invalid", `step "${step}": bad env name "${k}"`);
    checkTemplate(p, `step "${step}" spawn.env.${k}`, v);
  }
}

function checkEdge(p: string, step: string, key: string, e: Edge | undefined): void {
  if (!(EDGE_KEYS as readonly string[]).includes(key))
    fail(p, "invalid", `step "${step}": unknown outcome "${key}"`);
  if (typeof e !== "object" || e === null) fail(p, "invalid", `step "${step}" on.${key} must be an edge`);
  if (e.waitFor !== undefined && !(PR_WAITS as readonly unknown[]).includes(e.waitFor))
    fail(p, "invalid", `step "${step}" on.${key}.waitFor must be one of ${PR_WAITS.join(", ")}`);
  if ("end" in e) {
    if (e.end !== "done" && e.end !== "closed")
      fail(p, "invalid", `step "${step}" on.${key}.end must be done or closed`);
    return;
  }
  if (typeof e.to !== "string") fail(p, "invalid", `step "${step}" on.${key} needs "to" or "end"`);
  if (e.max !== undefined && (!Number.isInteger(e.max) || e.max < 1 || e.max > MAX_EDGE_TAKES))
    fail(p, "invalid", `step "${step}" on.${key}.max must be an integer in 1–${MAX_EDGE_TAKES}`);
}

function normalizeStep(p: string, s: StepSpec): Step {
  if (typeof s !== "object" || s === null || typeof s.name !== "string" || !NAME_RE.test(s.name))
    fail(p, "invalid", `a step name must match ${NAME_RE}`);
  if (typeof s.worker !== "string" || !NAME_RE.test(s.worker))
    fail(p, "invalid", `step "${s.name}": worker must match ${NAME_RE}`);
  const mode = s.mode ?? "agent";
  if (!ATTEMPT_MODES.includes(mode)) fail(p, "invalid", `step "${s.name}": mode must be agent or attended`);
  const timeoutMinutes = s.timeoutMinutes ?? DEFAULT_STEP_TIMEOUT_MINUTES;
  if (!Number.isFinite(timeoutMinutes) || timeoutMinutes <= 0 || timeoutMinutes > MAX_STEP_TIMEOUT_MINUTES)
    fail(p, "invalid", `step "${s.name}": timeoutMinutes must be in (0, ${MAX_STEP_TIMEOUT_MINUTES}]`);
  checkSpawn(p, s.name, s.spawn);
  const on = s.on ?? {};
  for (const [key, e] of Object.entries(on)) checkEdge(p, s.name, key, e);
  return Object.freeze({ ...s, mode, timeoutMinutes, on: Object.freeze({ ...on }) });
}

function targets(step: Step, unboundedOnly: boolean): string[] {
  const out: string[] = [];
  for (const e of Object.values(step.on)) {
    if (e && "to" in e && !(unboundedOnly && e.max !== undefined)) out.push(e.to);
  }
  return out;
}

/** A cycle made only of edges without `max`, as a path, or null. */
function findUnboundedCycle(steps: ReadonlyMap<string, Step>): string[] | null {
  const color = new Map<string, 1 | 2>();
  const path: string[] = [];
  const visit = (name: string): string[] | null => {
    color.set(name, 1);
    path.push(name);
    for (const next of targets(steps.get(name)!, true)) {
      if (color.get(next) === 1) return [...path.slice(path.indexOf(next)), next];
      if (color.get(next) === undefined) {
        const found = visit(next);
        if (found) return found;
      }
    }
    path.pop();
    color.set(name, 2);
    return null;
  };
  for (const name of steps.keys()) {
    if (color.get(name) === undefined) {
      const found = visit(name);
      if (found) return found;
    }
  }
  return null;
}

function checkGraph(p: string, steps: ReadonlyMap<string, Step>, start: string): void {
  for (const step of steps.values()) {
    for (const to of targets(step, false))
      if (!steps.has(to))
        fail(p, "unknown_step", `step "${step.name}" has an edge to unknown step "${to}"`, [to]);
  }
  const seen = new Set([start]);
  const queue = [start];
  while (queue.length > 0) {
    for (const to of targets(steps.get(queue.shift()!)!, false))
      if (!seen.has(to)) {
        seen.add(to);
        queue.push(to);
      }
  }
  const unreachable = [...steps.keys()].filter((n) => !seen.has(n));
  if (unreachable.length > 0)
    fail(
      p,
      "unreachable_step",
      `no edge from "${start}" reaches ${unreachable.map((n) => `"${n}"`).join(", ")}`,
      unreachable,
    );
  const cycle = findUnboundedCycle(steps);
  if (cycle) fail(p, "unbounded_cycle", `the edges ${cycle.join(" -> ")} loop with no max`, cycle);
}

/**
 * Checks a pipeline and returns it normalised (defaults filled, frozen).
 * spec §20.10.
 * Invariant: a refused pipeline throws PipelineError with the problem and the
 * steps involved, and nothing is registered; `workers`, when given, are the
 * worker kinds the runner has adapters for; `o.forge: false` says no forge
 * watches pull requests, so no edge may wait on one (spec §22.7).
 */
export function definePipeline(
  spec: PipelineSpec,
  workers?: ReadonlySet<string>,
  o: { forge?: boolean } = {},
): Pipeline {
  const name = typeof spec?.name === "string" ? spec.name : "?";
  if (!NAME_RE.test(name)) fail(name, "invalid", `the name must match ${NAME_RE}`);
  if (!Array.isArray(spec.steps) || spec.steps.length === 0 || spec.steps.length > MAX_STEPS)
    fail(name, "invalid", `a pipeline has 1–${MAX_STEPS} steps`);
  const steps = new Map<string, Step>();
  for (const s of spec.steps) {
    const step = normalizeStep(name, s);
    if (steps.has(step.name))
      fail(name, "duplicate_step", `step "${step.name}" is listed twice`, [step.name]);
    if (workers && !workers.has(step.worker))
      fail(
        name,
        "unknown_worker",
        `step "${step.name}" needs worker "${step.worker}", which has no adapter`,
        [step.name],
      );
    steps.set(step.name, step);
  }
  const start = spec.start ?? spec.steps[0]!.name;
  if (!steps.has(start)) fail(name, "unknown_step", `the start step "${start}" is not a step`, [start]);
  checkGraph(name, steps, start);
  // spec §22.7: a wait on a pull request that no watcher follows would never end.
  const waiting = [...steps.values()].filter((s) =>
    Object.values(s.on).some((e) => e?.waitFor !== undefined),
  );
  if (o.forge === false && waiting.length > 0)
    fail(
      name,
      "no_forge",
      `step "${waiting[0]!.name}" has an edge that waits on a pull request, and no forge is configured`,
      waiting.map((s) => s.name),
    );
  let sleep: SleepRules;
  try {
    sleep = resolveSleep(spec.sleep);
  } catch (e) {
    fail(name, "invalid", (e as ConfigError).message);
  }
  return Object.freeze({ name, start, steps, sleep });
}
