/**
 * A side ledger of step-body executions, kept outside the database so it
 * survives a SIGKILL independently of what the engine committed.
 *
 * A step body appends `stepname:taskId` just before it returns. If the
 * engine then commits the result, the body never runs again, so the line
 * stays unique. A line that appears twice means the body ran, the process
 * died before the commit, and the body ran again after the restart: the
 * at-least-once window of a step, and the only way to get a duplicate.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";

export interface LedgerCounts {
  /** Lines written by earlier runs. */
  earlier: number;
  /** Lines written by this run. */
  thisRun: number;
  /** Distinct step executions (task, step) in the whole ledger. */
  distinct: number;
  /** Extra lines beyond the first per (task, step): bodies re-run after a crash. */
  rerun: number;
}

export class Ledger {
  readonly #path: string | undefined;
  readonly #counts = new Map<string, number>();
  readonly #earlier: number;
  #thisRun = 0;

  /** `path` undefined keeps the ledger in memory (for sqlite::memory: stores). */
  constructor(path: string | undefined) {
    this.#path = path;
    if (path && existsSync(path)) {
      for (const line of readFileSync(path, "utf8").split("\n")) if (line) this.#bump(line);
    }
    this.#earlier = [...this.#counts.values()].reduce((a, b) => a + b, 0);
  }

  #bump(line: string): void {
    this.#counts.set(line, (this.#counts.get(line) ?? 0) + 1);
  }

  /** Records one completed step body. Synchronous, so the line is in the file before the engine commits. */
  record(step: string, taskId: number): void {
    const line = `${step}:${taskId}`;
    if (this.#path) appendFileSync(this.#path, `${line}\n`);
    this.#bump(line);
    this.#thisRun++;
  }

  counts(): LedgerCounts {
    let rerun = 0;
    for (const n of this.#counts.values()) rerun += n - 1;
    return { earlier: this.#earlier, thisRun: this.#thisRun, distinct: this.#counts.size, rerun };
  }
}
