/**
 * Runs one claimed task: builds its invocation, runs the definition's code,
 * and turns the way the invocation ended into a settlement (decided by core,
 * applied by the store).
 */
import { decideFailure, type FailureKind } from "../core/backoff.js";
import type { Random } from "../core/clock.js";
import { type StoredError, toStorableJson, toStoredError } from "../core/json.js";
import {
  AbortedError,
  DuplicateStepError,
  LeaseLostError,
  NonRetryableError,
  NoProgressError,
  RateLimitedError,
  ValidationError,
} from "../errors.js";
import type { BlockedInfo, ClaimedTask, Fence, Settlement, SettleResult } from "../store/store.js";
import type { Batcher } from "./batcher.js";
import {
  type EndReason,
  Invocation,
  type InvocationDeps,
  isThenable,
  type RunHooks,
  type RunReport,
} from "./context.js";
import type { Migrated, TaskDefinition } from "./definition.js";
import { retryStore } from "./store-retry.js";
import { withTaskFacts } from "./task-facts.js";

export type { RunHooks, RunReport } from "./context.js";

export interface ExecutorDeps extends InvocationDeps {
  settler: Batcher<Settlement, SettleResult>;
  random: Random;
  maxResultBytes: number;
  onError: (err: unknown, taskId: number) => void;
}

function classify(err: unknown): FailureKind {
  if (err instanceof NoProgressError) return "no_progress";
  if (err instanceof NonRetryableError || err instanceof DuplicateStepError) return "non_retryable";
  return "error";
}

/** Decides the settlement for an invocation's end (pure apart from JSON checks and the random source). */
export function settlementFor(
  task: ClaimedTask,
  fence: Fence,
  def: TaskDefinition,
  reason: EndReason,
  deps: Pick<ExecutorDeps, "random" | "maxResultBytes">,
): { settlement: Settlement | null; report: RunReport } {
  switch (reason.kind) {
    case "returned": {
      let text: string;
      try {
        text = toStorableJson(reason.value, () => `result of task "${task.name}"`, deps.maxResultBytes);
      } catch (err) {
        return failure(task, fence, def, deps, "unstorable_result", toStoredError(err));
      }
      return { settlement: { kind: "complete", fence, result: text }, report: "done" };
    }
    case "threw":
      if (reason.error instanceof LeaseLostError) return { settlement: null, report: "lost" };
      if (reason.error instanceof AbortedError) {
        return {
          settlement: {
            kind: "aborted",
            fence,
            error: toStoredError(reason.error),
            handler: handlerFor(fence, def),
          },
          report: "aborted",
        };
      }
      if (reason.error instanceof RateLimitedError) {
        // spec §14.8: not the task's failure; run again after the pause, attempt given back.
        return {
          settlement: {
            kind: "retry",
            fence,
            delayMs: reason.error.retryAfterMs,
            error: toStoredError(reason.error),
            refund: true,
          },
          report: "retried",
        };
      }
      return failure(task, fence, def, deps, classify(reason.error), toStoredError(reason.error));
    case "timeout":
      return failure(task, fence, def, deps, "timeout", {
        name: "TimeoutError",
        code: "RATCHET_TIMEOUT",
        message: `task "${task.name}" ran past its maxMs of ${def.maxMs} ms`,
      });
    case "aborted":
      return {
        settlement: {
          kind: "aborted",
          fence,
          error: { name: "Aborted", message: "abort requested" },
          handler: handlerFor(fence, def),
        },
        report: "aborted",
      };
    case "parked":
      return { settlement: null, report: "suspended" };
    case "handover":
      // spec §12.8: give the task back (attempt included) so the next claim runs the new definition.
      return { settlement: { kind: "release", fence }, report: "released" };
    case "lease_lost":
      return { settlement: null, report: "lost" };
    case "suspended":
      return {
        settlement: { kind: "sleep", fence, step: reason.step, delayMs: reason.delayMs },
        report: "suspended",
      };
    case "shutdown":
      return { settlement: { kind: "release", fence }, report: "released" };
  }
}

/** The settlement of a run that failed: a retry while attempts remain, else the task's failure (spec §5). */
function failure(
  task: ClaimedTask,
  fence: Fence,
  def: TaskDefinition,
  deps: Pick<ExecutorDeps, "random">,
  kind: FailureKind,
  error: StoredError,
): { settlement: Settlement; report: RunReport } {
  const d = decideFailure(task.attempts, kind, def.retry, deps.random);
  return d.kind === "retry"
    ? { settlement: { kind: "retry", fence, delayMs: d.delayMs, error }, report: "retried" }
    : { settlement: { kind: "fail", fence, outcome: d.outcome, error }, report: "failed" };
}

/** A run interrupted by an abort goes back for its abort handler, if the definition has one (spec §12.5). */
function handlerFor(fence: Fence, def: TaskDefinition): boolean {
  return fence.mode !== "abort" && def.onAbort !== undefined;
}

/**
 * Brings the stored task to the definition's version (spec §12.9). Returns the
 * input to run with, or undefined after parking the task as blocked.
 *
 * Invariant: a migration that throws, or is missing, blocks the task as
 * `migration_failed` and never ends it (spec §5.5, §12.9): it stays live for
 * the next deploy's code.
 */
async function prepare(task: ClaimedTask, def: TaskDefinition, inv: Invocation, deps: ExecutorDeps) {
  const block = async (info: BlockedInfo) => {
    await retryStore(() => deps.store.block(inv.fence, info));
    inv.end({ kind: "parked" });
    return { ok: false as const };
  };
  if (task.version > def.version) return block({ reason: "too_old", version: def.version });
  if (task.version === def.version)
    return { ok: true as const, input: task.input, checkpoint: task.checkpoint };
  if (!def.migrate) {
    return block({
      reason: "migration_failed",
      version: def.version,
      error: {
        name: "NoMigration",
        message: `task "${def.name}" v${def.version} has no migrate for v${task.version}`,
      },
    });
  }
  let m: Migrated;
  let input: string;
  let checkpoint: string | null;
  try {
    m = await def.migrate(task.input, task.checkpoint, task.version);
    if (m === null || typeof m !== "object" || !("input" in m))
      throw new ValidationError("migrate must return { input, checkpoint? }");
    input = toStorableJson(m.input ?? null, `migrated input of task ${task.id}`, deps.maxPayloadBytes);
    const cp = m.checkpoint === undefined ? task.checkpoint : m.checkpoint;
    checkpoint =
      cp === null || cp === undefined ? null : toStorableJson(cp, "migrated checkpoint", deps.maxResultBytes);
  } catch (err) {
    return block({ reason: "migration_failed", version: def.version, error: toStoredError(err) });
  }
  await retryStore(() => deps.store.migrated(inv.fence, def.version, input, checkpoint));
  return {
    ok: true as const,
    input: JSON.parse(input) as unknown,
    checkpoint: checkpoint && JSON.parse(checkpoint),
  };
}

/**
 * Starts a claimed task's code and returns its invocation; `hooks` hear when the slot frees and
 * when the settlement committed. The run's state lives on the invocation and every step of it is a
 * function of this module taking the invocation, not a closure: a no-op task used to allocate some
 * twelve promises here (ended, report, slotFree, their chains and the driver's reactions), the
 * largest share of the ~8 KB of garbage per task of a SQLite drain (sampling heap profile); then
 * six closures, three promises and their reactions per task. The engine alone (`node
 * dist/bench/engine.js --heap`, claims and settlements answered from memory) allocated 3,566 bytes
 * per task with those, 1,665 without (~550 of them the fake claims), and `--pairs 5` measured
 * 17.8 → 15.4 µs of CPU per task over 20,000. About half of that is V8's optimizing compiler on
 * its background threads, which a fresh worker pays while it warms up: fewer functions per task
 * are less for it to compile.
 */
export function execute(
  task: ClaimedTask,
  def: TaskDefinition,
  deps: ExecutorDeps,
  hooks: RunHooks,
): Invocation {
  const inv = new Invocation(task, def.maxMs, deps, def, ended, hooks);
  // The code starts in a microtask, never inside the caller (the driver's claim loop): a task that
  // suspends or ends at once must find itself registered as running first. The runs started in one
  // go share that microtask (startPending), in the order they were started.
  if (pending.push(inv) === 1) queueMicrotask(startPending);
  return inv;
}

/** Invocations whose code has not started yet (execute). */
let pending: Invocation[] = [];

function startPending(): void {
  const batch = pending;
  pending = [];
  for (const inv of batch) {
    try {
      runCode(inv);
    } catch (err) {
      // A bug of ours (task code's errors end its invocation): surface it as an uncaught error, as
      // a throwing promise reaction would, and start the rest of the batch all the same.
      process.nextTick(rethrow, err);
    }
  }
}

function rethrow(err: unknown): never {
  throw err;
}

/**
 * Runs the code of `inv` and ends the invocation with what the code did. Code that returns a value
 * (not a promise) ends its invocation here and now: no promise, no await, no closure.
 */
function runCode(inv: Invocation): void {
  let value: unknown;
  let thenable: boolean;
  try {
    value = runBody(inv);
    // Inside the try: a `then` getter that throws is the code's error, as awaiting it would make it.
    thenable = isThenable(value);
  } catch (error) {
    codeEnded(inv, { kind: "threw", error });
    return;
  }
  if (thenable) void awaitCode(inv, value as PromiseLike<unknown>);
  else codeEnded(inv, { kind: "returned", value });
}

async function awaitCode(inv: Invocation, value: PromiseLike<unknown>): Promise<void> {
  let reason: EndReason;
  try {
    reason = { kind: "returned", value: await value };
  } catch (error) {
    reason = { kind: "threw", error };
  }
  codeEnded(inv, reason);
}

function codeEnded(inv: Invocation, reason: EndReason): void {
  inv.codeDone = true;
  // A no-op if the invocation ended earlier; then the slot frees now, the code having returned.
  if (inv.isEnded) freeSlot(inv);
  else inv.end(reason);
}

/** The definition's code (or its abort handler) for the invocation; what it returns. */
function runBody(inv: Invocation): unknown {
  const { task } = inv;
  const def = inv.definition!;
  // The common case (same version) needs no store call.
  if (task.version !== def.version) return prepareThenRun(inv, def);
  inv.checkpoint = task.checkpoint;
  return runReady(inv, def, task.input);
}

async function prepareThenRun(inv: Invocation, def: TaskDefinition): Promise<unknown> {
  const ready = await prepare(inv.task, def, inv, inv.deps as ExecutorDeps);
  if (!ready.ok || inv.isEnded) return undefined;
  inv.checkpoint = ready.checkpoint;
  return runReady(inv, def, ready.input);
}

function runReady(inv: Invocation, def: TaskDefinition, input: unknown): unknown {
  if (inv.isEnded) return undefined;
  if (inv.mode === "abort") {
    // spec §12.5: the abort handler runs only in abort mode; without one the task ends aborted.
    if (!def.onAbort) {
      inv.end({ kind: "aborted" });
      return undefined;
    }
    return def.onAbort(inv, input);
  }
  return def.run(inv, input);
}

function freeSlot(inv: Invocation): void {
  if (inv.slotFreed) return;
  inv.slotFreed = true;
  inv.hooks.slotFree(inv);
}

/**
 * The invocation ended (inv.end, once): from runCode, a timer, a suspending ctx call, an abort or a
 * shutdown; none of them expects code of its own to run before it returns, and nothing here runs
 * task code.
 */
function ended(inv: Invocation, reason: EndReason): void {
  // A suspended or parked task frees its slot at once; otherwise the slot frees when the code
  // has returned, which may be later (a timeout or an abort ends the invocation first).
  if (inv.codeDone || reason.kind === "suspended" || reason.kind === "parked" || reason.kind === "handover")
    freeSlot(inv);
  settle(inv, reason);
}

/**
 * Turns the way an invocation ended into its settlement, commits it (spec §4.3, §4.5, §14.11) and
 * tells the hooks what happened: once, whatever fails.
 */
function settle(inv: Invocation, reason: EndReason): void {
  // spec §16.2: a run's streamed chunks are committed before its settlement (which ends the claim
  // that fences them). Only an invocation that streamed and has chunks buffered waits for this.
  const streams = inv.pendingStreams;
  if (streams !== undefined && reason.kind !== "lease_lost" && reason.kind !== "parked") {
    streams.commitAll().then(
      () => settleNow(inv, reason),
      (err) => {
        if (!(err instanceof LeaseLostError)) (inv.deps as ExecutorDeps).onError(err, inv.taskId);
        settleNow(inv, reason);
      },
    );
    return;
  }
  settleNow(inv, reason);
}

function settleNow(inv: Invocation, reason: EndReason): void {
  const deps = inv.deps as ExecutorDeps;
  const { task } = inv;
  const decided = settlementFor(task, inv.fence, inv.definition!, reason, deps);
  const { report } = decided;
  const opted = inv.definition!.facts; // spec §21.17: undefined unless the task opted in
  const settlement =
    opted && decided.settlement ? withTaskFacts(decided.settlement, task, opted) : decided.settlement;
  if (!settlement) {
    inv.hooks.settled(inv, report);
    return;
  }
  inv.report = report;
  if (reason.kind === "threw" && reason.error instanceof RateLimitedError && task.rate !== null) {
    // spec §14.11: the provider's pause holds for every worker, not just this task.
    const e = reason.error;
    retryStore(() => deps.store.pauseRate(task.id, e.retryAfterMs, e.limit))
      .catch((err) => deps.onError(err, task.id))
      .then(() => deps.settler.send(settlement, committed, inv));
    return;
  }
  deps.settler.send(settlement, committed, inv);
}

/** The settle batch of `inv`'s settlement (inv.report) committed, or failed. */
function committed(inv: Invocation, err: unknown, res?: SettleResult): void {
  if (err === undefined && res === "abort_marked") {
    // spec §4.5: a marked task's run may not commit; it ends aborted (or goes back for its abort handler).
    inv.report = "aborted";
    const aborted: Settlement = {
      kind: "aborted",
      fence: inv.fence,
      error: { name: "Aborted", message: "abort requested" },
      handler: handlerFor(inv.fence, inv.definition!),
    };
    (inv.deps as ExecutorDeps).settler.send(aborted, committedAgain, inv);
    return;
  }
  committedAgain(inv, err, res);
}

/** As committed, for the aborted settlement that replaced a refused one: whatever it gets is final. */
function committedAgain(inv: Invocation, err: unknown, res?: SettleResult): void {
  if (err !== undefined) {
    (inv.deps as ExecutorDeps).onError(err, inv.taskId);
    inv.hooks.settled(inv, "lost");
    return;
  }
  inv.hooks.settled(inv, res === "ok" ? inv.report : "lost");
}
