import type { defineTask } from "../src/index.js";
import type { ClaimedTask, ClaimRequest } from "../src/store/store.js";

/**
 * The no-op task of the drain benchmarks, named "noop", and a promise that settles when it has run
 * `n` times. `define` is the defineTask of the build under test (drain.ts imports a build's dist/
 * at run time); `onRun` sees each run first.
 */
export function countingNoop(define: typeof defineTask, n: number, onRun?: () => void) {
  let seen = 0;
  let all!: () => void;
  const finished = new Promise<void>((r) => {
    all = r;
  });
  const task = define({
    name: "noop",
    run: () => {
      onRun?.();
      if (++seen === n) all();
      return null;
    },
  });
  return { task, finished };
}

/**
 * The no-op as a store's claim would hand it to the worker (maxMs 60 s, nothing rare set): the
 * benchmarks that answer claims themselves (engine.ts from memory, drain.ts --lean from the floor's
 * table) build their tasks with it.
 */
export function claimedNoop(
  id: number,
  epoch: number,
  input: unknown,
  now: number,
  req: ClaimRequest,
): ClaimedTask {
  return {
    id,
    queue: "default",
    name: "noop",
    version: 1,
    input,
    status: "running",
    priority: 0,
    maxMs: 60_000,
    attempts: epoch,
    epoch,
    leaseUntil: now + 60_000 + req.leaseGraceMs,
    lockedBy: req.workerId,
    job: null,
    abortRequested: false,
    startedAt: now,
    claimedAt: now,
    ownerId: null,
    scope: null,
    checkpoint: null,
    seat: null,
    rate: null,
    reclaimed: false,
    fresh: epoch === 1,
  };
}
