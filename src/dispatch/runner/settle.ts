/**
 * Settlement (spec §20.11, §20.13, §20.23): the outcome of an attempt the
 * table settles, its item's route, and its kept session, written together.
 */
import { findPullUrls } from "../../core/dispatch/links.js";
import type { ForcedFailure, Instant } from "../../core/dispatch/model.js";
import { routeOf } from "../../core/dispatch/route.js";
import { shouldKeep } from "../../core/dispatch/sessions.js";
import type { AttemptRow, ItemRoute, KeepWrite, MoveResult } from "../../store/dispatch/ops.js";
import { pullOps } from "../../store/pulls/ops.js";
import { type Closeout, parseCloseout, type WorkerAdapter } from "../workers/adapter.js";
import type { RunnerContext } from "./context.js";

/**
 * The outcome (spec §20.23): a forced failure fails; otherwise the session's
 * close-out decides; with none, an exit code 0 succeeds and anything else
 * (no code, another code) fails.
 */
export function outcomeOf(
  forced: ForcedFailure | null,
  closeout: Closeout | null,
  exitCode: number | null,
): boolean {
  if (forced !== null) return false;
  if (closeout !== null) return closeout.outcome === "succeeded";
  return exitCode === 0;
}

export async function settle(
  ctx: RunnerContext,
  a: AttemptRow,
  worker: WorkerAdapter,
  forced: ForcedFailure | null,
  sessionStopped: boolean,
  exitCode: number | null,
  now: Instant,
  detail: unknown,
): Promise<MoveResult> {
  // A close-out reported to the store wins over one the session left with its host (spec §20.24).
  const closeout =
    a.closeout !== null
      ? parseCloseout(a.closeout)
      : a.session !== null
        ? await worker.closeout(a.session)
        : null;
  const succeeded = outcomeOf(forced, closeout, exitCode);
  if (closeout !== null) await linkCloseout(ctx, a, closeout);
  const item = await ctx.ops.getItem(a.itemId);
  const pipeline = ctx.pipelines.get(a.pipeline);
  let route: ItemRoute | null = null;
  let keep: KeepWrite | null = null;
  if (item && pipeline && item.state === "running") {
    const r = routeOf(pipeline, a.phase, succeeded, forced, item.taken);
    const taken = r.edge === null ? item.taken : { ...item.taken, [r.edge]: (item.taken[r.edge] ?? 0) + 1 };
    // spec §20.29: an item routed on after a usage limit waits for the limit to reset.
    const notBefore = forced === "usage-limit" ? a.usageResetsAt : null;
    // spec §22.7: an edge that waits on the pull request leaves the item open, waiting, at its target
    // step (or, for an end edge, at its step, to end once the wait is over).
    route =
      r.kind === "step"
        ? {
            step: r.to,
            state: "open",
            taken,
            resumeNext: r.resume,
            notBefore,
            prWait: r.wait && { for: r.wait },
          }
        : r.wait
          ? {
              step: a.phase,
              state: "open",
              taken,
              resumeNext: false,
              notBefore: null,
              prWait: { for: r.wait, end: r.state },
            }
          : { step: a.phase, state: r.state, taken, resumeNext: false, notBefore: null };
    if (shouldKeep(pipeline, a, succeeded, sessionStopped))
      keep = {
        expect: item.kept,
        value: { session: a.session!, worker: a.worker, attempt: a.id, keptAt: now },
      };
  }
  const s = {
    state: succeeded ? ("succeeded" as const) : ("failed" as const),
    forced,
    sessionStopped,
    closeout: closeout === null ? null : JSON.stringify(closeout),
  };
  // A session not confirmed stopped is a stray, which later passes look for and stop (spec §20.26).
  return ctx.ops.settleAttempt(ctx.guard(a), s, route, keep, { ...(detail as object), succeeded, route });
}

/**
 * Links the pull requests a close-out names (its summary and data) to the
 * attempt, before it settles, so the settlement's route sees them (spec
 * §22.4, §22.7). Only when the runner was given forge hosts.
 */
async function linkCloseout(ctx: RunnerContext, a: AttemptRow, c: Closeout): Promise<void> {
  if (ctx.pullHosts === null) return;
  const text = `${c.summary ?? ""}\n${c.data === null || c.data === undefined ? "" : JSON.stringify(c.data)}`;
  const pulls = pullOps(ctx.store);
  for (const f of findPullUrls(text, ctx.pullHosts)) await pulls.link(a.id, f, "url");
}
