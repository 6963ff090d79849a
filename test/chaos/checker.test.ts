/**
 * The checker itself: each check flags the violation it exists for, on a
 * hand-made record of a run (a checker that cannot fail proves nothing).
 */
import { describe, expect, it } from "vitest";
import {
  checkNoLostTask,
  checkRecovery,
  checkSteps,
  type StepRun,
  type StoredTask,
} from "../../chaos/checker.js";
import type { TaskRecord } from "../../src/index.js";

function task(id: number, over: Partial<TaskRecord> = {}): TaskRecord {
  return {
    id,
    name: "chain",
    status: "terminal",
    outcome: "completed",
    attempts: 2,
    result: { a: 2 },
    ...over,
  } as TaskRecord;
}

function stored(
  t: TaskRecord,
  steps: [string, number, string][],
  events: StoredTask["events"] = [],
): StoredTask {
  return {
    task: t,
    steps: steps.map(([name, attempt, n]) => ({
      taskId: t.id,
      name,
      attempt,
      result: { a: attempt, n },
      createdAt: 0,
    })),
    events,
  };
}

function runs(list: [number, string, number, string, number][]): Map<string, StepRun[]> {
  const m = new Map<string, StepRun[]>();
  for (const [taskId, step, attempt, nonce, token] of list) {
    const k = `${taskId}/${step}`;
    m.set(k, [...(m.get(k) ?? []), { task: taskId, step, attempt, pid: 1, nonce, token }]);
  }
  return m;
}

describe("chaos checker", () => {
  it("P1: flags an acknowledged task that is missing, live, or ended otherwise", () => {
    const store = new Map([
      [1, stored(task(1), [])],
      [2, stored(task(2, { status: "running", outcome: null }), [])],
      [3, stored(task(3, { outcome: "failed" }), [])],
    ]);
    const v = checkNoLostTask([1, 2, 3, 4], store);
    expect(v.map((x) => x.promise)).toEqual(["P1", "P1", "P1"]);
    expect(v.map((x) => x.detail).join("\n")).toMatch(/task 4 is not in the store/);
  });

  it("P2, P3, P4: a clean record passes; each tampering is flagged under its promise", () => {
    const t = task(1, { attempts: 2, result: { a: 2 } });
    const ok = stored(t, [["s0", 1, "x"]]);
    const clean = runs([
      [1, "s0", 1, "x", 1],
      [1, "s1", 1, "y", 1],
    ]);
    expect(checkSteps(new Map([[1, ok]]), clean, () => 1).violations).toEqual([]);
    const flag = (s: StoredTask, r: Map<string, StepRun[]>, seen = new Map<string, string>()) =>
      checkSteps(new Map([[1, s]]), r, () => 1, seen).violations.map((v) => v.promise);
    // No body run produced the committed result.
    expect(flag(ok, runs([[1, "s0", 1, "other", 1]]))).toContain("P3");
    // Two runs in one claim.
    expect(
      flag(
        ok,
        runs([
          [1, "s0", 1, "x", 1],
          [1, "s0", 1, "z", 1],
        ]),
      ),
    ).toContain("P3");
    // A run after the committing claim.
    expect(
      flag(
        ok,
        runs([
          [1, "s0", 1, "x", 1],
          [1, "s0", 2, "z", 2],
        ]),
      ),
    ).toContain("P2");
    // The result changed after it was seen committed.
    expect(flag(ok, clean, new Map([["1/s0", JSON.stringify({ a: 1, n: "old" })]]))).toContain("P2");
    // The record names another claim than the body's.
    expect(flag(stored(t, [["s0", 2, "x"]]), clean)).toContain("P4");
    // The outcome came from an earlier claim.
    expect(flag(stored(task(1, { attempts: 3, result: { a: 2 } }), [["s0", 1, "x"]]), clean)).toContain("P4");
    // A completed task lacks a step.
    expect(flag(stored(t, []), clean)).toContain("P2");
  });

  it("P5: flags a reclaim later than the bound, or before the lease ended", () => {
    const ev = (at: number, leaseUntil: number) => ({
      taskId: 1,
      at,
      kind: "reclaimed" as const,
      attempt: 2,
      detail: { previousHolder: "w1", leaseUntil },
    });
    const kills = [{ workerId: "w1", at: 1_000 }];
    const fast = new Map([[1, stored(task(1), [], [ev(3_000, 2_900)])]]);
    expect(checkRecovery(fast, kills, 5_000)).toMatchObject({ violations: [], recoveries: [2_000] });
    const slow = new Map([[1, stored(task(1), [], [ev(9_000, 2_900)])]]);
    expect(checkRecovery(slow, kills, 5_000).violations.map((v) => v.promise)).toEqual(["P5"]);
    const early = new Map([[1, stored(task(1), [], [ev(2_000, 2_900)])]]);
    expect(checkRecovery(early, kills, 5_000).violations.map((v) => v.promise)).toEqual(["P4"]);
  });
});
