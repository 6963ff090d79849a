/**
 * Applying one decision of the reconcile table to one attempt (spec §20.3,
 * §20.22). Each action is guarded writes (the attempt as listed: a moved
 * attempt makes them `stale`) and the worker calls the action names; the
 * decision itself was made purely (src/core/dispatch/table.ts).
 */
import type { Decision } from "../../core/dispatch/actions.js";
import { decisionNotices } from "../../core/dispatch/facts.js";
import type { SessionReading } from "../../core/dispatch/model.js";
import { thresholdMs } from "../../core/dispatch/timeouts.js";
import type { FactInput } from "../../core/outbox.js";
import type { AttemptRow, MoveResult } from "../../store/dispatch/ops.js";
import type { WorkerAdapter } from "../workers/adapter.js";
import type { RunnerContext } from "./context.js";
import { launch } from "./launch.js";
import { settle } from "./settle.js";

export type Applied = "applied" | "stale" | "nothing";

const result = (m: MoveResult): Applied => (m.kind === "moved" ? "applied" : "stale");

/** Takes a seat and resumes a sleeping attempt's session (spec §20.6); `nothing` while no seat is free. */
export async function wake(
  ctx: RunnerContext,
  a: AttemptRow,
  worker: WorkerAdapter,
  overCap: boolean,
): Promise<Applied> {
  const w = await ctx.ops.wakeAttempt(ctx.guard(a), ctx.defaultSeats(a.worker), overCap);
  if (w.kind === "seat_full") return "nothing";
  if (w.kind === "stale") return "stale";
  if (a.session !== null) await worker.resume(a.session, null);
  return "applied";
}

/**
 * Applies `d` to `a` (as listed) given `reading`, at `now` (the store's clock).
 * Invariant: every store write names the attempt's listed version (spec §20.20).
 */
export async function applyDecision(
  ctx: RunnerContext,
  a: AttemptRow,
  worker: WorkerAdapter,
  reading: SessionReading,
  d: Decision,
  now: number,
): Promise<Applied> {
  const act = d.action;
  const detail = { rule: d.rule, action: act, reading: reading.kind };
  // spec §21.16: notices are derived from the decision and commit with the move that carries it out.
  const notices = decisionNotices(a, d);
  const move = async (patch: Parameters<typeof ctx.ops.moveAttempt>[1]) =>
    result(await ctx.ops.moveAttempt(ctx.guard(a), patch, detail, notices));
  switch (act.kind) {
    case "nothing":
    case "await-spawn":
      return "nothing";
    case "bind-only": // the session was bound when it was read (runner.ts), so the reading is all there is
      return "nothing";
    case "move-to-running":
      return move(
        act.via === "reconcile" ? { state: "running", startedAt: a.startedAt ?? now } : { state: "running" },
      );
    case "respawn": {
      // A kind backing off after a capacity refusal starts nothing, respawns included (spec §20.21).
      if (ctx.isBackingOff(a.worker, now)) return "nothing";
      const r = await launch(ctx, a, worker);
      return r.result === "bound" ? "applied" : r.result === "stale" ? "stale" : "nothing";
    }
    case "clear-mark":
      return move({ suspendRequestedAt: null });
    case "sleep-if-idle":
    case "sleep-unattended":
      return suspendForSleep(
        ctx,
        a,
        worker,
        act.kind === "sleep-if-idle" ? act.waitingSince : null,
        now,
        detail,
        notices,
      );
    case "sleep":
      return move({
        state: "sleeping",
        suspendRequestedAt: null,
        wakeRequestedAt: act.requestWake ? now : null,
      });
    case "request-wake": {
      const m = await ctx.ops.moveAttempt(ctx.guard(a), { wakeRequestedAt: now }, detail);
      if (m.kind !== "moved") return "stale";
      return (await wake(ctx, m.attempt, worker, false)) === "stale" ? "stale" : "applied";
    }
    case "wake-over-cap":
      return wake(ctx, a, worker, true);
    case "resume":
      if (a.session !== null) await worker.resume(a.session, null);
      await ctx.ops.noteEvent(a.id, "resume", detail);
      return "applied";
    case "close":
      return move(
        act.cause === "usage-limit"
          ? { state: "closing", closing: act.cause, closingAt: now, usageResetsAt: act.resetsAt }
          : { state: "closing", closing: act.cause, closingAt: now },
      );
    case "stop":
      if (a.session !== null) await worker.stop(a.session);
      await ctx.ops.noteEvent(a.id, "stop", detail);
      return "applied";
    case "settle": {
      const exitCode = reading.kind === "ended" ? reading.exitCode : null;
      return result(await settle(ctx, a, worker, act.forced, act.sessionStopped, exitCode, now, detail));
    }
  }
}

/**
 * Marks the suspend, then suspends: for an idle sleep only if the session
 * is still idle since `waitingSince` on a fresh reading (else the mark is
 * dropped again). spec §20.5, §20.6.
 */
async function suspendForSleep(
  ctx: RunnerContext,
  a: AttemptRow,
  worker: WorkerAdapter,
  waitingSince: number | null,
  now: number,
  detail: unknown,
  notices: readonly FactInput[],
): Promise<Applied> {
  const m = await ctx.ops.moveAttempt(ctx.guard(a), { suspendRequestedAt: now }, detail, notices);
  if (m.kind !== "moved" || a.session === null) return result(m);
  if (waitingSince !== null) {
    const fresh = await worker.read(a.session);
    if (fresh.kind !== "running" || fresh.lastActivityAt > waitingSince) {
      await ctx.ops.moveAttempt(ctx.guard(m.attempt), { suspendRequestedAt: null }, { idle: false });
      return "applied";
    }
  }
  await worker.suspend(a.session);
  return "applied";
}

/** Whether a sleeping attempt's requested wake may go over the cap now (spec §20.6). */
export function wakeIsOverdue(ctx: RunnerContext, a: AttemptRow, now: number): boolean {
  return (
    a.wakeRequestedAt !== null && now - a.wakeRequestedAt >= thresholdMs(ctx.timeouts, "seatlessSeconds")
  );
}
