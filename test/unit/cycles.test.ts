import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { findCycle } from "../../src/core/cycles.js";

type Graph = Map<number, number[]>;

function graph(edges: [number, number][], n: number): Graph {
  const g: Graph = new Map();
  for (let i = 0; i < n; i++) g.set(i, []);
  for (const [from, to] of edges) g.get(from)!.push(to);
  return g;
}

const run = (g: Graph) => findCycle(g.keys(), (k) => g.get(k) ?? []);

/** The returned path is a real cycle: starts and ends with the same node, and each hop is an edge. */
function expectCycleIn(g: Graph, path: number[] | null): void {
  expect(path).not.toBeNull();
  const p = path!;
  expect(p.length).toBeGreaterThanOrEqual(2);
  expect(p[0]).toBe(p[p.length - 1]);
  const broken = p.findIndex((node, i) => i + 1 < p.length && !g.get(node)!.includes(p[i + 1]!));
  expect(broken, `hop ${broken} of the path is not an edge`).toBe(-1);
}

/** A random DAG over n nodes: edges only from i to j < i. */
const arbDag = fc.integer({ min: 2, max: 40 }).chain((n) =>
  fc
    .array(
      fc.tuple(fc.integer({ min: 1, max: n - 1 }), fc.nat()).map(([i, r]) => [i, r % i] as [number, number]),
      { maxLength: 120 },
    )
    .map((edges) => ({ n, edges })),
);

describe("cycle detection (spec §2.6)", () => {
  it("§2.6 a self-loop is a cycle", () => {
    const g = graph([[0, 0]], 1);
    expect(run(g)).toEqual([0, 0]);
  });

  it("§2.6 a 2-cycle is found with its path", () => {
    const g = graph(
      [
        [0, 1],
        [1, 0],
      ],
      2,
    );
    expectCycleIn(g, run(g));
    expect(run(g)).toHaveLength(3);
  });

  it("§2.6 a long cycle is found; the path starts and ends with the same node", () => {
    const n = 50;
    const edges: [number, number][] = [];
    for (let i = 0; i < n; i++) edges.push([i, (i + 1) % n]);
    const g = graph(edges, n);
    const path = run(g);
    expectCycleIn(g, path);
    expect(path).toHaveLength(n + 1);
  });

  it("§2.6 a cycle reachable only behind a DAG prefix is found, and its path excludes the prefix", () => {
    // 0 → 1 → 2 → 3 → 1
    const g = graph(
      [
        [0, 1],
        [1, 2],
        [2, 3],
        [3, 1],
      ],
      4,
    );
    const path = run(g)!;
    expectCycleIn(g, path);
    expect(path).not.toContain(0);
  });

  it("§2.6 a DAG (including diamonds) has no cycle", () => {
    const g = graph(
      [
        [3, 1],
        [3, 2],
        [1, 0],
        [2, 0],
      ],
      4,
    );
    expect(run(g)).toBeNull();
    expect(run(graph([], 5))).toBeNull();
  });

  it("§2.6 a chain of 100,000 nodes does not overflow the stack", () => {
    const n = 100_000;
    const g = graph(
      Array.from({ length: n - 1 }, (_, i) => [i, i + 1] as [number, number]),
      n,
    );
    expect(run(g)).toBeNull();
    g.get(n - 1)!.push(0);
    const path = run(g);
    expect(path).toHaveLength(n + 1);
    expectCycleIn(g, path);
  });

  it("§2.6 property: random DAGs never report a cycle", () => {
    fc.assert(
      fc.property(arbDag, ({ n, edges }) => {
        expect(run(graph(edges, n))).toBeNull();
      }),
      { numRuns: 300 },
    );
  });

  it("§2.6 property: adding a back edge to a DAG always makes a cycle, and the path is real", () => {
    fc.assert(
      fc.property(arbDag, fc.nat(), fc.nat(), ({ n, edges }, pickFrom, pickTo) => {
        const g = graph(edges, n);
        // Choose a node with at least one reachable node, then a node it reaches.
        const reach = (s: number) => {
          const seen = new Set<number>();
          const stack = [...g.get(s)!];
          while (stack.length) {
            const x = stack.pop()!;
            if (seen.has(x)) continue;
            seen.add(x);
            stack.push(...g.get(x)!);
          }
          return [...seen];
        };
        const candidates = [...g.keys()].filter((k) => reach(k).length > 0);
        if (candidates.length === 0) {
          // No edges at all: a back edge is then a self-loop.
          g.get(0)!.push(0);
        } else {
          const from = candidates[pickFrom % candidates.length]!;
          const targets = reach(from);
          const to = targets[pickTo % targets.length]!;
          g.get(to)!.push(from); // to is reachable from `from`; the edge back closes a cycle
        }
        expectCycleIn(g, run(g));
      }),
      { numRuns: 300 },
    );
  });
});
