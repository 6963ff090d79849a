/**
 * `ratchet show ID`: a task's history as one time-ordered list, built from
 * the record (created, first and latest claim, end), its committed steps and
 * its events (failed attempts with their retry time, reclaims, aborts).
 *
 * The store keeps the first and the latest claim time only; claims between
 * them appear through their events (a failed attempt, a reclaim).
 */
import type { TaskDetails } from "../engine/ratchet.js";
import type { TaskEvent } from "../store/store.js";
import { iso, pairs, short, stateOf } from "./format.js";

interface Entry {
  at: number;
  /** Tie-break for equal times: claims before steps before events before the end. */
  rank: number;
  text: string;
}

interface ErrorLike {
  name?: string;
  message?: string;
  code?: string;
}

function describeError(e: unknown): string {
  if (!e || typeof e !== "object") return short(e, 200);
  const err = e as ErrorLike;
  const code = err.code ? ` [${err.code}]` : "";
  return `${err.name ?? "Error"}${code}: ${err.message ?? ""}`;
}

function eventText(ev: TaskEvent): string {
  const detail = (ev.detail ?? {}) as {
    error?: unknown;
    retryAt?: number;
    previous?: string;
    cascade?: boolean;
    failFast?: boolean;
    scope?: string;
    outcome?: string;
    reason?: string;
    version?: number;
  };
  const n = ev.attempt ?? "?";
  switch (ev.kind) {
    case "attempt_failed":
      return `attempt ${n} failed: ${describeError(detail.error)}\n  retry at ${iso(detail.retryAt)}`;
    case "reclaimed":
      return `attempt ${n} claimed (took over an expired lease)`;
    case "released":
      return `attempt ${n} released at shutdown (not counted as a failure)`;
    case "retried":
      return `retried by an operator${detail.previous ? ` (was ${detail.previous})` : ""}`;
    case "abort_requested": {
      const why = detail.cascade
        ? " (cascade from its owner)"
        : detail.failFast
          ? " (failFast: a sibling failed)"
          : detail.scope
            ? ` (scope ${detail.scope} aborted)`
            : "";
      return `abort requested${why}${ev.attempt ? ` after ${n} attempt${ev.attempt === 1 ? "" : "s"}` : ", before it ran"}`;
    }
    case "held":
      return `outcome ${detail.outcome ?? "?"} decided; held (completing) until its owned work ends`;
    case "orphaned":
      return `orphaned: ${describeError(detail.error)}`;
    case "blocked":
      return `blocked: ${detail.reason ?? "?"}${detail.error ? ` (${describeError(detail.error)})` : ""}`;
    case "rate_limited":
      return `rate limited (attempt given back): ${describeError(detail.error)}\n  runs again at ${iso(detail.retryAt)}`;
    case "migrated":
      return `migrated to version ${detail.version ?? "?"}`;
    case "aborted":
      return "aborted";
    case "failed":
    case "faulted":
      return `attempt ${n} ${ev.kind}: ${describeError(detail.error)}`;
    case "lease_lost":
      return `attempt ${n} lost its lease`;
    default:
      return `${String(ev.kind)} ${short(ev.detail)}`;
  }
}

export function timeline(d: TaskDetails): Entry[] {
  const t = d.task;
  const out: Entry[] = [];
  const extra = [t.job ? `job ${t.job}` : "", t.dedupe ? `dedupe ${t.dedupe}` : ""].filter(Boolean);
  out.push({
    at: t.createdAt,
    rank: 0,
    text: `created${extra.length ? ` (${extra.join(", ")})` : ""}${t.runAfter > t.createdAt ? `, runs after ${iso(t.runAfter)}` : ""}`,
  });
  if (t.startedAt !== null) out.push({ at: t.startedAt, rank: 1, text: "attempt 1 claimed" });
  const reclaimAt = new Set(d.events.filter((e) => e.kind === "reclaimed").map((e) => e.at));
  if (t.claimedAt !== null && t.attempts > 1 && t.claimedAt !== t.startedAt && !reclaimAt.has(t.claimedAt)) {
    out.push({ at: t.claimedAt, rank: 1, text: `attempt ${t.attempts} claimed` });
  }
  for (const s of d.steps) {
    const r = s.result as { until?: unknown } | null;
    const isSleep =
      r !== null && typeof r === "object" && typeof r.until === "number" && Object.keys(r).length === 1;
    out.push({
      at: s.createdAt,
      rank: 2,
      text: isSleep
        ? `sleep "${s.name}" until ${iso(r.until as number)}`
        : `step "${s.name}" committed (attempt ${s.attempt}): ${short(s.result)}`,
    });
  }
  for (const ev of d.events) {
    // The final failure is shown by the end entry, with the same error.
    if ((ev.kind === "failed" || ev.kind === "faulted" || ev.kind === "aborted") && t.endedAt === ev.at)
      continue;
    out.push({ at: ev.at, rank: 3, text: eventText(ev) });
  }
  if (t.status === "terminal" && t.endedAt !== null) {
    const what =
      t.outcome === "completed"
        ? `completed: ${short(t.result, 100)}`
        : `${t.outcome}: ${describeError(t.error)}`;
    out.push({ at: t.endedAt, rank: 4, text: what });
  }
  return out.sort((a, b) => a.at - b.at || a.rank - b.rank);
}

/** "3, 5–9, 12": sorted ids with consecutive runs folded. */
export function idRanges(ids: readonly number[]): string {
  const sorted = [...ids].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    parts.push(j > i + 1 ? `${sorted[i]}–${sorted[j]}` : sorted.slice(i, j + 1).join(", "));
    i = j + 1;
  }
  return `${parts.join(", ")}${sorted.length > 1 ? ` (${sorted.length} tasks)` : ""}`;
}

/** The whole `show` text: a header, then the timeline. */
export function renderDetails(d: TaskDetails): string {
  const t = d.task;
  const header: [string, string][] = [
    ["task", `${t.id} ${t.name} (version ${t.version})`],
    ["state", stateOf(t) + (t.abortRequested && t.status !== "terminal" ? " (abort requested)" : "")],
    ["queue", `${t.queue}, priority ${t.priority}, maxMs ${t.maxMs}`],
    ["attempts", String(t.attempts)],
    ["input", short(t.input, 100)],
  ];
  if (t.job) header.push(["job", t.job]);
  if (d.needs.length) header.push(["needs", idRanges(d.needs)]);
  if (t.progress !== null) {
    header.push([
      "progress",
      `${Math.round(t.progress * 100)}%${t.progressNote ? ` ${t.progressNote}` : ""}`,
    ]);
  }
  if (t.status === "waiting" && t.wakeAt !== null) header.push(["wakes at", iso(t.wakeAt)]);
  if (t.status === "waiting" && t.needsPending > 0)
    header.push(["waits for", `${t.needsPending} predecessor(s)`]);
  if (t.status === "running") header.push(["lease", `${t.lockedBy ?? "?"} until ${iso(t.leaseUntil)}`]);
  if (t.status === "terminal") {
    header.push(
      t.outcome === "completed" ? ["result", short(t.result, 100)] : ["error", describeError(t.error)],
    );
  }
  // Continuation lines of an entry line up under its text.
  const indent = " ".repeat(2 + 24 + 2);
  const lines = timeline(d).map((e) => `  ${iso(e.at)}  ${e.text.split("\n").join(`\n${indent}`)}`);
  return `${pairs(header)}\n\ntimeline\n${lines.join("\n")}`;
}
