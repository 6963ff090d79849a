/**
 * The demo's live status line. On a terminal it is redrawn in place about
 * five times a second; otherwise (a pipe, CI logs) one line is printed per
 * second. Counts come from the store (jobStatus), retries from the process.
 */
import type { Ratchet } from "../../src/index.js";

export interface StatusSource {
  ratchet: Ratchet;
  job: string;
  total: number;
  /** Completed tasks of the job when this run started. */
  completedAtStart: number;
  retries(): number;
}

export class StatusLine {
  readonly #src: StatusSource;
  readonly #tty: boolean;
  readonly #started = performance.now();
  #timer: NodeJS.Timeout | undefined;
  #busy = false;
  #drawn = false;

  constructor(src: StatusSource, tty = process.stdout.isTTY === true) {
    this.#src = src;
    this.#tty = tty;
  }

  start(): void {
    this.#timer = setInterval(() => void this.#draw(), this.#tty ? 200 : 1000);
  }

  async #line(): Promise<string> {
    const s = this.#src;
    const j = await s.ratchet.jobStatus(s.job);
    const completed = j.byOutcome.completed ?? 0;
    const failed = Object.entries(j.byOutcome)
      .filter(([o]) => o !== "completed")
      .reduce((a, [, n]) => a + (n ?? 0), 0);
    const secs = (performance.now() - this.#started) / 1000;
    const rate = secs > 0 ? (completed - s.completedAtStart) / secs : 0;
    const width = String(s.total).length;
    return `  ${String(completed).padStart(width)}/${s.total} completed · ${s.retries()} retries · ${failed} failed · ${rate.toFixed(0)} tasks/s`;
  }

  async #draw(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      const line = await this.#line();
      if (this.#tty) process.stdout.write(`\r${line}\x1b[K`);
      else process.stdout.write(`${line}\n`);
      this.#drawn = true;
    } catch {
      // The engine may close while a draw is in flight; the next line (or the summary) says the rest.
    } finally {
      this.#busy = false;
    }
  }

  /** Draws a last line and ends it, so later output starts on a fresh line. */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    while (this.#busy) await new Promise((r) => setTimeout(r, 5));
    await this.#draw();
    if (this.#tty && this.#drawn) process.stdout.write("\n");
  }

  /** Ends the line at once (before a deliberate crash). */
  breakLine(): void {
    if (this.#timer) clearInterval(this.#timer);
    if (this.#tty && this.#drawn) process.stdout.write("\n");
  }
}
