/**
 * GET /metrics in the Prometheus text format (version 0.0.4).
 *
 * Two sources, named so a reader knows which is which:
 * - The store's counts right now (`stats()`): `ratchet_tasks` by queue and
 *   status, `ratchet_tasks_terminal` by queue and outcome. Both are gauges:
 *   prune deletes terminal tasks, so these numbers can fall, and a counter
 *   that falls would read as a reset to rate().
 * - What this server saw end (`recentlyEnded`), accumulated in memory since
 *   it started: `ratchet_task_ends_total`, `ratchet_task_retries_total` and
 *   the latency histograms. Real counters: they only grow, and restart at 0
 *   with the server (rate() handles that). Each scrape reads the last
 *   SAMPLE tasks that ended and counts those it has not counted before; if
 *   more than SAMPLE tasks ended between two scrapes, the excess is not seen
 *   and `ratchet_metrics_sample_overflows_total` grows. The first scrape
 *   counts the last SAMPLE endings from before the server started.
 *
 * - This process's worker (`ratchet.workerCounters()`), when the server runs
 *   inside one (`start({ serve })`): exact counters of its claims, reclaims
 *   and how its invocations ended. Zero in a `ratchet serve` without a worker.
 *
 * Latencies, in seconds, of the tasks that ended:
 * - start delay: started_at − run_after, from the earliest allowed start to
 *   the first claim. Includes time spent waiting on needs or flow control.
 * - run: ended_at − claimed_at, from the last claim to the end (the last
 *   attempt, and the hold of a completing owner).
 */
import type { Ratchet } from "../engine/ratchet.js";
import type { EndedTask } from "../store/store.js";
import { outboxMetrics } from "./metrics-outbox.js";

/** Endings read per scrape (one indexed read). */
export const SAMPLE = 1_000;
export const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
/** Distinct label sets kept per family: a bound on memory if queue names churn. */
const MAX_SERIES = 1_000;

class Histogram {
  readonly counts = new Array<number>(BUCKETS.length).fill(0);
  count = 0;
  sum = 0;
  observe(seconds: number): void {
    const s = Math.max(0, seconds);
    this.count++;
    this.sum += s;
    for (let i = 0; i < BUCKETS.length; i++) if (s <= BUCKETS[i]!) this.counts[i]!++;
  }
}

/** Label value escaping of the text format: backslash, double quote, newline. */
export function escapeLabel(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

export function labels(pairs: Record<string, string>): string {
  const parts = Object.entries(pairs).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
  return parts.length ? `{${parts.join(",")}}` : "";
}

function bounded<V>(m: Map<string, V>, key: string, make: () => V): V | undefined {
  let v = m.get(key);
  if (v === undefined) {
    if (m.size >= MAX_SERIES) return undefined;
    v = make();
    m.set(key, v);
  }
  return v;
}

/** The in-memory side of /metrics: endings seen by this server. Scrapes are serialised. */
export class EndingsRecorder {
  readonly ends = new Map<string, number>();
  readonly retries = new Map<string, number>();
  readonly startDelay = new Map<string, Histogram>();
  readonly run = new Map<string, Histogram>();
  overflows = 0;
  /** Keys ("id:endedAt") of the previous sample: what was counted already. */
  #previous = new Set<string>();
  #chain: Promise<unknown> = Promise.resolve();

  /** Reads the recent endings and counts the new ones. */
  refresh(ratchet: Ratchet): Promise<void> {
    const next = this.#chain.then(async () => this.#absorb(await ratchet.recentlyEnded({ limit: SAMPLE })));
    this.#chain = next.catch(() => {});
    return next;
  }

  #absorb(rows: readonly EndedTask[]): void {
    const keys = new Set(rows.map((r) => `${r.id}:${r.endedAt}`));
    const oldest = rows.at(-1);
    // The whole sample is new and full: endings older than it were never read.
    if (
      this.#previous.size > 0 &&
      oldest &&
      rows.length === SAMPLE &&
      !this.#previous.has(`${oldest.id}:${oldest.endedAt}`)
    )
      this.overflows++;
    for (const r of rows) {
      if (this.#previous.has(`${r.id}:${r.endedAt}`)) continue;
      const qo = JSON.stringify([r.queue, r.outcome]);
      const ends = bounded(this.ends, qo, () => 0);
      if (ends !== undefined) this.ends.set(qo, ends + 1);
      const q = JSON.stringify([r.queue]);
      const retries = bounded(this.retries, q, () => 0);
      if (retries !== undefined) this.retries.set(q, retries + Math.max(0, r.attempts - 1));
      if (r.startedAt !== null)
        bounded(this.startDelay, q, () => new Histogram())?.observe((r.startedAt - r.runAfter) / 1000);
      if (r.claimedAt !== null)
        bounded(this.run, qo, () => new Histogram())?.observe((r.endedAt - r.claimedAt) / 1000);
    }
    this.#previous = keys;
  }
}

export function family(out: string[], name: string, type: string, help: string): void {
  out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
}

function histogramLines(out: string[], name: string, h: Histogram, l: Record<string, string>): void {
  BUCKETS.forEach((b, i) => {
    out.push(`${name}_bucket${labels({ ...l, le: String(b) })} ${h.counts[i]}`);
  });
  out.push(`${name}_bucket${labels({ ...l, le: "+Inf" })} ${h.count}`);
  out.push(`${name}_sum${labels(l)} ${h.sum}`);
  out.push(`${name}_count${labels(l)} ${h.count}`);
}

const qLabels = (key: string): Record<string, string> => {
  const [queue, outcome] = JSON.parse(key) as [string, string?];
  return outcome === undefined ? { queue } : { queue, outcome };
};

/** The whole exposition: one stats read, one recentlyEnded read. */
export async function renderMetrics(ratchet: Ratchet, rec: EndingsRecorder): Promise<string> {
  const [stats] = await Promise.all([ratchet.stats(), rec.refresh(ratchet)]);
  const out: string[] = [];
  family(out, "ratchet_tasks", "gauge", "Tasks in the store by queue and status.");
  for (const q of stats)
    for (const [status, n] of Object.entries(q.byStatus))
      out.push(`ratchet_tasks${labels({ queue: q.queue, status })} ${n ?? 0}`);
  family(
    out,
    "ratchet_tasks_terminal",
    "gauge",
    "Terminal tasks in the store by queue and outcome (prune removes them, so this can fall).",
  );
  for (const q of stats)
    for (const [outcome, n] of Object.entries(q.byOutcome))
      out.push(`ratchet_tasks_terminal${labels({ queue: q.queue, outcome })} ${n ?? 0}`);
  family(out, "ratchet_task_ends_total", "counter", "Tasks this server saw end, by queue and outcome.");
  for (const [k, n] of rec.ends) out.push(`ratchet_task_ends_total${labels(qLabels(k))} ${n}`);
  family(
    out,
    "ratchet_task_retries_total",
    "counter",
    "Attempts beyond the first of the tasks this server saw end.",
  );
  for (const [k, n] of rec.retries) out.push(`ratchet_task_retries_total${labels(qLabels(k))} ${n}`);
  family(
    out,
    "ratchet_task_start_delay_seconds",
    "histogram",
    "From a task's earliest allowed start to its first claim (includes waiting on needs and flow control).",
  );
  for (const [k, h] of rec.startDelay) histogramLines(out, "ratchet_task_start_delay_seconds", h, qLabels(k));
  family(out, "ratchet_task_run_seconds", "histogram", "From a task's last claim to its end.");
  for (const [k, h] of rec.run) histogramLines(out, "ratchet_task_run_seconds", h, qLabels(k));
  family(
    out,
    "ratchet_metrics_sample_overflows_total",
    "counter",
    `Scrapes after which more than ${SAMPLE} tasks had ended: the excess was not counted.`,
  );
  out.push(`ratchet_metrics_sample_overflows_total ${rec.overflows}`);
  // The worker in this process, if any (start({ serve })): exact counts of its own claims and ends.
  const w = ratchet.workerCounters();
  family(out, "ratchet_worker_claims_total", "counter", "Tasks this process's worker claimed.");
  out.push(`ratchet_worker_claims_total ${w.claims}`);
  family(
    out,
    "ratchet_worker_reclaims_total",
    "counter",
    "Claims of this process that took over an expired lease.",
  );
  out.push(`ratchet_worker_reclaims_total ${w.reclaims}`);
  family(
    out,
    "ratchet_worker_invocations_total",
    "counter",
    "How this process's invocations ended: done, failed, retried, aborted, suspended, lost, released.",
  );
  for (const [report, n] of Object.entries(w.reports))
    out.push(`ratchet_worker_invocations_total${labels({ report })} ${n ?? 0}`);
  // Circuit breakers per provider+model, shared by every worker (spec §18.6, §18.9).
  family(out, "ratchet_breaker_state", "gauge", "Each model breaker's state: 0 closed, 1 half-open, 2 open.");
  for (const b of await ratchet.store.breakers.listBreakers())
    out.push(`ratchet_breaker_state${labels({ key: b.key })} ${BREAKER_LEVEL[b.state]}`);
  await outboxMetrics(out, ratchet); // spec §21.12
  return `${out.join("\n")}\n`;
}

const BREAKER_LEVEL = { closed: 0, half_open: 1, open: 2 } as const;
