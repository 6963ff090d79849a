import { describe, expect, it } from "vitest";
import {
  isAllowed,
  isFailureOutcome,
  isLive,
  isRetryableOutcome,
  OUTCOMES,
  type Outcome,
  STATUSES,
  type State,
  TRANSITIONS,
  type TransitionCause,
} from "../../src/core/model.js";

const CAUSES = Object.keys(TRANSITIONS) as TransitionCause[];
const LIVE: State[] = [
  { status: "pending" },
  { status: "running" },
  { status: "waiting" },
  { status: "completing" },
];
const TERMINAL: State[] = OUTCOMES.map((outcome) => ({ status: "terminal", outcome }));
const ALL: State[] = [...LIVE, ...TERMINAL];
const t = (outcome: Outcome): State => ({ status: "terminal", outcome });
const s = (status: "pending" | "running" | "waiting"): State => ({ status });

/** Is some cause allowed to move `from` to `to`? */
const anyCause = (from: State | "new", to: State) => CAUSES.some((c) => isAllowed(c, from, to));

/** The §1.2 table, row by row (plus insert, §1.5). */
const SPEC_TABLE: [State | "new", State][] = [
  [s("pending"), s("running")],
  [s("pending"), t("aborted")],
  [s("waiting"), s("pending")],
  [s("waiting"), t("aborted")],
  [s("waiting"), t("upstream_failed")],
  [s("running"), t("completed")],
  [s("running"), t("failed")],
  [s("running"), t("aborted")],
  [s("running"), t("faulted")],
  [s("running"), s("waiting")],
  [s("running"), s("pending")],
  [s("running"), s("running")],
  [t("failed"), s("pending")],
  [t("failed"), s("waiting")],
  [t("aborted"), s("pending")],
  [t("faulted"), s("pending")],
  [t("upstream_failed"), s("waiting")],
  ["new", s("pending")],
  ["new", s("waiting")],
  ["new", t("upstream_failed")],
  // Task trees (§12.3–§12.6).
  [s("running"), { status: "completing" }],
  [s("pending"), { status: "completing" }],
  [s("waiting"), { status: "completing" }],
  [{ status: "completing" }, t("completed")],
  [{ status: "completing" }, t("failed")],
  [{ status: "completing" }, t("aborted")],
  [{ status: "completing" }, t("faulted")],
  [s("pending"), t("orphaned")],
  [s("waiting"), t("orphaned")],
  // Flow control (§14.9–§14.10): a claim parks what may not start.
  [s("pending"), s("waiting")],
];

const key = (x: State | "new") =>
  x === "new" ? "new" : x.status === "terminal" ? `terminal:${x.outcome}` : x.status;

describe("model (spec §1.1–§1.2, §1.5)", () => {
  it("§1.1 the statuses and outcomes are exactly the documented ones", () => {
    expect([...STATUSES]).toEqual(["pending", "running", "waiting", "completing", "terminal"]);
    expect([...OUTCOMES]).toEqual([
      "completed",
      "failed",
      "aborted",
      "upstream_failed",
      "orphaned",
      "faulted",
    ]);
    for (const st of STATUSES) expect(isLive(st)).toBe(st !== "terminal");
  });

  it("§1.2 every transition of the spec table is allowed by some cause", () => {
    for (const [from, to] of SPEC_TABLE) {
      expect(anyCause(from, to), `${key(from)} → ${key(to)}`).toBe(true);
    }
  });

  it("§1.2 no transition outside the spec table is allowed (exhaustive over all state pairs)", () => {
    const allowed = new Set(SPEC_TABLE.map(([f, to]) => `${key(f)}>${key(to)}`));
    // retry() from the core-form failed ends (§6.3) also reaches `waiting` / `pending` for every retryable end.
    for (const o of ["failed", "aborted", "faulted", "orphaned"] as const) {
      allowed.add(`terminal:${o}>pending`);
      allowed.add(`terminal:${o}>waiting`);
    }
    allowed.add("terminal:upstream_failed>pending"); // retry subtree reset: waiting on needs, or pending
    for (const from of ["new" as const, ...ALL]) {
      for (const to of ALL) {
        const ok = anyCause(from, to);
        if (ok)
          expect(allowed.has(`${key(from)}>${key(to)}`), `${key(from)} → ${key(to)} is allowed`).toBe(true);
      }
    }
  });

  it("§1.2 terminal states change only through retry (§6.3), and completed never changes", () => {
    for (const from of TERMINAL) {
      for (const to of ALL) {
        for (const c of CAUSES) {
          if (isAllowed(c, from, to)) expect(c, `${key(from)} → ${key(to)} by ${c}`).toBe("retry");
        }
      }
    }
    for (const to of ALL) expect(anyCause(t("completed"), to)).toBe(false);
  });

  it("§12.4 only `hold` writes `completing`, and only `finalize` leaves it, never to upstream_failed or orphaned", () => {
    for (const from of ["new" as const, ...ALL])
      for (const c of CAUSES) if (isAllowed(c, from, { status: "completing" })) expect(c).toBe("hold");
    for (const to of ALL)
      for (const c of CAUSES) if (isAllowed(c, { status: "completing" }, to)) expect(c).toBe("finalize");
    expect(anyCause({ status: "completing" }, t("orphaned"))).toBe(false);
    expect(anyCause({ status: "completing" }, t("upstream_failed"))).toBe(false);
  });

  it("§1.5 enqueue writes only pending, waiting or upstream_failed, and only from nothing", () => {
    for (const to of ALL) {
      expect(isAllowed("enqueue", "new", to)).toBe(
        ["pending", "waiting", "terminal:upstream_failed"].includes(key(to)),
      );
    }
    for (const from of ALL) for (const to of ALL) expect(isAllowed("enqueue", from, to)).toBe(false);
    for (const c of CAUSES.filter((x) => x !== "enqueue"))
      for (const to of ALL) expect(isAllowed(c, "new", to)).toBe(false);
  });

  it("§1.1 every outcome has a rule reaching it; orphaned only by `orphan`, never from running (§12.6)", () => {
    for (const o of OUTCOMES) {
      const reached = ["new" as const, ...LIVE].some((from) => anyCause(from, t(o)));
      expect(reached, o).toBe(true);
    }
    for (const c of CAUSES) if (isAllowed(c, s("running"), t("orphaned"))) expect.unreachable(c);
  });

  it("§1.2 isAllowed is specific: wrong cause, wrong source or wrong target are refused", () => {
    expect(isAllowed("claim", s("waiting"), s("running"))).toBe(false);
    expect(isAllowed("complete", s("pending"), t("completed"))).toBe(false);
    expect(isAllowed("fail", s("running"), t("completed"))).toBe(false);
    expect(isAllowed("fail", s("running"), t("upstream_failed"))).toBe(false);
    expect(isAllowed("upstream", s("running"), t("upstream_failed"))).toBe(false);
    expect(isAllowed("release", s("running"), s("waiting"))).toBe(false);
    expect(isAllowed("retry", t("completed"), s("pending"))).toBe(false);
    expect(isAllowed("promote", s("pending"), s("pending"))).toBe(false);
  });

  it("§2.3 / §6.1 every outcome but completed releases the dedupe key and cascades", () => {
    for (const o of OUTCOMES) expect(isFailureOutcome(o)).toBe(o !== "completed");
  });

  it("§6.3 retry accepts failed, aborted, faulted and orphaned directly, never completed or upstream_failed", () => {
    expect(isRetryableOutcome("orphaned")).toBe(true);
    expect(isRetryableOutcome("failed")).toBe(true);
    expect(isRetryableOutcome("aborted")).toBe(true);
    expect(isRetryableOutcome("faulted")).toBe(true);
    expect(isRetryableOutcome("completed")).toBe(false);
    expect(isRetryableOutcome("upstream_failed")).toBe(false);
  });
});
