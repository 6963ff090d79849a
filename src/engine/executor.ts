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
import { type EndReason, Invocation, type InvocationDeps } from "./context.js";
import type { Migrated, TaskDefinition } from "./definition.js";
import { retryStore } from "./store-retry.js";

export type RunReport = "done" | "failed" | "retried" | "aborted" | "suspended" | "lost" | "released";

export interface ExecutorDeps extends InvocationDeps {
  settler: Batcher<Settlement, SettleResult>;
  random: Random;
  maxResultBytes: number;
  onError: (err: unknown, taskId: number) => void;
}

/** What the worker hears about a run it started (see execute). */
export interface RunHooks {
  /** The worker slot is free again: the code returned (or threw), or the task suspended or parked. Once. */
  slotFree(): void;
  /** What happened, once the settlement is committed (or could not be). Once. */
  settled(r: RunReport): void;
}

function classify(err: unknown): FailureKind {
  if (err instanceof NoProgressError) return "no_progress";
  if (err instanceof NonRetryableError || err instanceof DuplicateStepError) return "non_retryable";
  return "error";
}

/** Decides the settlement for an invocation's end (pure apart from JSON checks and the random source). */
export function settlementFor(
  task: ClaimedTask,
  def: TaskDefinition,
  reason: EndReason,
  deps: Pick<ExecutorDeps, "random" | "maxResultBytes">,
): { settlement: Settlement | null; report: RunReport } {
  const fence: Fence = { taskId: task.id, token: task.epoch, mode: task.abortRequested ? "abort" : "run" };
  const failure = (kind: FailureKind, error: StoredError): { settlement: Settlement; report: RunReport } => {
    const d = decideFailure(task.attempts, kind, def.retry, deps.random);
    return d.kind === "retry"
      ? { settlement: { kind: "retry", fence, delayMs: d.delayMs, error }, report: "retried" }
      : { settlement: { kind: "fail", fence, outcome: d.outcome, error }, report: "failed" };
  };
  switch (reason.kind) {
    case "returned": {
      let text: string;
      try {
        text = toStorableJson(reason.value, `result of task "${task.name}"`, deps.maxResultBytes);
      } catch (err) {
        return failure("unstorable_result", toStoredError(err));
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
      return failure(classify(reason.error), toStoredError(reason.error));
    case "timeout":
      return failure("timeout", {
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

/** A run interrupted by an abort goes back for its abort handler, if the definition has one (spec §12.5). */
function handlerFor(fence: Fence, def: TaskDefinition): boolean {
  return fence.mode !== "abort" && def.onAbort !== undefined;
}

/**
 * Brings the stored task to the definition's version (spec §12.9). Returns the
 * input to run with, or undefined after parking the task as blocked.
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
 * when the settlement committed. Callbacks, not promises: a no-op task used to allocate some twelve
 * promises here (ended, report, slotFree, their chains and the driver's reactions), the largest
 * share of the ~8 KB of garbage per task of a SQLite drain (sampling heap profile).
 */
export function execute(
  task: ClaimedTask,
  def: TaskDefinition,
  deps: ExecutorDeps,
  hooks: RunHooks,
): Invocation {
  let codeDone = false;
  let slotFreed = false;
  const freeSlot = (): void => {
    if (slotFreed) return;
    slotFreed = true;
    hooks.slotFree();
  };
  // Called synchronously by the first inv.end(): from this module's reaction to the code, a timer,
  // a suspending ctx call, an abort or a shutdown; none of them expects code of its own to run
  // before it returns, and nothing here runs task code.
  const inv = new Invocation(task, def.maxMs, deps, def, (reason) => {
    // A suspended or parked task frees its slot at once; otherwise the slot frees when the code
    // has returned, which may be later (a timeout or an abort ends the invocation first).
    if (codeDone || reason.kind === "suspended" || reason.kind === "parked" || reason.kind === "handover")
      freeSlot();
    settle(task, def, reason, deps, hooks.settled);
  });
  const body = async (): Promise<unknown> => {
    // The common case (same version) needs no store call, so it takes no extra await either.
    const ready =
      task.version === def.version
        ? { ok: true as const, input: task.input, checkpoint: task.checkpoint }
        : await prepare(task, def, inv, deps);
    if (!ready.ok || inv.isEnded) return undefined;
    inv.checkpoint = ready.checkpoint;
    if (inv.mode === "abort") {
      // spec §12.5: the abort handler runs only in abort mode; without one the task ends aborted.
      if (!def.onAbort) {
        inv.end({ kind: "aborted" });
        return undefined;
      }
      return def.onAbort(inv, ready.input);
    }
    return def.run(inv, ready.input);
  };
  const afterCode = (reason: EndReason): void => {
    codeDone = true;
    // A no-op if the invocation ended earlier; then the slot frees now, the code having returned.
    if (inv.isEnded) freeSlot();
    else inv.end(reason);
  };
  Promise.resolve()
    .then(body)
    .then(
      (value) => afterCode({ kind: "returned", value }),
      (error) => afterCode({ kind: "threw", error }),
    );
  return inv;
}

/**
 * Turns the way an invocation ended into its settlement, commits it (spec §4.3, §4.5, §14.11) and
 * tells `done` what happened: once, whatever fails.
 */
function settle(
  task: ClaimedTask,
  def: TaskDefinition,
  reason: EndReason,
  deps: ExecutorDeps,
  done: (r: RunReport) => void,
): void {
  const { settlement, report } = settlementFor(task, def, reason, deps);
  if (!settlement) {
    done(report);
    return;
  }
  const lost = (err: unknown): void => {
    deps.onError(err, task.id);
    done("lost");
  };
  const commit = (s: Settlement, r: RunReport, again: boolean): void =>
    deps.settler.send(s, (err, res) => {
      if (err !== undefined) return lost(err);
      if (res === "abort_marked" && again) {
        // spec §4.5: a marked task's run may not commit; it ends aborted (or goes back for its abort handler).
        const aborted: Settlement = {
          kind: "aborted",
          fence: s.fence,
          error: { name: "Aborted", message: "abort requested" },
          handler: handlerFor(s.fence, def),
        };
        return commit(aborted, "aborted", false);
      }
      done(res === "ok" ? r : "lost");
    });
  if (reason.kind === "threw" && reason.error instanceof RateLimitedError && task.rate !== null) {
    // spec §14.11: the provider's pause holds for every worker, not just this task.
    const e = reason.error;
    retryStore(() => deps.store.pauseRate(task.id, e.retryAfterMs, e.limit))
      .catch((err) => deps.onError(err, task.id))
      .then(() => commit(settlement, report, true));
    return;
  }
  commit(settlement, report, true);
}
