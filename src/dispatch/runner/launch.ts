/**
 * Starting an attempt's session (spec §20.15, §20.22): a fresh spawn, or the
 * revival of the item's kept session, and what a refusal means.
 */
import { capacityDelayMs, resumeFallback, type StartOutcome } from "../../core/dispatch/sessions.js";
import type { AttemptRow } from "../../store/dispatch/ops.js";
import type { WorkerAdapter } from "../workers/adapter.js";
import type { RunnerContext } from "./context.js";

export type LaunchResult = "bound" | "refused" | "stale";

/**
 * Starts (or revives) the attempt's session and binds it. A revival refused
 * for cause `other` falls back to a fresh spawn and records the fallback; a
 * capacity refusal backs the kind off; an unanswered revival changes
 * nothing, and the next pass asks again.
 * Invariant: a capacity refusal never leads to a fresh spawn (spec §20.15).
 */
export async function launch(
  ctx: RunnerContext,
  a: AttemptRow,
  worker: WorkerAdapter,
): Promise<{ result: LaunchResult; attempt: AttemptRow }> {
  const { request, kept } = ctx.spawnOf(a);
  let outcome: StartOutcome;
  let fallback = false;
  if (kept !== null && !a.resumeFallback) {
    outcome = await worker.resumeKept(kept, request);
    if (resumeFallback(outcome)) {
      fallback = true;
      outcome = await worker.start(request);
    }
  } else outcome = await worker.start(request);
  if (outcome.kind !== "started") {
    if (outcome.kind === "refused" && outcome.cause === "capacity")
      ctx.backoffUntil.set(
        worker.kind,
        await ctx.ops.noteCapacityRefusal(worker.kind, (n) => capacityDelayMs(n, ctx.random)),
      );
    await ctx.ops.noteEvent(a.id, "refused", { outcome, fallback });
    if (!fallback) return { result: "refused", attempt: a };
    // The fallback is recorded even when the fresh spawn was refused: the next try spawns fresh.
    const m = await ctx.ops.moveAttempt(ctx.guard(a), { resumeFallback: true }, { resumeFallback: true });
    return { result: m.kind === "moved" ? "refused" : "stale", attempt: m.kind === "moved" ? m.attempt : a };
  }
  await ctx.debug?.("launched", a.id);
  await ctx.ops.clearCapacityRefusals(worker.kind);
  ctx.backoffUntil.delete(worker.kind);
  const patch = fallback ? { session: outcome.session, resumeFallback: true } : { session: outcome.session };
  const m = await ctx.ops.moveAttempt(ctx.guard(a), patch, { bound: outcome.session, fallback });
  return m.kind === "moved" ? { result: "bound", attempt: m.attempt } : { result: "stale", attempt: a };
}
