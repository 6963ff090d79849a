/** A level-triggered wake-up: `wait(ms)` resolves at the next `notify()` or after ms. */
export class Wakeup {
  #pending = false;
  readonly #waiters: (() => void)[] = [];

  notify(): void {
    this.#pending = true;
    // Most notifications find nobody waiting (every freed slot notifies): no new array then, and the
    // loop below only ever sees arrays of waiters (an empty literal has another map in V8, and meeting
    // both deoptimized the code this is inlined into).
    if (this.#waiters.length === 0) return;
    // The waiters are taken out of the one array this object keeps, not swapped for a new array:
    // the field is then never written again, and code that inlined this method stays valid. A
    // swap made the field mutable at the first notify that found a waiter, and V8 threw away the
    // optimized code of the driver's slot release that had folded the field in (`--trace-deopt`
    // with `--trace-generalization`, a fresh worker's drain: "code dependencies").
    const ws = this.#waiters.splice(0);
    for (const w of ws) w();
  }

  /** True (and the notification consumed) when notify() was called since the last wait. */
  take(): boolean {
    const was = this.#pending;
    this.#pending = false;
    return was;
  }

  /** Resolves true when notified (now or earlier), false on timeout. */
  wait(ms: number): Promise<boolean> {
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        if (timer) clearTimeout(timer);
        this.#pending = false;
        resolve(true);
      };
      this.#waiters.push(done);
      timer = setTimeout(
        () => {
          const i = this.#waiters.indexOf(done);
          if (i >= 0) this.#waiters.splice(i, 1);
          resolve(false);
        },
        Math.max(0, Math.min(ms, 2 ** 31 - 1)),
      );
    });
  }
}
