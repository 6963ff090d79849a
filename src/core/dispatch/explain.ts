/**
 * Why an attempt is where it is (spec §20.28): one typed reason and a
 * sentence, from the attempt's row, its last reading's rule and `now`, with
 * the instant of the next timeout that would move it. Pure: no reading is
 * taken, nothing is written.
 */
import { type AttemptView, type Instant, stretchStart } from "./model.js";
import type { Pipeline } from "./pipeline.js";
import { DEFAULT_STEP_TIMEOUT_MINUTES, type DispatchTimeouts, thresholdMs, toMs } from "./timeouts.js";

export type AttemptReason =
  | {
      kind: "ended";
      state: "succeeded" | "failed";
      forced: string | null;
      at: Instant | null;
      stray: boolean;
    }
  | { kind: "spawning"; spawnLostAt: Instant }
  | { kind: "running"; since: Instant; timeoutAt: Instant | null }
  | { kind: "sleeping"; wakeRequestedAt: Instant | null; overCapAt: Instant | null }
  | { kind: "waking"; resumeLostAt: Instant }
  | { kind: "closing"; cause: string; stopAt: Instant; giveUpAt: Instant };

export interface Explanation {
  readonly reason: AttemptReason;
  readonly sentence: string;
}

const at = (t: Instant) => new Date(t).toISOString();

export interface ExplainInput {
  readonly attempt: AttemptView & {
    readonly forced?: string | null;
    readonly sessionStopped?: boolean | null;
  };
  readonly stepTimeoutMinutes: number | null;
  readonly timeouts: DispatchTimeouts;
}

/**
 * The step timeout `explainAttempt` names for an attempt (spec §20.28), from
 * the checked pipelines of a configuration: the step's own, null when its
 * pipeline no longer has the step (the bound does not apply, spec §20.5),
 * and the default when no configuration names its pipeline. One rule for the
 * CLI (`ratchet dispatch why`) and HTTP (`GET /api/dispatch/attempts/{id}/why`).
 */
export function stepTimeoutOf(
  pipelines: ReadonlyMap<string, Pipeline>,
  attempt: { readonly pipeline: string; readonly phase: string },
): number | null {
  const p = pipelines.get(attempt.pipeline);
  if (!p) return DEFAULT_STEP_TIMEOUT_MINUTES;
  return p.steps.get(attempt.phase)?.timeoutMinutes ?? null;
}

/** Why an open item starts no attempt although it waits (spec §20.30). */
export type ItemStuck =
  | { readonly kind: "unknown_pipeline"; readonly pipeline: string; readonly sentence: string }
  | {
      readonly kind: "unknown_step";
      readonly pipeline: string;
      readonly step: string;
      readonly steps: readonly string[];
      readonly sentence: string;
    };

/**
 * Whether an item is stuck at a step its pipeline no longer has (spec §20.30),
 * judged against the configured pipelines: the runner skips such an item, so
 * only an operator can move it on (`ratchet item move`) or close it.
 * Invariant: null for every item that is not open, and for an open item at a
 * step of a configured pipeline.
 */
export function explainItemStuck(
  item: { readonly id: string; readonly pipeline: string; readonly step: string; readonly state: string },
  pipelines: ReadonlyMap<string, Pipeline>,
): ItemStuck | null {
  if (item.state !== "open") return null;
  const p = pipelines.get(item.pipeline);
  if (!p) {
    return {
      kind: "unknown_pipeline",
      pipeline: item.pipeline,
      sentence: `stuck: no runner pipeline "${item.pipeline}" is configured; ratchet item close ${item.id}`,
    };
  }
  if (p.steps.has(item.step)) return null;
  const steps = [...p.steps.keys()];
  return {
    kind: "unknown_step",
    pipeline: p.name,
    step: item.step,
    steps,
    sentence: `stuck: pipeline "${p.name}" has no step "${item.step}" (its steps: ${steps.join(", ")}); ratchet item move ${item.id} STEP, or ratchet item close ${item.id}`,
  };
}

/**
 * The explanation of an attempt's state. spec §20.28.
 * Invariant: total over attempt states; every instant it names is the
 * threshold the reconcile table would use (spec §20.8).
 */
export function explainAttempt(i: ExplainInput): Explanation {
  const a = i.attempt;
  const t = i.timeouts;
  switch (a.state) {
    case "succeeded":
    case "failed": {
      const stray = a.sessionStopped === false;
      const reason = {
        kind: "ended" as const,
        state: a.state,
        forced: a.forced ?? null,
        at: a.endedAt,
        stray,
      };
      const why = a.forced ? ` (${a.forced})` : "";
      const tail = stray
        ? "; its session was not confirmed stopped, so each pass looks for it and stops it"
        : "";
      return {
        reason,
        sentence: `${a.state}${why}${a.endedAt === null ? "" : ` at ${at(a.endedAt)}`}${tail}`,
      };
    }
    case "starting":
    case "reconciling": {
      const spawnLostAt = a.claimedAt + thresholdMs(t, "spawnLostMinutes");
      if (a.session !== null) {
        return {
          reason: { kind: "spawning", spawnLostAt },
          sentence: `${a.state}: its session ${a.session} is bound; the next reading moves it to running`,
        };
      }
      return {
        reason: { kind: "spawning", spawnLostAt },
        sentence: `${a.state}: no session seen yet; it is respawned until ${at(spawnLostAt)}, then fails spawn-lost`,
      };
    }
    case "running": {
      const since = stretchStart(a);
      const timeoutAt =
        a.mode === "agent" && i.stepTimeoutMinutes !== null
          ? since + toMs(i.stepTimeoutMinutes, "min")
          : null;
      const limit = timeoutAt === null ? "" : `; its step times out at ${at(timeoutAt)}`;
      const stall =
        a.mode === "agent" ? `, and it is stall-closed ${t.stallMinutes} min after its last activity` : "";
      return {
        reason: { kind: "running", since, timeoutAt },
        sentence: `running (${a.mode}) since ${at(since)}${limit}${stall}`,
      };
    }
    case "sleeping": {
      const requested = a.wakeRequestedAt;
      const overCapAt = requested === null ? null : requested + thresholdMs(t, "seatlessSeconds");
      const sentence =
        requested === null
          ? "sleeping: no wake requested; it wakes when its session runs again or someone asks (ratchet dispatch wake)"
          : `sleeping: a wake was requested at ${at(requested)}; it waits for a seat, and goes over the cap at ${at(overCapAt!)}`;
      return { reason: { kind: "sleeping", wakeRequestedAt: requested, overCapAt }, sentence };
    }
    case "waking": {
      const resumeLostAt = (a.wokenAt ?? a.claimedAt) + thresholdMs(t, "resumeLostMinutes");
      return {
        reason: { kind: "waking", resumeLostAt },
        sentence: `waking: its session is asked to resume until ${at(resumeLostAt)}, then it fails resume-lost`,
      };
    }
    case "closing": {
      const from = a.closingAt ?? a.claimedAt;
      const stopAt = a.closing === "item-closed" ? from : from + thresholdMs(t, "stopGraceSeconds");
      const giveUpAt = from + thresholdMs(t, "closingGiveUpMinutes");
      return {
        reason: { kind: "closing", cause: a.closing ?? "?", stopAt, giveUpAt },
        sentence: `closing (${a.closing}) since ${at(from)}: a working session is stopped from ${at(stopAt)}; at ${at(giveUpAt)} it settles without a confirmed stop`,
      };
    }
  }
}
