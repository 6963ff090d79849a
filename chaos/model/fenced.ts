/**
 * Scenario 10, the model's holder writes: step commits, heartbeats, progress and settlements, each
 * taking effect only for the current holder (spec §3.7). Pure, like the rest of the model.
 */
import type { SettleResult } from "../../src/store/store.js";
import { finish, reconcileMarked } from "./ends.js";
import {
  type Branch,
  clone,
  type MFence,
  type ModelConfig,
  type ModelSettlement,
  type ModelState,
  type MTask,
  one,
} from "./state.js";

/** spec §3.7, §4.5: does this fence hold for a write that the abort mark refuses (a run-mode write)? */
export function fenceCheck(t: MTask | undefined, f: MFence): SettleResult {
  if (t?.status !== "running" || t.epoch !== f.token) return "lease_lost";
  if (f.mode === "run" && t.abortRequested) return "abort_marked";
  // An abort-mode holder's writes need the mark (spec §12.5); marks are never cleared while running.
  if (f.mode === "abort" && !t.abortRequested) return "lease_lost";
  return "ok";
}

const refusalCode = (r: SettleResult) => (r === "abort_marked" ? "RATCHET_ABORTED" : "RATCHET_LEASE_LOST");

/** spec §4.2: the first commit of (task, name) is kept; a repeat by any holder changes nothing. */
function applyStep(s: ModelState, f: MFence, name: string, result: unknown): SettleResult {
  const r = fenceCheck(s.tasks[f.task], f);
  if (r !== "ok") return r;
  const t = s.tasks[f.task]!;
  t.steps[name] ??= { result, attempt: t.attempts, createdAt: s.now };
  return "ok";
}

/** commitStep: a refusal is thrown (LeaseLostError, AbortedError). */
export function commitStep(s0: ModelState, f: MFence, name: string, result: unknown): Branch[] {
  const s = clone(s0);
  const r = applyStep(s, f, name, result);
  return r === "ok" ? one(s, { ok: null }) : one(s0, { error: refusalCode(r) });
}

/** commitSteps: one transaction, each item fenced on its own, a result per item. */
export function commitSteps(
  s0: ModelState,
  items: readonly { f: MFence; name: string; result: unknown }[],
): Branch[] {
  const s = clone(s0);
  return one(s, { ok: items.map((i) => applyStep(s, i.f, i.name, i.result)) });
}

/** spec §3.8: the lease becomes now + maxMs + grace. */
export function heartbeat(s0: ModelState, cfg: ModelConfig, f: MFence, maxMs: number): Branch[] {
  const r = fenceCheck(s0.tasks[f.task], f);
  if (r !== "ok") return one(s0, { error: refusalCode(r) });
  const s = clone(s0);
  s.tasks[f.task]!.leaseUntil = s.now + maxMs + cfg.graceMs;
  return one(s, { ok: null });
}

/** spec §4.8. */
export function progress(s0: ModelState, f: MFence, fraction: number, note: string | null): Branch[] {
  const r = fenceCheck(s0.tasks[f.task], f);
  if (r !== "ok") return one(s0, { error: refusalCode(r) });
  const s = clone(s0);
  const t = s.tasks[f.task]!;
  t.progress = fraction;
  t.progressNote = note;
  return one(s, { ok: null });
}

/**
 * spec §3.7, §4.4, §4.5, §5.2, §8.2: one settlement. A run-mode holder of a marked task may still
 * release or report the interruption (`aborted`); everything else is refused with abort_marked.
 * An abort-mode holder (claimed with the mark) ends the task aborted, and the store then finishes
 * every other marked task that holds no worker (spec §12.5, the reconcile pass).
 */
function applySettlement(s: ModelState, cfg: ModelConfig, f: MFence, st: ModelSettlement): SettleResult {
  let r = fenceCheck(s.tasks[f.task], f);
  if (r === "abort_marked" && (st.kind === "release" || st.kind === "aborted")) r = "ok";
  if (r !== "ok") return r;
  const t = s.tasks[f.task]!;
  const now = s.now;
  const letGo = () => {
    t.leaseUntil = null;
    t.lockedBy = null;
  };
  switch (st.kind) {
    case "complete":
      t.result = st.result;
      finish(s, f.task, "completed", t.error);
      break;
    case "fail":
      finish(s, f.task, "failed", st.error);
      break;
    case "aborted":
      finish(s, f.task, "aborted", st.error);
      if (f.mode === "abort") reconcileMarked(s, cfg);
      break;
    case "retry":
      t.status = "waiting";
      t.wakeAt = now + st.delayMs;
      t.error = st.error;
      letGo();
      break;
    case "sleep":
      // spec §4.4: the wake time is a step, committed once; the claim gives its attempt back.
      t.status = "waiting";
      t.wakeAt = now + st.delayMs;
      t.attempts -= 1;
      letGo();
      t.steps[st.step] ??= { result: { until: now + st.delayMs }, attempt: t.attempts, createdAt: now };
      break;
    case "release":
      // spec §8.2: back to pending, the attempt given back, the token kept (§3.9).
      t.status = "pending";
      t.attempts -= 1;
      letGo();
      break;
  }
  return "ok";
}

/** settle: one transaction, each settlement fenced on its own, applied in order; a result per item. */
export function settle(
  s0: ModelState,
  cfg: ModelConfig,
  items: readonly { f: MFence; st: ModelSettlement }[],
): Branch[] {
  const s = clone(s0);
  return one(s, { ok: items.map((i) => applySettlement(s, cfg, i.f, i.st)) });
}
