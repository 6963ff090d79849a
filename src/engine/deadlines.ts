/**
 * Invocation deadlines (spec §4.1) on one Node timer per distinct duration instead of one per
 * invocation.
 *
 * Every claimed task used to get its own setTimeout(maxMs) and clearTimeout when it ended: a
 * Timeout object, its async id and a timer-list insert and removal per task, ~2 µs of a no-op
 * task's ~20 in a SQLite drain (20,000 tasks in one process, 3 runs each: 45.7–49.5k tasks/s with
 * the timers, 46.2–54.8k with them stubbed out). Invocations of one definition share one maxMs, so
 * their deadlines, armed in time order, are already sorted: a lane per duration is a FIFO whose
 * head is the next to expire, and one timer per lane waits for that head.
 *
 * Ending an invocation only clears its entry (O(1)); cleared entries leave the lane from the head
 * as the timer passes them, or all at once when the lane has no live entry, or when cleared ones
 * outnumber live ones twice over (a long task at the head would otherwise hold back every entry
 * behind it), so a lane holds O(live) entries.
 *
 * Lanes are never removed: their number is bounded by the distinct maxMs values in use, and a Map
 * that gained and lost an entry per task would be rehashed over and over (see Running in driver.ts
 * for what that costs).
 */
export class Deadline {
  constructor(
    readonly at: number,
    /** null once fired or cancelled. */
    public fire: ((ctx: unknown) => void) | null,
    /** What `fire` is called with: one function serves every invocation, without a closure each. */
    readonly ctx: unknown,
    readonly lane: Lane,
  ) {}

  /** Forgets the deadline; a no-op once fired or cancelled. */
  cancel(): void {
    if (this.fire === null) return;
    this.fire = null;
    const lane = this.lane;
    lane.live--;
    if (lane.live === 0) {
      lane.entries.length = 0;
      lane.head = 0;
    } else if (lane.entries.length - lane.head > 2 * lane.live + 64) {
      lane.entries = lane.entries.slice(lane.head).filter((d) => d.fire !== null);
      lane.head = 0;
    }
  }
}

interface Lane {
  readonly ms: number;
  entries: Deadline[];
  head: number;
  live: number;
  /** The lane's timer, set for its head (or for an entry cancelled since: it then moves on). */
  timer: NodeJS.Timeout | undefined;
}

export class Deadlines {
  readonly #lanes = new Map<number, Lane>();
  readonly #now: () => number;

  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
  }

  /** Calls `fire(ctx)` once, `ms` from now, unless the returned deadline is cancelled first. */
  arm<C>(ms: number, fire: (ctx: C) => void, ctx?: C): Deadline {
    let lane = this.#lanes.get(ms);
    if (!lane) {
      lane = { ms, entries: [], head: 0, live: 0, timer: undefined };
      this.#lanes.set(ms, lane);
    }
    const d = new Deadline(this.#now() + ms, fire as (ctx: unknown) => void, ctx, lane);
    lane.entries.push(d);
    lane.live++;
    if (!lane.timer) this.#schedule(lane);
    return d;
  }

  /** Entries held (live and cleared) over all lanes: bounded by a small multiple of the live ones. */
  get held(): number {
    let n = 0;
    for (const lane of this.#lanes.values()) n += lane.entries.length - lane.head;
    return n;
  }

  #schedule(lane: Lane): void {
    while (lane.head < lane.entries.length && lane.entries[lane.head]!.fire === null) lane.head++;
    if (lane.head === lane.entries.length) {
      lane.entries.length = 0;
      lane.head = 0;
      return;
    }
    const wait = Math.max(1, Math.ceil(lane.entries[lane.head]!.at - this.#now()));
    lane.timer = setTimeout(() => this.#due(lane), wait);
    lane.timer.unref?.();
  }

  #due(lane: Lane): void {
    lane.timer = undefined;
    const now = this.#now();
    try {
      // By index, not a snapshot: a fired callback may arm new deadlines on this lane (later ones).
      while (lane.head < lane.entries.length) {
        const d = lane.entries[lane.head]!;
        if (d.fire !== null && d.at > now) break;
        lane.head++;
        const fire = d.fire;
        if (fire === null) continue;
        d.fire = null;
        lane.live--;
        fire(d.ctx);
      }
    } finally {
      // A callback that throws still leaves the rest of the lane with a timer (its error goes on
      // to the process, as a throwing setTimeout callback's did).
      if (!lane.timer) this.#schedule(lane);
    }
  }
}
