/**
 * The named timeouts of dispatch (spec §20.8): their defaults, units and
 * anchors, and the one place a configured value is checked. Every rule that
 * uses one measures `now − anchor ≥ threshold`, where now comes from the
 * injected clock, so a fake clock drives them all in tests.
 */
import { ConfigError } from "../../errors.js";

export const SECOND_MS = 1_000;
export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;

/** Global timeouts of a runner (spec §20.8). */
export interface DispatchTimeouts {
  /** Agent mode: close `stalled` this long after the session's last activity. */
  readonly stallMinutes: number;
  /** Starting/reconciling with no session: respawn until this long after the claim, then `spawn-lost`. */
  readonly spawnLostMinutes: number;
  /** Waking while the session is still suspended or ended: ask to resume until this long after the wake, then `resume-lost`. */
  readonly resumeLostMinutes: number;
  /** Closing while the session still runs: settle without a confirmed stop this long after closing began. */
  readonly closingGiveUpMinutes: number;
  /** Closing a working session (not for `item-closed`): let it finish its close-out this long before `stop`. */
  readonly stopGraceSeconds: number;
  /** A wake that found no free seat goes over the cap this long after it was requested. */
  readonly seatlessSeconds: number;
  /** A kept session is due to be forgotten this long after it was kept. */
  readonly keptSessionHours: number;
  /** Sessions of settled, un-kept attempts are forgotten this long after the attempt ended. */
  readonly failedSessionHours: number;
  /**
   * A stray whose session was never found is looked for by its spawn name until this long after its
   * attempt ended, even once forgotten: a spawn that lands late is still found and stopped (spec §20.26).
   */
  readonly strayWatchHours: number;
}

/** The sleep policy of a pipeline (spec §20.6); not global. */
export interface SleepRules {
  /** A working session with no output this long is quiet (attended mode: waiting for its owner). */
  readonly afterQuietMinutes: number;
  /** A session waiting for its owner this long is put to sleep (if it is still idle). */
  readonly afterIdleMinutes: number;
  /** Attended mode: an owner who has not attached this long since the stretch began (or their last visit). */
  readonly afterUnattendedMinutes: number;
}

/**
 * Defaults. Why these values: stall and idle sleep both fall due about 30
 * minutes after the last activity (idle sleep is checked first, spec §20.5);
 * a spawn or a resume that has not landed in 10 minutes has failed; a session
 * that ignores a stop for 30 minutes is given up on (and looked for later as a
 * stray); two minutes is enough to write a close-out; five minutes waiting for
 * a seat is the most a revived session should stay frozen; a kept session is
 * worth a day, a failed session's logs three; a spawn that has not landed in a
 * week will not (a host's queue is hours at most).
 */
export const DEFAULT_TIMEOUTS: DispatchTimeouts = Object.freeze({
  stallMinutes: 30,
  spawnLostMinutes: 10,
  resumeLostMinutes: 10,
  closingGiveUpMinutes: 30,
  stopGraceSeconds: 120,
  seatlessSeconds: 300,
  keptSessionHours: 24,
  failedSessionHours: 72,
  strayWatchHours: 168,
});

export const DEFAULT_SLEEP: SleepRules = Object.freeze({
  afterQuietMinutes: 5,
  afterIdleMinutes: 30,
  afterUnattendedMinutes: 60,
});

/** The default per-step timeout (spec §20.9), measured from the stretch start. */
export const DEFAULT_STEP_TIMEOUT_MINUTES = 120;

type Unit = "s" | "min" | "h";
const UNIT_MS: Record<Unit, number> = { s: SECOND_MS, min: MINUTE_MS, h: HOUR_MS };

/** Each timeout's unit and the instant it is measured from (documentation and tests read this). */
export const TIMEOUT_ANCHORS: Readonly<Record<keyof DispatchTimeouts, { unit: Unit; anchor: string }>> = {
  stallMinutes: { unit: "min", anchor: "reading.lastActivityAt" },
  spawnLostMinutes: { unit: "min", anchor: "attempt.claimedAt" },
  resumeLostMinutes: { unit: "min", anchor: "attempt.wokenAt" },
  closingGiveUpMinutes: { unit: "min", anchor: "attempt.closingAt" },
  stopGraceSeconds: { unit: "s", anchor: "attempt.closingAt" },
  seatlessSeconds: { unit: "s", anchor: "attempt.wakeRequestedAt" },
  keptSessionHours: { unit: "h", anchor: "kept.keptAt" },
  failedSessionHours: { unit: "h", anchor: "attempt.endedAt" },
  strayWatchHours: { unit: "h", anchor: "attempt.endedAt" },
};

/** The longest any timeout may be: a year. */
const MAX_MS = 366 * 24 * HOUR_MS;
/** May be zero: no grace, or no waiting for a seat. */
const MAY_BE_ZERO = new Set<string>(["stopGraceSeconds", "seatlessSeconds"]);

/** A duration in a unit as whole milliseconds (the threshold every rule compares with). */
export function toMs(value: number, unit: Unit): number {
  return Math.round(value * UNIT_MS[unit]);
}

/** The threshold of a named timeout in milliseconds. */
export function thresholdMs(t: DispatchTimeouts, name: keyof DispatchTimeouts): number {
  return toMs(t[name], TIMEOUT_ANCHORS[name].unit);
}

function check(name: string, value: unknown, unit: Unit, zero: boolean): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0 || (!zero && value === 0))
    throw new ConfigError(
      `dispatch timeout ${name} must be a ${zero ? "non-negative" : "positive"} number (got ${String(value)})`,
    );
  if (toMs(value, unit) > MAX_MS)
    throw new ConfigError(`dispatch timeout ${name} must be at most 366 days (got ${value} ${unit})`);
  return value;
}

/**
 * Fills a partial configuration with the defaults and checks every value.
 * spec §20.8.
 * Invariant: a bad value throws ConfigError at configuration, never at the
 * pass that would have used it; unknown names are refused too.
 */
export function resolveTimeouts(over: Partial<DispatchTimeouts> = {}): DispatchTimeouts {
  const out: Record<string, number> = { ...DEFAULT_TIMEOUTS };
  for (const [name, value] of Object.entries(over)) {
    const spec = TIMEOUT_ANCHORS[name as keyof DispatchTimeouts];
    if (!spec) throw new ConfigError(`unknown dispatch timeout "${name}"`);
    if (value === undefined) continue;
    out[name] = check(name, value, spec.unit, MAY_BE_ZERO.has(name));
  }
  return Object.freeze(out) as unknown as DispatchTimeouts;
}

/** The same for a pipeline's sleep rules (spec §20.6). */
export function resolveSleep(over: Partial<SleepRules> = {}): SleepRules {
  const out: Record<string, number> = { ...DEFAULT_SLEEP };
  for (const [name, value] of Object.entries(over)) {
    if (!(name in DEFAULT_SLEEP)) throw new ConfigError(`unknown sleep rule "${name}"`);
    if (value === undefined) continue;
    out[name] = check(`sleep.${name}`, value, "min", false);
  }
  return Object.freeze(out) as unknown as SleepRules;
}
