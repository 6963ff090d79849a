/**
 * One connection to /api/stream for the whole app, read with fetch and a
 * stream reader: EventSource cannot send the Authorization header, and the
 * token never goes into a URL.
 *
 * Modes:
 * - connecting: a fetch is open or about to be; entered at start, after a
 *   change of the watch set (the old request is aborted) and after a failure
 *   (with a delay doubling from 1 s to 15 s).
 * - open: events arrive; `stats` events feed the history, `task` events go
 *   to every listener. The delay resets on the first event.
 * - stopped: a 401 (the app asks for the token, then calls restart()).
 *
 * The watch set is the union of what the mounted views ask for (at most 100
 * ids, the server's bound), so one stream serves the list and the detail.
 */
import { useEffect, useState } from "preact/hooks";
import { authHeaders, reportUnauthorized } from "./api.js";
import type { StatsEvent, TaskView } from "./types.js";

export const MAX_WATCH = 100;
/** Stats samples kept for the chart: 10 minutes at the server's 1 s interval. */
export const MAX_HISTORY = 600;

type Listener<T> = (value: T) => void;

class LiveStream {
  #watch = new Map<symbol, readonly number[]>();
  #key = "";
  #ctl: AbortController | null = null;
  #delay = 1_000;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = true;
  readonly history: StatsEvent[] = [];
  latest: StatsEvent | null = null;
  connected = false;
  readonly #onStats = new Set<Listener<StatsEvent>>();
  readonly #onTask = new Set<Listener<TaskView>>();
  readonly #onState = new Set<Listener<boolean>>();

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#connect();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#ctl?.abort();
    this.#ctl = null;
    this.#setConnected(false);
  }

  /** Registers (or, with ids = null, removes) one view's watched ids; reconnects if the union changed. */
  watch(owner: symbol, ids: readonly number[] | null): void {
    if (ids === null) this.#watch.delete(owner);
    else this.#watch.set(owner, ids);
    const union = [...new Set([...this.#watch.values()].flat())].sort((a, b) => a - b).slice(0, MAX_WATCH);
    const key = union.join(",");
    if (key === this.#key) return;
    this.#key = key;
    if (!this.#stopped) this.#connect();
  }

  on(kind: "stats", fn: Listener<StatsEvent>): () => void;
  on(kind: "task", fn: Listener<TaskView>): () => void;
  on(kind: "state", fn: Listener<boolean>): () => void;
  on(kind: "stats" | "task" | "state", fn: Listener<never>): () => void {
    const set = (kind === "stats" ? this.#onStats : kind === "task" ? this.#onTask : this.#onState) as Set<
      Listener<never>
    >;
    set.add(fn);
    return () => set.delete(fn);
  }

  #setConnected(v: boolean): void {
    if (this.connected === v) return;
    this.connected = v;
    for (const fn of [...this.#onState]) fn(v);
  }

  #connect(): void {
    clearTimeout(this.#timer);
    this.#ctl?.abort();
    const ctl = new AbortController();
    this.#ctl = ctl;
    void this.#read(ctl).then(
      () => this.#retry(ctl),
      () => this.#retry(ctl),
    );
  }

  #retry(ctl: AbortController): void {
    if (this.#ctl !== ctl || this.#stopped) return;
    this.#setConnected(false);
    this.#timer = setTimeout(() => this.#connect(), this.#delay);
    this.#delay = Math.min(this.#delay * 2, 15_000);
  }

  async #read(ctl: AbortController): Promise<void> {
    const url = `/api/stream${this.#key ? `?watch=${this.#key}` : ""}`;
    const res = await fetch(url, { headers: authHeaders(), signal: ctl.signal });
    if (res.status === 401) {
      this.stop();
      reportUnauthorized();
      return;
    }
    if (!res.ok || !res.body) return;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done || ctl.signal.aborted) return;
      buffer += decoder.decode(value, { stream: true });
      for (let i = buffer.indexOf("\n\n"); i !== -1; i = buffer.indexOf("\n\n")) {
        this.#dispatch(buffer.slice(0, i));
        buffer = buffer.slice(i + 2);
      }
      // A server that never ends a block must not grow this without bound.
      if (buffer.length > 4 * 1024 * 1024) return;
    }
  }

  #dispatch(block: string): void {
    let event = "message";
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) event = line.slice(7);
      else if (line.startsWith("data: ")) data.push(line.slice(6));
    }
    let value: unknown;
    try {
      value = JSON.parse(data.join("\n"));
    } catch {
      return;
    }
    this.#delay = 1_000;
    this.#setConnected(true);
    if (event === "stats") {
      const s = value as StatsEvent;
      this.latest = s;
      this.history.push(s);
      if (this.history.length > MAX_HISTORY) this.history.splice(0, this.history.length - MAX_HISTORY);
      for (const fn of [...this.#onStats]) fn(s);
    } else if (event === "task") {
      for (const fn of [...this.#onTask]) fn(value as TaskView);
    }
  }
}

export const live = new LiveStream();

/** The latest stats event (null until the first), re-rendering on each. */
export function useStats(): StatsEvent | null {
  const [s, set] = useState(live.latest);
  useEffect(() => live.on("stats", set), []);
  return s;
}

/** Whether the stream is delivering events. */
export function useConnected(): boolean {
  const [c, set] = useState(live.connected);
  useEffect(() => live.on("state", set), []);
  return c;
}

/** Watches `ids` while the calling view is mounted; `onTask` sees every task event. */
export function useWatch(ids: readonly number[], onTask: (t: TaskView) => void): void {
  const key = ids.join(",");
  useEffect(() => {
    const owner = Symbol("view");
    live.watch(owner, key ? key.split(",").map(Number) : []);
    return () => live.watch(owner, null);
  }, [key]);
  useEffect(() => live.on("task", onTask), [onTask]);
}
