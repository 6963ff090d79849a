/**
 * Cron arithmetic for schedules (spec §14): validating an expression and its
 * timezone, the next tick after an instant, and what a due tick does under
 * the missed-tick policy. Pure; the store makes a won tick exclusive.
 */
import { Cron } from "croner";
import { ValidationError } from "../errors.js";
import type { MissedPolicy } from "../store/schedules.js";
import { describe } from "./definition.js";

/** Stored as next_at for a cron that never fires again (the largest Date). */
export const NEVER = 8_640_000_000_000_000;

export interface ScheduleOptions {
  /** IANA timezone the cron fields are read in (default UTC). */
  timezone?: string;
  /** After downtime or a forward clock jump: "once" (default) runs one task for the missed ticks; "skip" runs none older than graceMs. */
  missed?: MissedPolicy;
  /** With missed "skip": how late a tick may still run. Default 60 s. */
  graceMs?: number;
  queue?: string;
  priority?: number;
}

export const DEFAULT_GRACE_MS = 60_000;

/** A paused croner job for the expression, or a ValidationError naming what is wrong. */
export function parseCron(expr: unknown, timezone: string | null): Cron {
  if (typeof expr !== "string" || expr.length === 0 || expr.length > 200)
    throw new ValidationError(`cron must be a string of 1–200 characters (got ${describe(expr)})`);
  if (timezone !== null) {
    try {
      new Intl.DateTimeFormat("en-US", { timeZone: timezone });
    } catch {
      throw new ValidationError(
        `unknown timezone ${describe(timezone)} (use an IANA name such as "Europe/Paris")`,
      );
    }
  }
  try {
    return new Cron(expr, { paused: true, ...(timezone ? { timezone } : { timezone: "UTC" }) });
  } catch (e) {
    throw new ValidationError(`invalid cron ${describe(expr)}: ${(e as Error).message}`);
  }
}

/** The first tick strictly after `after` (epoch ms), or NEVER. */
export function nextTick(cron: Cron, after: number): number {
  const d = cron.nextRun(new Date(after));
  return d ? d.getTime() : NEVER;
}

/**
 * What the due tick `due` does at `now` (spec §14.3): the next tick is always
 * the first one after both (so a backward clock jump waits and a forward one
 * fires once, never a loop), and the due tick runs unless the policy is
 * "skip" and it is older than graceMs.
 */
export function decideTick(
  cron: Cron,
  row: { nextAt: number; missed: MissedPolicy; graceMs: number },
  now: number,
): { next: number; fire: boolean } {
  const next = nextTick(cron, Math.max(now, row.nextAt));
  const late = now - row.nextAt;
  return { next, fire: !(row.missed === "skip" && late > row.graceMs) };
}

/** The dedupe key of a tick's task: the same tick can never make two live or completed tasks. */
export function tickKey(name: string, tick: number): string {
  return `schedule:${name}:${tick}`;
}
