import type { defineTask } from "../src/index.js";

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
