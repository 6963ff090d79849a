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
  RatchetError,
} from "../errors.js";
import type { ClaimedTask, Settlement, SettleResult } from "../store/store.js";
import type { Batcher } from "./batcher.js";
import { type EndReason, Invocation, type InvocationDeps } from "./context.js";
import type { TaskDefinition } from "./definition.js";

export type RunReport = "done" | "failed" | "retried" | "aborted" | "suspended" | "lost" | "released";

export interface ExecutorDeps extends InvocationDeps {
  settler: Batcher<Settlement, SettleResult>;
  random: Random;
  maxResultBytes: number;
  onError: (err: unknown, taskId: number) => void;
}

export interface Running {
  invocation: Invocation;
  /** Resolves when the worker slot is free again (the code returned, or the task suspended). */
  slotFree: Promise<void>;
  /** Resolves with what happened, once the settlement is committed. */
  report: Promise<RunReport>;
}

function classify(err: unknown): FailureKind {
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
  const fence = { taskId: task.id, token: task.epoch };
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
          settlement: { kind: "aborted", fence, error: toStoredError(reason.error) },
          report: "aborted",
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
        settlement: { kind: "aborted", fence, error: { name: "Aborted", message: "abort requested" } },
        report: "aborted",
      };
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

export function execute(task: ClaimedTask, def: TaskDefinition, deps: ExecutorDeps): Running {
  const inv = new Invocation(task, def.maxMs, deps);
  let userDone: Promise<unknown>;
  if (task.abortRequested) {
    // spec §7.2: a dead holder's marked task is settled aborted without running code.
    inv.end({ kind: "aborted" });
    userDone = Promise.resolve();
  } else {
    userDone = Promise.resolve()
      .then(() => def.run(inv, task.input))
      .then(
        (value) => inv.end({ kind: "returned", value }),
        (error) => inv.end({ kind: "threw", error }),
      );
  }
  const report = inv.ended.then(async (reason) => {
    let { settlement, report: r } = settlementFor(task, def, reason, deps);
    if (!settlement) return r;
    let res = await deps.settler.submit(settlement);
    if (res === "abort_marked") {
      // spec §4.5: a marked task's run may not commit; it ends aborted.
      settlement = {
        kind: "aborted",
        fence: settlement.fence,
        error: { name: "Aborted", message: "abort requested" },
      };
      r = "aborted";
      res = await deps.settler.submit(settlement);
    }
    return res === "ok" ? r : "lost";
  });
  const slotFree = inv.ended.then((reason) =>
    reason.kind === "suspended" ? undefined : userDone.then(() => undefined),
  );
  return {
    invocation: inv,
    slotFree,
    report: report.catch((err) => {
      deps.onError(err instanceof RatchetError ? err : err, task.id);
      return "lost" as const;
    }),
  };
}
