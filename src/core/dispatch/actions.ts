/**
 * What the runner may do with one reading of a live attempt's session
 * (spec §20.3). A decision is the action and the name of the rule that chose
 * it, so a timeline can say why.
 */
import type { ForcedFailure, Instant } from "./model.js";

/** Who asked for a wake. */
export type WakeSource = "session-ran" | "item-message" | "operator";

export type ReadingAction =
  /** Nothing to do this pass. */
  | { readonly kind: "nothing" }
  /** Record the reading (and bind the session id when first seen); no transition. */
  | { readonly kind: "bind-only" }
  | { readonly kind: "move-to-running"; readonly via: "reconcile" | "resume" }
  /** Send the attempt's stored spawn request again. */
  | { readonly kind: "respawn" }
  /** Drop a suspend mark whose suspend did not happen (the session still runs). */
  | { readonly kind: "clear-mark" }
  /** Mark a suspend, then suspend only if the session is still idle since `waitingSince`. */
  | { readonly kind: "sleep-if-idle"; readonly waitingSince: Instant }
  /** Attended mode: mark, suspend with no idle check, then record the sleep. */
  | { readonly kind: "sleep-unattended"; readonly since: Instant }
  /** Closing, and no session was ever seen: neither respawn nor settle yet. */
  | { readonly kind: "await-spawn" }
  /** The session stopped: record the sleep; `requestWake` when it stopped without us and wakes by itself. */
  | { readonly kind: "sleep"; readonly requestWake: boolean }
  | { readonly kind: "request-wake"; readonly by: WakeSource }
  /** Wake although no seat came free in time. */
  | { readonly kind: "wake-over-cap" }
  /** Ask the worker again to resume the woken session. */
  | { readonly kind: "resume" }
  | { readonly kind: "close"; readonly cause: "timed-out"; readonly afterMinutes: number }
  | { readonly kind: "close"; readonly cause: "turn-ended" | "stalled" }
  | { readonly kind: "close"; readonly cause: "usage-limit"; readonly resetsAt: Instant }
  | { readonly kind: "stop" }
  /** End the attempt; `sessionStopped: false` leaves a stray the runner must still find and stop. */
  | { readonly kind: "settle"; readonly forced: ForcedFailure | null; readonly sessionStopped: boolean };

export type ActionKind = ReadingAction["kind"];

/** The running bounds of spec §20.5, by name, in the order they are checked. */
export const BOUND_NAMES = [
  "unhappened-suspend",
  "usage-limit",
  "step-timeout",
  "turn-ended",
  "waiting-for-owner",
  "stall",
  "unattended",
] as const;
export type BoundName = (typeof BOUND_NAMES)[number];

/** The named cell rules of spec §20.4. */
export type CellRuleName =
  | "move-to-running"
  | "running-bounds"
  | "session-ran"
  | "closing-stop"
  | "sleep-unasked"
  | "nothing"
  | "resume-or-lost"
  | "settle-closing"
  | "settle-ended"
  | "sleep-or-settle"
  | "respawn-or-lost"
  | "session-lost"
  | "await-spawn-or-settle";

/** The rule that decided: a cell rule, or for the running×running cell the bound (or `default`). */
export type RuleName = Exclude<CellRuleName, "running-bounds"> | `bound:${BoundName}` | "bound:default";

export interface Decision {
  readonly action: ReadingAction;
  readonly rule: RuleName;
}
