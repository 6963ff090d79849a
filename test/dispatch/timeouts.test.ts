/** Every named timeout at its threshold − 1 ms and at its threshold, from its anchor (spec §20.8). */
import { describe, expect, it } from "vitest";
import type { AttemptView } from "../../src/core/dispatch/model.js";
import { isForgetDue, isKeptDue, maySeat, strayWatchCutoff } from "../../src/core/dispatch/sessions.js";
import { pickReadingAction } from "../../src/core/dispatch/table.js";
import {
  DEFAULT_SLEEP,
  DEFAULT_TIMEOUTS,
  resolveSleep,
  resolveTimeouts,
  TIMEOUT_ANCHORS,
  thresholdMs,
} from "../../src/core/dispatch/timeouts.js";
import { ConfigError } from "../../src/errors.js";
import { absent, attempt, ended, input, MIN, running, suspended, T0 } from "./kit.js";

const T = DEFAULT_TIMEOUTS;
const S = DEFAULT_SLEEP;
/** An anchor distinct from T0, so a rule measured from the wrong instant fails. */
const ANCHOR = T0 + 7 * MIN + 13;
const H = 3_600_000;

/** [the decision just before the threshold, the decision at it] for an input built at `now`. */
function edges(threshold: number, build: (now: number) => Parameters<typeof input>) {
  const at = (now: number) => pickReadingAction(input(...build(now)));
  return [at(ANCHOR + threshold - 1), at(ANCHOR + threshold)];
}

describe("named timeouts (spec §20.8)", () => {
  it("§20.8 defaults and anchors are documented as data", () => {
    expect(T).toEqual({
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
    expect(S).toEqual({ afterQuietMinutes: 5, afterIdleMinutes: 30, afterUnattendedMinutes: 60 });
    expect(Object.keys(TIMEOUT_ANCHORS).sort()).toEqual(Object.keys(T).sort());
  });

  it("§20.8 stallMinutes from lastActivityAt", () => {
    const [before, after] = edges(30 * MIN, (now) => [
      attempt("running"),
      running({ lastActivityAt: ANCHOR }),
      now,
    ]);
    expect(before!.action).toEqual({ kind: "bind-only" });
    expect(after!.action).toEqual({ kind: "close", cause: "stalled" });
  });

  it("§20.8 step timeoutMinutes from the stretch start (startedAt, or a later wokenAt)", () => {
    for (const a of [attempt("running", { startedAt: ANCHOR }), attempt("running", { wokenAt: ANCHOR })]) {
      const [before, after] = edges(45 * MIN, (now) => [
        a,
        running({ lastActivityAt: now }),
        now,
        { step: { timeoutMinutes: 45 } },
      ]);
      expect(before!.action).toEqual({ kind: "bind-only" });
      expect(after!.action).toEqual({ kind: "close", cause: "timed-out", afterMinutes: 45 });
    }
  });

  it("§20.8 spawnLostMinutes from claimedAt: respawn, then spawn-lost", () => {
    const a = attempt("starting", { claimedAt: ANCHOR, startedAt: null, session: null });
    const [before, after] = edges(10 * MIN, (now) => [a, absent, now]);
    expect(before!.action).toEqual({ kind: "respawn" });
    expect(after!.action).toEqual({ kind: "settle", forced: "spawn-lost", sessionStopped: true });
  });

  it("§20.8 spawnLostMinutes from claimedAt, closing with no session seen: await the spawn, then settle as a stray", () => {
    const a = attempt("closing", { claimedAt: ANCHOR, session: null, closing: "item-closed" });
    const [before, after] = edges(10 * MIN, (now) => [a, absent, now]);
    expect(before!.action).toEqual({ kind: "await-spawn" });
    expect(after!.action).toEqual({ kind: "settle", forced: "item-closed", sessionStopped: false });
  });

  it("§20.8 resumeLostMinutes from wokenAt", () => {
    for (const r of [suspended(true), ended]) {
      const [before, after] = edges(10 * MIN, (now) => [attempt("waking", { wokenAt: ANCHOR }), r, now]);
      expect(before!.action).toEqual({ kind: "resume" });
      expect(after!.action).toEqual({ kind: "settle", forced: "resume-lost", sessionStopped: true });
    }
  });

  it("§20.8 closingGiveUpMinutes from closingAt: stop, then settle without a confirmed stop", () => {
    const a = attempt("closing", { closingAt: ANCHOR, closing: "stalled" });
    const [before, after] = edges(30 * MIN, (now) => [a, running({ attention: "turn-ended" }), now]);
    expect(before!.action).toEqual({ kind: "stop" });
    expect(after!.action).toEqual({ kind: "settle", forced: "stalled", sessionStopped: false });
  });

  it("§20.8 stopGraceSeconds from closingAt: a working session is left to finish, then stopped", () => {
    const a = attempt("closing", { closingAt: ANCHOR });
    const [before, after] = edges(120_000, (now) => [a, running(), now]);
    expect(before!.action).toEqual({ kind: "nothing" });
    expect(after!.action).toEqual({ kind: "stop" });
  });

  it("§20.8 seatlessSeconds from wakeRequestedAt: wait for a seat, then wake over the cap", () => {
    const a = attempt("sleeping", { wakeRequestedAt: ANCHOR });
    const [before, after] = edges(300_000, (now) => [a, running(), now]);
    expect(before!.action).toEqual({ kind: "nothing" });
    expect(after!.action).toEqual({ kind: "wake-over-cap" });
    expect(maySeat(2, 2, ANCHOR, ANCHOR + 300_000 - 1, T)).toBe("wait");
    expect(maySeat(2, 2, ANCHOR, ANCHOR + 300_000, T)).toBe("over-cap");
    expect(maySeat(1, 2, null, ANCHOR, T)).toBe("seat");
  });

  it("§20.8 keptSessionHours from keptAt", () => {
    const kept = { session: "s1", worker: "w", attempt: "a1", keptAt: ANCHOR };
    const item = { state: "open" as const };
    expect(isKeptDue(kept, item, null, ANCHOR + 24 * H - 1, T)).toBe(false);
    expect(isKeptDue(kept, item, null, ANCHOR + 24 * H, T)).toBe(true);
  });

  it("§20.8 strayWatchHours from endedAt: a forgotten stray is looked for until then", () => {
    expect(ANCHOR > strayWatchCutoff(ANCHOR + 168 * H - 1, T)).toBe(true);
    expect(ANCHOR > strayWatchCutoff(ANCHOR + 168 * H, T)).toBe(false);
  });

  it("§20.8 failedSessionHours from endedAt", () => {
    expect(isForgetDue(ANCHOR, ANCHOR + 72 * H - 1, T)).toBe(false);
    expect(isForgetDue(ANCHOR, ANCHOR + 72 * H, T)).toBe(true);
  });

  it("§20.8 sleep.afterQuietMinutes from lastActivityAt (attended: a quiet session waits for its owner)", () => {
    const a = attempt("running", { mode: "attended" });
    const [before, after] = edges(5 * MIN, (now) => [
      a,
      running({ lastActivityAt: ANCHOR, lastOwnerAt: now }),
      now,
    ]);
    expect(before!.rule).toBe("bound:default");
    expect(after).toEqual({ action: { kind: "bind-only" }, rule: "bound:waiting-for-owner" });
  });

  it("§20.8 sleep.afterIdleMinutes from the moment the session began to wait", () => {
    const [before, after] = edges(30 * MIN, (now) => [
      attempt("running"),
      running({ attention: "waiting", lastActivityAt: ANCHOR }),
      now,
    ]);
    expect(before!.action).toEqual({ kind: "bind-only" });
    expect(after!.action).toEqual({ kind: "sleep-if-idle", waitingSince: ANCHOR });
  });

  it("§20.8 sleep.afterUnattendedMinutes from the owner's last visit (or the stretch start)", () => {
    const a: AttemptView = attempt("running", { mode: "attended" });
    const [before, after] = edges(60 * MIN, (now) => [
      a,
      running({ lastActivityAt: now - MIN, lastOwnerAt: ANCHOR }),
      now,
    ]);
    expect(before!.rule).toBe("bound:default");
    expect(after!.action).toEqual({ kind: "sleep-unattended", since: ANCHOR });
  });

  it("§20.8 every timeout is configurable; bad or unknown values are refused at configuration", () => {
    expect(resolveTimeouts({ stallMinutes: 0.5 }).stallMinutes).toBe(0.5);
    expect(thresholdMs(resolveTimeouts({ stopGraceSeconds: 0 }), "stopGraceSeconds")).toBe(0);
    expect(resolveSleep({ afterIdleMinutes: 2 }).afterIdleMinutes).toBe(2);
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, "5", 1e9])
      expect(() => resolveTimeouts({ stallMinutes: bad as number })).toThrow(ConfigError);
    expect(() => resolveTimeouts({ stalMinutes: 3 } as never)).toThrow(ConfigError);
    expect(() => resolveSleep({ afterIdleMinutes: 0 })).toThrow(ConfigError);
  });
});
