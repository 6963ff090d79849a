/** The reconcile table, cell by cell (spec §20.4), with its totality and its refusals. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  CLOSING_CAUSES,
  CLOSING_FAILURE,
  LIVE_ATTEMPT_STATES,
  READING_KINDS,
} from "../../src/core/dispatch/model.js";
import { pickReadingAction, RECONCILE_TABLE } from "../../src/core/dispatch/table.js";
import { DEFAULT_TIMEOUTS } from "../../src/core/dispatch/timeouts.js";
import { InvalidStateError } from "../../src/errors.js";
import { absent, attempt, ended, input, MIN, running, suspended, T0 } from "./kit.js";

const at = (ms: number) => T0 + ms;
const act = (...args: Parameters<typeof input>) => pickReadingAction(input(...args)).action;

describe("the reconcile table (spec §20.4)", () => {
  it("§20.4 has exactly one rule for every reading kind × live state", () => {
    expect(Object.keys(RECONCILE_TABLE).sort()).toEqual([...READING_KINDS].sort());
    for (const kind of READING_KINDS)
      expect(Object.keys(RECONCILE_TABLE[kind]).sort()).toEqual([...LIVE_ATTEMPT_STATES].sort());
  });

  it("§20.4 running × starting and × reconciling: move to running (reconcile)", () => {
    for (const s of ["starting", "reconciling"] as const)
      expect(act(attempt(s), running(), at(MIN))).toEqual({ kind: "move-to-running", via: "reconcile" });
  });

  it("§20.4 running × running: the running bounds, bind-only when within all of them", () => {
    expect(pickReadingAction(input(attempt("running"), running(), at(MIN)))).toEqual({
      action: { kind: "bind-only" },
      rule: "bound:default",
    });
  });

  it("§20.4 running × sleeping: request a wake (session-ran) when none was requested", () => {
    expect(act(attempt("sleeping"), running(), at(MIN))).toEqual({ kind: "request-wake", by: "session-ran" });
  });

  it("§20.4 running × sleeping: nothing while a requested wake waits for a seat", () => {
    expect(act(attempt("sleeping", { wakeRequestedAt: T0 }), running(), at(MIN))).toEqual({
      kind: "nothing",
    });
  });

  it("§20.4 running × waking: move to running (resume)", () => {
    expect(act(attempt("waking"), running(), at(MIN))).toEqual({ kind: "move-to-running", via: "resume" });
  });

  it("§20.4 running × closing: nothing inside the stop grace for a working session, else stop", () => {
    expect(act(attempt("closing"), running(), at(1))).toEqual({ kind: "nothing" });
    expect(act(attempt("closing"), running({ attention: "turn-ended" }), at(1))).toEqual({ kind: "stop" });
    expect(act(attempt("closing"), running({ attention: "waiting" }), at(1))).toEqual({ kind: "stop" });
  });

  it("§20.7 running × closing for item-closed: no grace, stop at once", () => {
    expect(act(attempt("closing", { closing: "item-closed" }), running(), at(1))).toEqual({ kind: "stop" });
  });

  it("§20.4 suspended × starting, reconciling, running: sleep, asking a wake only when neither we nor the worker asked", () => {
    for (const s of ["starting", "reconciling", "running"] as const) {
      expect(act(attempt(s), suspended(false), at(MIN))).toEqual({ kind: "sleep", requestWake: true });
      expect(act(attempt(s), suspended(true), at(MIN))).toEqual({ kind: "sleep", requestWake: false });
      expect(act(attempt(s, { suspendRequestedAt: T0 }), suspended(false), at(MIN))).toEqual({
        kind: "sleep",
        requestWake: false,
      });
    }
  });

  it("§20.4 suspended × sleeping and ended × sleeping: nothing", () => {
    expect(act(attempt("sleeping"), suspended(true), at(MIN))).toEqual({ kind: "nothing" });
    expect(act(attempt("sleeping"), ended, at(MIN))).toEqual({ kind: "nothing" });
  });

  it("§20.4 suspended × waking and ended × waking: resume (until resume-lost)", () => {
    expect(act(attempt("waking"), suspended(true), at(MIN))).toEqual({ kind: "resume" });
    expect(act(attempt("waking"), ended, at(MIN))).toEqual({ kind: "resume" });
  });

  it("§20.7 suspended × closing and ended × closing: settle with the closing cause's forced failure, session stopped", () => {
    for (const cause of CLOSING_CAUSES) {
      const a = attempt("closing", { closing: cause });
      const want = { kind: "settle", forced: CLOSING_FAILURE[cause], sessionStopped: true };
      expect(act(a, suspended(true), at(MIN))).toEqual(want);
      expect(act(a, ended, at(MIN))).toEqual(want);
    }
  });

  it("§20.7 closing causes map to forced failures: closed-out and turn-ended to none, the rest to themselves", () => {
    expect(CLOSING_FAILURE).toEqual({
      "closed-out": null,
      "turn-ended": null,
      "timed-out": "timed-out",
      "item-closed": "item-closed",
      stalled: "stalled",
      "skill-missing": "skill-missing",
      "usage-limit": "usage-limit",
    });
  });

  it("§20.4 ended × starting and × reconciling: settle with no forced failure, session stopped", () => {
    for (const s of ["starting", "reconciling"] as const)
      expect(act(attempt(s), ended, at(MIN))).toEqual({ kind: "settle", forced: null, sessionStopped: true });
  });

  it("§20.4 ended × running: a genuine end settles; after our suspend mark it is the sleep we asked for", () => {
    expect(act(attempt("running"), ended, at(MIN))).toEqual({
      kind: "settle",
      forced: null,
      sessionStopped: true,
    });
    expect(act(attempt("running", { suspendRequestedAt: T0 }), ended, at(MIN))).toEqual({
      kind: "sleep",
      requestWake: false,
    });
  });

  it("§20.4 absent × starting and × reconciling: respawn (until spawn-lost)", () => {
    for (const s of ["starting", "reconciling"] as const)
      expect(act(attempt(s, { session: null }), absent, at(MIN))).toEqual({ kind: "respawn" });
  });

  it("§20.4 absent × running, sleeping, waking: settle session-lost", () => {
    for (const s of ["running", "sleeping", "waking"] as const)
      expect(act(attempt(s), absent, at(MIN))).toEqual({
        kind: "settle",
        forced: "session-lost",
        sessionStopped: true,
      });
  });

  it("§20.4 absent × closing: a session once seen settles like closing; none seen awaits the spawn", () => {
    expect(act(attempt("closing", { closing: "stalled" }), absent, at(MIN))).toEqual({
      kind: "settle",
      forced: "stalled",
      sessionStopped: true,
    });
    expect(act(attempt("closing", { session: null }), absent, at(MIN))).toEqual({ kind: "await-spawn" });
  });

  it("§20.1 a terminal attempt is never read: the table refuses it", () => {
    for (const state of ["succeeded", "failed"] as const) {
      const a = { ...attempt("running"), state };
      expect(() => pickReadingAction(input(a, running()))).toThrow(InvalidStateError);
    }
  });

  it("§20.4 a closing attempt without closingAt or cause, or a waking one without wokenAt, is refused", () => {
    expect(() => act(attempt("closing", { closingAt: null }), running())).toThrow(InvalidStateError);
    expect(() => act(attempt("closing", { closing: null }), ended)).toThrow(InvalidStateError);
    expect(() => act(attempt("waking", { wokenAt: null }), ended)).toThrow(InvalidStateError);
  });

  it("§20.4 totality: every live state and reading, at any times, gets exactly one decision", () => {
    const time = fc.integer({ min: 0, max: 400 * MIN });
    const maybe = fc.option(time, { nil: null });
    fc.assert(
      fc.property(
        fc.constantFrom(...LIVE_ATTEMPT_STATES),
        fc.constantFrom(...READING_KINDS),
        fc.record({
          started: maybe,
          woken: time,
          wake: maybe,
          mark: maybe,
          closing: time,
          activity: time,
          now: time,
        }),
        fc.constantFrom("agent", "attended"),
        fc.constantFrom(...CLOSING_CAUSES),
        fc.boolean(),
        (state, kind, t, mode, cause, bound) => {
          const a = attempt(state, {
            mode,
            startedAt: t.started === null ? null : at(t.started),
            wokenAt: at(t.woken),
            wakeRequestedAt: t.wake === null ? null : at(t.wake),
            suspendRequestedAt: t.mark === null ? null : at(t.mark),
            closingAt: at(t.closing),
            closing: cause,
            session: bound ? "s1" : null,
          });
          const r =
            kind === "running"
              ? running({ lastActivityAt: at(t.activity) })
              : kind === "suspended"
                ? suspended(bound)
                : kind === "ended"
                  ? ended
                  : absent;
          const d = pickReadingAction(input(a, r, at(t.now)));
          expect(typeof d.action.kind).toBe("string");
          expect(typeof d.rule).toBe("string");
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it("§20.3 a decision names the rule that chose it: the cell, or for running × running the bound", () => {
    expect(pickReadingAction(input(attempt("waking"), suspended(true), at(MIN))).rule).toBe("resume-or-lost");
    expect(pickReadingAction(input(attempt("closing", { session: null }), absent, at(MIN))).rule).toBe(
      "await-spawn-or-settle",
    );
    expect(pickReadingAction(input(attempt("running"), running(), at(60 * MIN))).rule).toBe("bound:stall");
  });

  it("§20.8 the table reads the configured timeouts, not only the defaults", () => {
    const a = attempt("starting", { session: null });
    const timeouts = { ...DEFAULT_TIMEOUTS, spawnLostMinutes: 1 };
    expect(act(a, absent, at(MIN), { timeouts })).toEqual({
      kind: "settle",
      forced: "spawn-lost",
      sessionStopped: true,
    });
  });
});
