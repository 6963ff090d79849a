/**
 * A task's history: one time-ordered list built from the record (created,
 * first and latest claim, end), its committed steps and its events, like
 * `ratchet show` (src/cli/timeline.ts). Then the steps on their own, with
 * durations, and the retries with the backoff each one waited.
 *
 * A step's duration is the time from the latest known instant before it (a
 * claim or the commit of the step before) to its commit: the store keeps
 * commit times only, so this is what the run spent getting to that step,
 * including code between steps.
 */
import { duration, pretty, short, stepName, time } from "../format.js";
import type { TaskDetails, TaskEvent } from "../types.js";

interface ErrorLike {
  name?: string;
  message?: string;
  code?: string;
  stack?: string;
}

interface Entry {
  at: number;
  rank: number;
  kind: string;
  text: string;
  error?: ErrorLike;
}

function errorText(e: unknown): string {
  if (!e || typeof e !== "object") return short(e, 200);
  const err = e as ErrorLike;
  return `${err.name ?? "Error"}${err.code ? ` [${err.code}]` : ""}: ${err.message ?? ""}`;
}

type Detail = { error?: ErrorLike; retryAt?: number; previous?: string; reason?: string; outcome?: string };

function eventEntry(ev: TaskEvent): Entry {
  const d = (ev.detail ?? {}) as Detail;
  const n = ev.attempt ?? "?";
  const base = { at: ev.at, rank: 3, kind: ev.kind, ...(d.error ? { error: d.error } : {}) };
  switch (ev.kind) {
    case "attempt_failed":
      return {
        ...base,
        text: `attempt ${n} failed: ${errorText(d.error)} — retry in ${duration((d.retryAt ?? ev.at) - ev.at)}`,
      };
    case "rate_limited":
      return {
        ...base,
        text: `rate limited (attempt given back), runs again in ${duration((d.retryAt ?? ev.at) - ev.at)}`,
      };
    case "reclaimed":
      return { ...base, text: `attempt ${n} claimed (took over an expired lease)` };
    case "released":
      return { ...base, text: `attempt ${n} released at shutdown (not counted as a failure)` };
    case "retried":
      return { ...base, text: `retried by an operator${d.previous ? ` (was ${d.previous})` : ""}` };
    case "held":
      return { ...base, text: `outcome ${d.outcome ?? "?"} decided; held until its owned work ends` };
    case "blocked":
      return { ...base, text: `blocked: ${d.reason ?? "?"}` };
    case "failed":
    case "faulted":
      return { ...base, text: `attempt ${n} ${ev.kind}: ${errorText(d.error)}` };
    default:
      return { ...base, text: ev.kind.replace("_", " ") + (ev.attempt ? ` (attempt ${n})` : "") };
  }
}

function isSleep(result: unknown): result is { until: number } {
  return (
    result !== null &&
    typeof result === "object" &&
    typeof (result as { until?: unknown }).until === "number" &&
    Object.keys(result).length === 1
  );
}

export function entries(d: TaskDetails): Entry[] {
  const t = d.task;
  const out: Entry[] = [{ at: t.createdAt, rank: 0, kind: "created", text: `created in queue ${t.queue}` }];
  if (t.startedAt !== null)
    out.push({ at: t.startedAt, rank: 1, kind: "claimed", text: "attempt 1 claimed" });
  if (t.claimedAt !== null && t.attempts > 1 && t.claimedAt !== t.startedAt)
    out.push({ at: t.claimedAt, rank: 1, kind: "claimed", text: `attempt ${t.attempts} claimed` });
  for (const s of d.steps)
    out.push({
      at: s.createdAt,
      rank: 2,
      kind: "step",
      text: isSleep(s.result)
        ? `sleep "${stepName(s.name)}" until ${time(s.result.until)}`
        : `step "${stepName(s.name)}" committed (attempt ${s.attempt})`,
    });
  for (const ev of d.events) {
    if ((ev.kind === "failed" || ev.kind === "faulted" || ev.kind === "aborted") && t.endedAt === ev.at)
      continue;
    out.push(eventEntry(ev));
  }
  if (t.status === "terminal" && t.endedAt !== null)
    out.push({
      at: t.endedAt,
      rank: 4,
      kind: t.outcome ?? "ended",
      text: t.outcome === "completed" ? "completed" : `${t.outcome}: ${errorText(t.error)}`,
      ...(t.error && t.outcome !== "completed" ? { error: t.error } : {}),
    });
  return out.sort((a, b) => a.at - b.at || a.rank - b.rank);
}

export function Stack({ error }: { error: ErrorLike }) {
  if (!error.stack) return null;
  return (
    <details class="stack">
      <summary>stack</summary>
      <pre>{error.stack}</pre>
    </details>
  );
}

export function Timeline({ details }: { details: TaskDetails }) {
  const list = entries(details);
  const t0 = details.task.createdAt;
  return (
    <ol class="timeline" data-section="timeline">
      {list.map((e, i) => (
        <li key={i} class={`entry kind-${e.kind}`} data-kind={e.kind}>
          <span class="when" title={time(e.at)}>
            +{duration(e.at - t0)}
          </span>
          <span class="what">{e.text}</span>
          {e.error && <Stack error={e.error} />}
        </li>
      ))}
    </ol>
  );
}

export function Steps({ details }: { details: TaskDetails }) {
  const t = details.task;
  if (details.steps.length === 0) return <p class="muted">No committed steps.</p>;
  const steps = [...details.steps].sort((a, b) => a.createdAt - b.createdAt);
  // Known claim instants: the first, the latest, and takeovers of an expired lease.
  const claims = [
    t.startedAt,
    t.claimedAt,
    ...details.events.filter((e) => e.kind === "reclaimed").map((e) => e.at),
  ].filter((at): at is number => at !== null);
  return (
    <table class="steps" data-section="steps">
      <thead>
        <tr>
          <th>step</th>
          <th>attempt</th>
          <th>committed</th>
          <th>took</th>
          <th>result</th>
        </tr>
      </thead>
      <tbody>
        {steps.map((s, i) => {
          const before = [...claims, ...steps.slice(0, i).map((p) => p.createdAt)].filter(
            (at) => at <= s.createdAt,
          );
          const from = before.length ? Math.max(...before) : null;
          return (
            <tr key={s.name} data-step={s.name}>
              <td>{stepName(s.name)}</td>
              <td class="num">{s.attempt}</td>
              <td class="muted">{time(s.createdAt)}</td>
              <td class="num">{from === null ? "—" : duration(s.createdAt - from)}</td>
              <td>
                <details>
                  <summary>{short(s.result, 60)}</summary>
                  <pre>{pretty(s.result)}</pre>
                </details>
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

export function Retries({ details }: { details: TaskDetails }) {
  const failed = details.events.filter((e) => e.kind === "attempt_failed" || e.kind === "rate_limited");
  if (failed.length === 0) return <p class="muted">No retries.</p>;
  return (
    <table class="retries" data-section="retries">
      <thead>
        <tr>
          <th>attempt</th>
          <th>failed at</th>
          <th>error</th>
          <th>backoff</th>
          <th>retry at</th>
        </tr>
      </thead>
      <tbody>
        {failed.map((e, i) => {
          const d = (e.detail ?? {}) as Detail;
          return (
            <tr key={i}>
              <td class="num">{e.attempt ?? "?"}</td>
              <td class="muted">{time(e.at)}</td>
              <td>
                {errorText(d.error)}
                {d.error && <Stack error={d.error} />}
              </td>
              <td class="num">{d.retryAt === undefined ? "—" : duration(d.retryAt - e.at)}</td>
              <td class="muted">{time(d.retryAt)}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
