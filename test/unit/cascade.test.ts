import { describe, expect, it } from "vitest";
import { type DependentNode, planRetrySubtree, planUpstreamFailure } from "../../src/core/cascade.js";
import type { Outcome } from "../../src/core/model.js";

const waiting = (id: number, needs: number[]): DependentNode => ({
  id,
  status: "waiting",
  outcome: null,
  needs,
});
const terminal = (id: number, outcome: Outcome, needs: number[]): DependentNode => ({
  id,
  status: "terminal",
  outcome,
  needs,
});

describe("cascade planning (spec §6.1)", () => {
  it("§6.1 a chain fails entirely below the root", () => {
    expect(planUpstreamFailure(1, [waiting(2, [1]), waiting(3, [2]), waiting(4, [3])])).toEqual([2, 3, 4]);
  });

  it("§6.1 a diamond lists each dependent once", () => {
    // 1 → 2, 1 → 3, {2,3} → 4
    expect(planUpstreamFailure(1, [waiting(2, [1]), waiting(3, [1]), waiting(4, [2, 3])])).toEqual([2, 3, 4]);
  });

  it("§6.1 cross-links and unrelated tasks: only what depends on the root", () => {
    const nodes = [
      waiting(2, [1]),
      waiting(3, [2, 10]),
      waiting(4, [10]), // depends on another task only
      waiting(5, [4, 3]), // reached through 3
      waiting(6, [11]),
    ];
    expect(planUpstreamFailure(1, nodes)).toEqual([2, 3, 5]);
  });

  it("§6.1 a cycle in the stored data terminates thanks to the visited set", () => {
    const nodes = [waiting(2, [1, 3]), waiting(3, [2]), waiting(4, [3, 4])];
    expect(planUpstreamFailure(1, nodes)).toEqual([2, 3, 4]);
    // A cycle back to the root does not list the root.
    expect(planUpstreamFailure(1, [waiting(2, [1]), { ...waiting(1, [2]) }])).toEqual([2]);
  });

  it("§6.1 terminal dependents are skipped and never touched", () => {
    const nodes = [
      terminal(2, "completed", [1]),
      terminal(3, "upstream_failed", [1]),
      waiting(4, [1]),
      { id: 5, status: "pending" as const, outcome: null, needs: [1] },
    ];
    expect(planUpstreamFailure(1, nodes)).toEqual([4, 5]);
  });

  it("§6.1 no depth limit: a chain of 10,000 cascades to the end", () => {
    const n = 10_000;
    const nodes = Array.from({ length: n }, (_, i) => waiting(i + 2, [i + 1]));
    const out = planUpstreamFailure(1, nodes);
    expect(out).toHaveLength(n);
    expect(out[0]).toBe(2);
    expect(out[n - 1]).toBe(n + 1);
  });
});

describe("retry subtree planning (spec §6.3)", () => {
  const outcomes = (m: Record<number, Outcome | null>) => (id: number) => (id in m ? m[id]! : null);

  it("§6.3 only upstream_failed dependents reachable from the root are reset, with their pending needs", () => {
    const nodes = [
      terminal(2, "upstream_failed", [1]),
      terminal(3, "upstream_failed", [2]),
      terminal(4, "completed", [1]), // completed before? never reset
      terminal(5, "failed", [1]), // failed on its own: not reset
      terminal(6, "upstream_failed", [5]), // below a failed task that is not the root
    ];
    const plan = planRetrySubtree(
      1,
      nodes,
      outcomes({
        1: "failed",
        2: "upstream_failed",
        3: "upstream_failed",
        4: "completed",
        5: "failed",
        6: "upstream_failed",
      }),
    );
    expect(plan).toEqual([
      { id: 2, needsPending: 1 },
      { id: 3, needsPending: 1 },
    ]);
  });

  it("§6.3 a dependent that also needs another failed task stays upstream_failed, and so does what hangs below it", () => {
    const nodes = [
      terminal(2, "upstream_failed", [1, 9]), // 9 failed independently
      terminal(3, "upstream_failed", [2]),
      terminal(4, "upstream_failed", [1]),
    ];
    const plan = planRetrySubtree(
      1,
      nodes,
      outcomes({
        1: "failed",
        9: "failed",
        2: "upstream_failed",
        3: "upstream_failed",
        4: "upstream_failed",
      }),
    );
    expect(plan).toEqual([{ id: 4, needsPending: 1 }]);
  });

  it("§6.3 needsPending counts the root, reset tasks and live needs, but not completed ones", () => {
    const nodes = [terminal(2, "upstream_failed", [1]), terminal(3, "upstream_failed", [1, 2, 7, 8])];
    const plan = planRetrySubtree(
      1,
      nodes,
      outcomes({ 1: "failed", 2: "upstream_failed", 3: "upstream_failed", 7: "completed", 8: null }),
    );
    expect(plan).toEqual([
      { id: 2, needsPending: 1 },
      { id: 3, needsPending: 3 },
    ]);
  });

  it("§6.3 every reset task waits on at least one need", () => {
    const nodes = Array.from({ length: 200 }, (_, i) => terminal(i + 2, "upstream_failed", [i + 1]));
    const plan = planRetrySubtree(1, nodes, () => "upstream_failed");
    expect(plan).toHaveLength(200);
    for (const p of plan) expect(p.needsPending).toBeGreaterThanOrEqual(1);
  });
});
