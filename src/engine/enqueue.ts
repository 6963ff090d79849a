/**
 * Validation and shaping of an enqueue batch before anything is written
 * (spec §2.1–§2.6): every entry is checked, batch keys and offsets resolved,
 * cycles rejected with their path, and the batch ordered so predecessors come
 * first. Nothing here touches storage.
 */
import { findCycle } from "../core/cycles.js";
import { toStorableJson } from "../core/json.js";
import { MAX_PRIORITY, MIN_PRIORITY } from "../core/priority.js";
import { CycleError, RatchetError, ValidationError } from "../errors.js";
import type { FlowKey, NeedRef, NewTask } from "../store/store.js";
import { checkKeys, checkName, describe, type TaskDefinition, validateInput } from "./definition.js";
import { gatesFor } from "./gates.js";

export interface EnqueueOptions {
  queue?: string;
  priority?: number;
  /** Earliest start, epoch ms or Date. */
  runAfter?: number | Date;
  /** Earliest start as a delay from now (ms). */
  delayMs?: number;
  dedupe?: string;
  job?: string;
  /**
   * At most one task per key and period (spec §14.6): a later enqueue with the
   * same key in the same queue within periodMs writes nothing and returns the
   * earlier task's id.
   */
  throttle?: { key: string; periodMs: number };
  /**
   * Coalesce a burst (spec §14.7): while the task of this key has not started,
   * another enqueue replaces its input and moves its start to now + delayMs
   * (never past its first enqueue + maxDelayMs) instead of adding a task.
   */
  debounce?: { key: string; delayMs: number; maxDelayMs?: number };
  /** Ownership scope (spec §12.2): tasks sharing it can be awaited and aborted together. Default: the task's own id. */
  scope?: string;
  /** Predecessors: task ids; a string is a `key` of the same batch or else the dedupe key of a task in the same queue; in a batch also -k (the k-th entry before). */
  needs?: readonly (number | string)[];
}

export interface BatchEntry extends EnqueueOptions {
  task: TaskDefinition | string;
  input?: unknown;
  /** A name other entries of the same batch can use in `needs`. */
  key?: string;
}

/** The keys of EnqueueOptions and BatchEntry: anything else is refused (spec §2.1). */
export const ENQUEUE_KEYS: ReadonlySet<string> = new Set([
  "queue",
  "priority",
  "runAfter",
  "delayMs",
  "dedupe",
  "job",
  "throttle",
  "debounce",
  "scope",
  "needs",
]);
const ENTRY_KEYS: ReadonlySet<string> = new Set([...ENQUEUE_KEYS, "task", "input", "key"]);
const THROTTLE_KEYS: ReadonlySet<string> = new Set(["key", "periodMs"]);
const DEBOUNCE_KEYS: ReadonlySet<string> = new Set(["key", "delayMs", "maxDelayMs"]);

const MAX_BATCH = 10_000;
const MAX_NEEDS = 1_000;

export interface PrepareEnv {
  now: number;
  maxPayloadBytes: number;
  /** The definition for an entry's `task`; throws UnknownTaskError for an unknown name. */
  resolve(task: TaskDefinition | string): TaskDefinition;
}

/**
 * Returns the batch in write order and, per caller entry, its position in that order (undefined: the
 * caller's order, no entry needing another of the batch).
 */
export async function prepareBatch(
  entries: readonly BatchEntry[],
  env: PrepareEnv,
): Promise<{ batch: NewTask[]; position: number[] | undefined }> {
  if (!Array.isArray(entries) || entries.length === 0)
    throw new ValidationError("enqueue needs at least one entry");
  if (entries.length > MAX_BATCH) {
    throw new ValidationError(`a batch holds at most ${MAX_BATCH} entries (got ${entries.length})`);
  }
  const keys = new Map<string, number>();
  entries.forEach((e, i) => {
    if (e?.key !== undefined) {
      checkName(e.key, `entry ${i}: key`);
      if (keys.has(e.key))
        throw new ValidationError(`entry ${i}: key "${e.key}" is used twice in this batch`);
      keys.set(e.key, i);
    }
  });
  const prepared: NewTask[] = [];
  const localNeeds: number[][] = [];
  let anyLocal = false;
  // The definition of the last bare entry, its queue and priority checked (spec §2.1): a batch of
  // one task's `{ task, input }` checks them once, not per entry.
  let shape: Shape | undefined;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    if (!e || typeof e !== "object") throw new ValidationError(`entry ${i} must be an object`);
    if (isBare(e)) {
      const sh =
        shape !== undefined && shape.task === e.task ? shape : shapeOf(e.task, env.resolve(e.task), i);
      shape = sh;
      if (!sh.def.schema) {
        prepared.push(bareEntry(sh, e.input, env.maxPayloadBytes));
        localNeeds.push(NO_LOCAL);
        continue;
      }
    }
    checkKeys(e, ENTRY_KEYS, `entry ${i}`);
    const def = env.resolve(e.task);
    // Awaited only with a schema: a batch of 1,000 otherwise paid 1,000 promises and turns.
    const value = def.schema ? (await validateInput(def, e.input)).value : e.input;
    // After an await another caller may have registered another definition under a name: resolve again.
    shape = undefined;
    const { task, local } = prepareEntry(e, def, value, i, keys, entries.length, env);
    prepared.push(task);
    localNeeds.push(local);
    if (local.length > 0) anyLocal = true;
  }
  // No entry needs another of the batch (the common batch): no cycle to find, the order is the
  // caller's, and no need refers to a position. The cycle search, the topological order and a copy of
  // every entry were ~5 % of the JavaScript of enqueueMany of 1,000 no-ops on PostgreSQL (--cpu-prof);
  // 20 batches, three pairs alternating with the build before: Node CPU 550, 399, 404 → 510, 392,
  // 382 ms, the rate within the noise.
  if (!anyLocal) return { batch: prepared, position: undefined };
  const cycle = findCycle(
    entries.map((_, i) => i),
    (i) => localNeeds[i]!,
  );
  if (cycle) throw new CycleError(cycle.map((i) => entries[i]!.key ?? `#${i} ${prepared[i]!.name}`));
  const order = topoOrder(entries.length, localNeeds);
  const position = new Array<number>(entries.length);
  order.forEach((orig, p) => {
    position[orig] = p;
  });
  const batch = order.map((orig) => ({
    ...prepared[orig]!,
    needs: prepared[orig]!.needs.map((n): NeedRef => ("index" in n ? { index: position[n.index]! } : n)),
  }));
  return { batch, position };
}

/** An entry's local needs, and a bare entry's needs, when it has none (shared, frozen: only read). */
const NO_LOCAL: number[] = Object.freeze([]) as unknown as number[];
const NO_NEEDS: NeedRef[] = Object.freeze([]) as unknown as NeedRef[];

/** What the bare entries of one definition share, checked once (spec §2.1). */
interface Shape {
  task: BatchEntry["task"];
  def: TaskDefinition;
  queue: string;
  priority: number;
  what: () => string;
}

/**
 * An entry of nothing but `task` and `input` (the shape of most batches): a plain object, no other
 * enumerable key. Its options are the definition's, so they are checked once per definition
 * (shapeOf) instead of once per entry; anything else takes prepareEntry's checks. Issue 43, W1:
 * prepareBatch of 1,000 `{ task, input }` entries cost ~2.7 µs per entry against ~0.4 for
 * JSON.stringify of their inputs.
 */
function isBare(e: object): boolean {
  if (Object.getPrototypeOf(e) !== Object.prototype) return false;
  for (const k in e) if (k !== "task" && k !== "input") return false;
  return true;
}

function shapeOf(task: BatchEntry["task"], def: TaskDefinition, i: number): Shape {
  return {
    task,
    def,
    queue: checkName(def.queue, `entry ${i}: queue`),
    priority: checkPriority(def.priority, i),
    what: () => `input of task "${def.name}"`,
  };
}

/** prepareEntry's result for a bare entry: the definition's options, no delay, flow key or needs. */
function bareEntry(s: Shape, input: unknown, maxPayloadBytes: number): NewTask {
  const def = s.def;
  return {
    name: def.name,
    version: def.version,
    queue: s.queue,
    input: toStorableJson(input, s.what, maxPayloadBytes),
    priority: s.priority,
    maxMs: def.maxMs,
    maxAttempts: def.retry.maxAttempts,
    delayMs: 0,
    dedupe: null,
    job: null,
    scope: null,
    flow: null,
    gates: gatesFor(def.name, def.gates, input),
    needs: NO_NEEDS,
  };
}

function checkPriority(priority: unknown, i: number): number {
  if (
    typeof priority !== "number" ||
    !Number.isInteger(priority) ||
    priority < MIN_PRIORITY ||
    priority > MAX_PRIORITY
  ) {
    throw new ValidationError(
      `entry ${i}: priority must be an integer in [${MIN_PRIORITY}, ${MAX_PRIORITY}] (got ${describe(priority)})`,
    );
  }
  return priority;
}

/** One entry, its definition resolved and its input validated (`value`), in the store's form. */
function prepareEntry(
  e: BatchEntry,
  def: TaskDefinition,
  value: unknown,
  i: number,
  keys: Map<string, number>,
  size: number,
  env: PrepareEnv,
) {
  const now = env.now;
  const input = toStorableJson(value, () => `input of task "${def.name}"`, env.maxPayloadBytes);
  const queue = checkName(e.queue ?? def.queue, `entry ${i}: queue`);
  const priority = checkPriority(e.priority ?? def.priority, i);
  let delayMs = 0;
  if (e.runAfter !== undefined && e.delayMs !== undefined)
    throw new ValidationError(`entry ${i}: give runAfter or delayMs, not both`);
  if (e.runAfter !== undefined) {
    const t = e.runAfter instanceof Date ? e.runAfter.getTime() : e.runAfter;
    if (typeof t !== "number" || !Number.isFinite(t))
      throw new ValidationError(
        `entry ${i}: runAfter must be a Date or epoch ms (got ${describe(e.runAfter)})`,
      );
    delayMs = Math.max(0, t - now);
  } else if (e.delayMs !== undefined) {
    if (typeof e.delayMs !== "number" || !Number.isFinite(e.delayMs) || e.delayMs < 0) {
      throw new ValidationError(
        `entry ${i}: delayMs must be a finite number ≥ 0 (got ${describe(e.delayMs)})`,
      );
    }
    delayMs = e.delayMs;
  }
  if (delayMs > 100 * 365 * 86_400_000)
    throw new ValidationError(`entry ${i}: runAfter is more than 100 years away`);
  const flow = flowOf(e, i);
  if (flow?.kind === "debounce") {
    if (e.runAfter !== undefined || e.delayMs !== undefined)
      throw new ValidationError(`entry ${i}: debounce sets the start; give no runAfter or delayMs with it`);
    if (e.needs?.length) throw new ValidationError(`entry ${i}: a debounced task cannot have needs`);
    delayMs = flow.delayMs;
  }
  const needs: NeedRef[] = [];
  const local: number[] = [];
  const list = e.needs ?? [];
  if (!Array.isArray(list) || list.length > MAX_NEEDS)
    throw new ValidationError(`entry ${i}: needs must be an array of at most ${MAX_NEEDS} items`);
  for (const n of list) {
    if (typeof n === "string") {
      const j = keys.get(n);
      if (j === undefined) {
        // Not a key of this batch: the task holding this dedupe key in the same queue (spec §2.5).
        needs.push({ dedupe: checkName(n, `entry ${i}: needs`), queue });
        continue;
      }
      if (j === i) throw new CycleError([n, n]);
      needs.push({ index: j });
      local.push(j);
    } else if (Number.isInteger(n) && n < 0) {
      const j = i + n;
      if (j < 0 || j >= size)
        throw new ValidationError(`entry ${i}: needs ${n} points before the start of this batch`);
      needs.push({ index: j });
      local.push(j);
    } else if (Number.isSafeInteger(n) && n > 0) {
      needs.push({ id: n });
    } else {
      throw new ValidationError(
        `entry ${i}: needs items must be task ids, negative offsets or batch keys (got ${describe(n)})`,
      );
    }
  }
  const task: NewTask = {
    name: def.name,
    version: def.version,
    queue,
    input,
    priority,
    maxMs: def.maxMs,
    maxAttempts: def.retry.maxAttempts,
    delayMs,
    dedupe: e.dedupe === undefined ? null : checkName(e.dedupe, `entry ${i}: dedupe`),
    job: e.job === undefined ? null : checkName(e.job, `entry ${i}: job`),
    scope: e.scope === undefined ? null : checkName(e.scope, `entry ${i}: scope`),
    flow,
    gates: gatesFor(def.name, def.gates, value),
    needs,
  };
  return { task, local };
}

/** Kahn's order over batch-local needs (acyclic by now); stable for independent entries. */
function topoOrder(n: number, needs: number[][]): number[] {
  const indeg = new Array<number>(n).fill(0);
  const out: number[][] = Array.from({ length: n }, () => []);
  needs.forEach((list, i) => {
    for (const j of new Set(list)) {
      indeg[i]!++;
      out[j]!.push(i);
    }
  });
  const ready: number[] = [];
  for (let i = 0; i < n; i++) if (indeg[i] === 0) ready.push(i);
  const order: number[] = [];
  for (let k = 0; k < ready.length; k++) {
    const i = ready[k]!;
    order.push(i);
    for (const d of out[i]!) if (--indeg[d]! === 0) ready.push(d);
  }
  if (order.length !== n) throw new RatchetError("RATCHET_CYCLE", "dependency cycle in batch");
  return order;
}

const MAX_FLOW_MS = 366 * 86_400_000;

function flowMs(v: unknown, what: string, min: number): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > MAX_FLOW_MS)
    throw new ValidationError(
      `${what} must be an integer in [${min}, ${MAX_FLOW_MS}] ms (got ${describe(v)})`,
    );
  return v;
}

/** Validates throttle / debounce (one of them) into the store's form. */
function flowOf(e: BatchEntry, i: number): FlowKey | null {
  if (e.throttle !== undefined && e.debounce !== undefined)
    throw new ValidationError(`entry ${i}: give throttle or debounce, not both`);
  if (e.throttle !== undefined) {
    const t = e.throttle;
    if (t === null || typeof t !== "object")
      throw new ValidationError(`entry ${i}: throttle must be { key, periodMs }`);
    checkKeys(t, THROTTLE_KEYS, `entry ${i}: throttle`);
    return {
      kind: "throttle",
      key: checkName(t.key, `entry ${i}: throttle.key`),
      periodMs: flowMs(t.periodMs, `entry ${i}: throttle.periodMs`, 1),
      delayMs: 0,
      maxDelayMs: 0,
    };
  }
  if (e.debounce !== undefined) {
    const d = e.debounce;
    if (d === null || typeof d !== "object")
      throw new ValidationError(`entry ${i}: debounce must be { key, delayMs, maxDelayMs? }`);
    checkKeys(d, DEBOUNCE_KEYS, `entry ${i}: debounce`);
    const delayMs = flowMs(d.delayMs, `entry ${i}: debounce.delayMs`, 1);
    const maxDelayMs =
      d.maxDelayMs === undefined
        ? MAX_FLOW_MS
        : flowMs(d.maxDelayMs, `entry ${i}: debounce.maxDelayMs`, delayMs);
    return {
      kind: "debounce",
      key: checkName(d.key, `entry ${i}: debounce.key`),
      periodMs: 0,
      delayMs,
      maxDelayMs,
    };
  }
  return null;
}
