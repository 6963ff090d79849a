/**
 * Scenario 10, how tasks end in the model: a settlement or an operator action ends a task, and the
 * end moves its dependents (spec §6.1, §6.2); marked tasks that hold no worker end at once (§7.1).
 * These mutate the (already cloned) state they are given.
 */
import type { Outcome } from "../../src/core/model.js";
import { isLive, type MError, type ModelConfig, type ModelState } from "./state.js";

/**
 * A task ends: terminal with `outcome`, its lease dropped; a completion releases its dependents
 * (spec §6.2), any other end fails them (§6.1). `error` replaces the stored error, except that a
 * completion keeps the error of an earlier failed attempt (the stores do not clear it).
 */
export function finish(s: ModelState, k: number, outcome: Outcome, error: MError | null): void {
  const t = s.tasks[k]!;
  t.status = "terminal";
  t.outcome = outcome;
  t.error = error;
  if (outcome !== "completed") t.result = null;
  t.endedAt = s.now;
  t.leaseUntil = null;
  t.lockedBy = null;
  t.wakeAt = null;
  if (outcome === "completed") releaseDependents(s, k);
  else cascade(s, k);
}

/** spec §6.2. */
function releaseDependents(s: ModelState, k: number): void {
  for (const d of s.tasks) {
    if (d.need !== k || d.status !== "waiting" || d.needsPending === 0) continue;
    d.needsPending -= 1;
    if (d.needsPending === 0 && d.wakeAt === null) {
      if (d.runAfter <= s.now) d.status = "pending";
      else d.wakeAt = d.runAfter;
    }
  }
}

/** spec §6.1: every live transitive dependent that waits becomes upstream_failed, naming the root. */
function cascade(s: ModelState, root: number): void {
  const seen = new Set([root]);
  const queue = [root];
  while (queue.length > 0) {
    const k = queue.shift()!;
    s.tasks.forEach((d, j) => {
      if (d.need !== k || seen.has(j)) return;
      seen.add(j);
      if (!isLive(d)) return;
      queue.push(j);
      if (d.status !== "waiting") return;
      d.status = "terminal";
      d.outcome = "upstream_failed";
      d.error = { name: "UpstreamFailed", upstream: root };
      d.wakeAt = null;
      d.endedAt = s.now;
    });
  }
}

/** spec §7.1, §12.5, §12.6: every marked task that holds no worker ends (the stores' reconcile pass). */
export function reconcileMarked(s: ModelState, cfg: ModelConfig): void {
  s.tasks.forEach((t, k) => {
    if (!t.abortRequested || (t.status !== "pending" && t.status !== "waiting")) return;
    if (cfg.known.includes(t.name)) finish(s, k, "aborted", { name: "Aborted", message: "aborted" });
    else
      finish(s, k, "orphaned", {
        name: "Orphaned",
        message: "aborted while no code could take it (missing_definition)",
      });
  });
}

/** Does a live or completed task other than `except` hold (queue, key)? spec §2.3. */
export function holdsKey(s: ModelState, queue: string, key: string, except: number): boolean {
  return s.tasks.some(
    (o, j) =>
      j !== except && o.queue === queue && o.dedupe === key && (isLive(o) || o.outcome === "completed"),
  );
}
