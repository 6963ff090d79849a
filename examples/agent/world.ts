/**
 * What the agent example's tasks share with the script that runs them: a
 * timeline of what happened (in this process, in order), and fake work that
 * takes time and stops when its signal aborts. Nothing here touches the network.
 */
import type { Ratchet, TaskTree } from "../../src/index.js";

export interface Entry {
  ms: number;
  text: string;
}

export class Timeline {
  readonly entries: Entry[] = [];
  readonly #t0 = performance.now();

  note(text: string): void {
    this.entries.push({ ms: Math.round(performance.now() - this.#t0), text });
  }

  /** Index of the first entry whose text contains `part`, or -1. */
  indexOf(part: string): number {
    return this.entries.findIndex((e) => e.text.includes(part));
  }

  render(): string[] {
    return this.entries.map((e) => `  +${(e.ms / 1000).toFixed(2)}s  ${e.text}`);
  }
}

export interface AgentWorld {
  timeline: Timeline;
  /** Set once the engine is open; the agent's abort handler reads its tree through it. */
  ratchet?: Ratchet;
}

/**
 * Resolves after `ms`, or rejects with the signal's reason as soon as it aborts.
 * This is how a real tool call should treat `ctx.signal`: pass it to fetch, a
 * child process or an SDK call, and stop spending when it fires.
 */
export function work(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** One line per task, indented by depth: `#id name "spawn name" outcome [background]`. */
export function renderTree(t: TaskTree, depth = 0, out: string[] = []): string[] {
  const s = t.task;
  const state = s.status === "terminal" ? s.outcome : s.status;
  const label = s.spawnName ? ` "${s.spawnName}"` : "";
  const flag = s.background ? " [background]" : "";
  out.push(`  ${"   ".repeat(depth)}${depth ? "└ " : ""}#${s.id} ${s.name}${label} ${state}${flag}`);
  for (const c of t.children) renderTree(c, depth + 1, out);
  return out;
}
