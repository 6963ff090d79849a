/**
 * Throughput and failures over time, from the stream's `stats` events (one a
 * second): the change of the completed and failed counters between two
 * samples, per second. A counter that falls (a prune, a retry) counts as
 * zero, not as negative work. The history starts when the page opened.
 */
import { live, useStats } from "../live.js";
import type { QueueStats, StatsEvent } from "../types.js";

const W = 640;
const H = 160;
const PAD = { left: 36, right: 8, top: 10, bottom: 20 };
const FAILED = ["failed", "faulted", "upstream_failed", "orphaned"] as const;

function totals(queues: readonly QueueStats[], only?: string): { done: number; failed: number } {
  let done = 0;
  let failed = 0;
  for (const q of queues) {
    if (only !== undefined && q.queue !== only) continue;
    done += q.byOutcome.completed ?? 0;
    for (const k of FAILED) failed += q.byOutcome[k] ?? 0;
  }
  return { done, failed };
}

export interface Rate {
  at: number;
  done: number;
  failed: number;
}

/** Per-second rates between consecutive samples. */
export function rates(history: readonly StatsEvent[], queue?: string): Rate[] {
  const out: Rate[] = [];
  for (let i = 1; i < history.length; i++) {
    const a = history[i - 1]!;
    const b = history[i]!;
    const secs = Math.max((b.at - a.at) / 1_000, 0.001);
    const ta = totals(a.queues, queue);
    const tb = totals(b.queues, queue);
    out.push({
      at: b.at,
      done: Math.max(0, tb.done - ta.done) / secs,
      failed: Math.max(0, tb.failed - ta.failed) / secs,
    });
  }
  return out;
}

function path(
  points: readonly Rate[],
  key: "done" | "failed",
  x: (at: number) => number,
  y: (v: number) => number,
) {
  return points
    .map((p, i) => `${i === 0 ? "M" : "L"}${x(p.at).toFixed(1)},${y(p[key]).toFixed(1)}`)
    .join(" ");
}

export function ThroughputChart() {
  useStats(); // re-render on each sample
  const points = rates(live.history);
  if (points.length < 2)
    return (
      <p class="muted" data-chart="empty">
        Collecting samples… (one a second while this page is open)
      </p>
    );
  const t0 = points[0]!.at;
  const t1 = points.at(-1)!.at;
  const max = Math.max(1, ...points.map((p) => Math.max(p.done, p.failed)));
  const x = (at: number) => PAD.left + ((at - t0) / Math.max(t1 - t0, 1)) * (W - PAD.left - PAD.right);
  const y = (v: number) => H - PAD.bottom - (v / max) * (H - PAD.top - PAD.bottom);
  const last = points.at(-1)!;
  return (
    <figure class="chart" data-chart="rates">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label="Tasks completed and failed per second">
        <title>Tasks completed and failed per second</title>
        <line class="axis" x1={PAD.left} y1={y(0)} x2={W - PAD.right} y2={y(0)} />
        <line class="grid" x1={PAD.left} y1={y(max)} x2={W - PAD.right} y2={y(max)} />
        <text class="tick" x={PAD.left - 4} y={y(max) + 4} text-anchor="end">
          {max < 10 ? max.toFixed(1) : Math.round(max)}
        </text>
        <text class="tick" x={PAD.left - 4} y={y(0) + 4} text-anchor="end">
          0
        </text>
        <text class="tick" x={PAD.left} y={H - 4}>
          −{Math.round((t1 - t0) / 1_000)} s
        </text>
        <text class="tick" x={W - PAD.right} y={H - 4} text-anchor="end">
          now
        </text>
        <path class="line done" d={path(points, "done", x, y)} />
        <path class="line failed" d={path(points, "failed", x, y)} />
      </svg>
      <figcaption>
        <span class="key done">completed/s {last.done.toFixed(1)}</span>{" "}
        <span class="key failed">failed/s {last.failed.toFixed(1)}</span>
      </figcaption>
    </figure>
  );
}
