/**
 * A child a running task spawns (spec §12.1), checked and put in the store's form before anything
 * is written: ctx.spawn and ctx.spawnMany share it.
 */
import { toStorableJson } from "../core/json.js";
import { MAX_PRIORITY, MIN_PRIORITY } from "../core/priority.js";
import { ValidationError } from "../errors.js";
import type { NewChild } from "../store/store.js";
import { checkKeys, checkName, MAX_MS, type TaskDefinition, validateInput } from "./definition.js";
import { gatesFor } from "./gates.js";

export interface SpawnOptions {
  /** A background child is outside its owner's abort cascade and completing hold (spec §12.2). */
  background?: boolean;
  priority?: number;
  delayMs?: number;
  queue?: string;
}

/** One child of ctx.spawnMany: what ctx.spawn takes as arguments. */
export interface ChildSpec<I = unknown> {
  name: string;
  task: TaskDefinition<I> | string;
  input?: I;
  opts?: SpawnOptions;
}

const SPAWN_KEYS: ReadonlySet<string> = new Set(["background", "priority", "delayMs", "queue"]);

export interface ChildDeps {
  resolve(task: TaskDefinition | string): TaskDefinition;
  maxPayloadBytes: number;
}

/** spec §12.1, §2.1: a child's name, definition, options and input checked; throws before any write. */
export async function childOf(deps: ChildDeps, job: string | null, spec: ChildSpec): Promise<NewChild> {
  if (spec === null || typeof spec !== "object") throw new ValidationError("a child must be an object");
  const n = checkName(spec.name, "spawn name");
  const def = deps.resolve(spec.task);
  const opts = spec.opts ?? {};
  if (opts === null || typeof opts !== "object") throw new ValidationError("spawn options must be an object");
  checkKeys(opts, SPAWN_KEYS, "spawn options"); // spec §2.1: no option is silently ignored
  const background = opts.background ?? false;
  if (typeof background !== "boolean") throw new ValidationError("spawn background must be a boolean");
  const priority = opts.priority ?? def.priority;
  if (!Number.isInteger(priority) || priority < MIN_PRIORITY || priority > MAX_PRIORITY)
    throw new ValidationError(`spawn priority must be an integer in [${MIN_PRIORITY}, ${MAX_PRIORITY}]`);
  const delayMs = opts.delayMs ?? 0;
  if (typeof delayMs !== "number" || !Number.isInteger(delayMs) || delayMs < 0 || delayMs > MAX_MS)
    throw new ValidationError(`spawn delayMs must be an integer in [0, ${MAX_MS}]`);
  const queue = checkName(opts.queue ?? def.queue, "queue");
  const { value } = await validateInput(def, spec.input);
  const text = toStorableJson(
    value === undefined ? null : value,
    `input of child "${n}"`,
    deps.maxPayloadBytes,
  );
  return {
    spawnName: n,
    background,
    task: {
      name: def.name,
      version: def.version,
      queue,
      input: text,
      priority,
      maxMs: def.maxMs,
      maxAttempts: def.retry.maxAttempts,
      delayMs,
      dedupe: null,
      job,
      gates: gatesFor(def.name, def.gates, value),
      needs: [],
    },
  };
}
