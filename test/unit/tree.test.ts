import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { findCycle } from "../../src/core/cycles.js";
import type { Outcome, Status } from "../../src/core/model.js";
import {
  decideEnd,
  hasIntent,
  isIdle,
  mayRunAbortHandler,
  ownedLive,
  planCascade,
  planFailFast,
  planFinalize,
  type TreeNode,
  validateWait,
} from "../../src/core/tree.js";

const node = (id: number, over: Partial<TreeNode> = {}): TreeNode => ({
  id,
  owner: null,
  background: false,
  status: "running",
  outcome: null,
  abortRequested: false,
  ...over,
});

const STATES: { status: Status; outcome: Outcome | null }[] = [
  { status: "pending", outcome: null },
  { status: "running", outcome: null },
  { status: "waiting", outcome: null },
  { status: "completing", outcome: "completed" },
  { status: "completing", outcome: "failed" },
  { status: "terminal", outcome: "completed" },
  { status: "terminal", outcome: "aborted" },
];

/** Random forests: node i's owner is a smaller id or none, so owner edges never cycle. */
const forest = fc.integer({ min: 1, max: 40 }).chain((n) =>
  fc
    .array(
      fc.record({
        owner: fc.option(fc.nat(), { nil: null }),
        background: fc.boolean(),
        state: fc.constantFrom(...STATES),
        abortRequested: fc.boolean(),
      }),
      { minLength: n, maxLength: n },
    )
    .map((rows) =>
      rows.map(
        (r, i): TreeNode => ({
          id: i + 1,
          owner: r.owner === null || i === 0 ? null : (r.owner % i) + 1,
          background: r.background,
          status: r.state.status,
          outcome: r.state.outcome,
          abortRequested: r.abortRequested,
        }),
      ),
    ),
);

/** Is `id` below an owner with intent, through non-background links only? */
function reachedByIntent(id: number, nodes: readonly TreeNode[]): boolean {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  let cur = byId.get(id)!;
  while (cur.owner !== null) {
    if (cur.background) return false;
    const owner = byId.get(cur.owner)!;
    if (hasIntent(owner)) return true;
    cur = owner;
  }
  return false;
}

describe("task trees (spec §12, pure core)", () => {
  it("§12 ownedLive stops at background children and skips terminal tasks", () => {
    const nodes = [
      node(1),
      node(2, { owner: 1 }),
      node(3, { owner: 2, status: "terminal", outcome: "completed" }),
      node(4, { owner: 3 }),
      node(5, { owner: 1, background: true }),
      node(6, { owner: 5 }),
    ];
    expect(ownedLive(1, nodes)).toEqual([2, 4]);
    expect(ownedLive(5, nodes)).toEqual([6]);
  });

  it("§12 a terminal owner has no intent; a held failure and an abort mark do", () => {
    expect(hasIntent(node(1, { status: "terminal", outcome: "aborted", abortRequested: true }))).toBe(false);
    expect(hasIntent(node(1, { status: "completing", outcome: "failed" }))).toBe(true);
    expect(hasIntent(node(1, { status: "completing", outcome: "completed" }))).toBe(false);
    expect(hasIntent(node(1, { abortRequested: true }))).toBe(true);
  });

  it("§12 cascade marks live ordinary descendants of an aborted owner, not background subtrees", () => {
    const nodes = [
      node(1, { abortRequested: true }),
      node(2, { owner: 1 }),
      node(3, { owner: 2, status: "waiting" }),
      node(4, { owner: 1, background: true }),
      node(5, { owner: 4 }),
      node(6, { owner: 1, status: "terminal", outcome: "completed" }),
    ];
    expect(planCascade(nodes)).toEqual([2, 3]);
  });

  it("§12 property: cascade marks exactly the live unmarked tasks reached by intent, and is idempotent", () => {
    fc.assert(
      fc.property(forest, (nodes) => {
        const marks = planCascade(nodes);
        for (const n of nodes) {
          const expected =
            n.status !== "terminal" && !n.abortRequested && !n.background && reachedByIntent(n.id, nodes);
          expect(marks.includes(n.id)).toBe(expected);
        }
        const after = nodes.map((n) => (marks.includes(n.id) ? { ...n, abortRequested: true } : n));
        // New marks can create new intent below; iterate to a fixpoint, which must be reached.
        let cur = after;
        for (let i = 0; i < nodes.length + 1; i++) {
          const more = planCascade(cur);
          if (more.length === 0) return;
          cur = cur.map((n) => (more.includes(n.id) ? { ...n, abortRequested: true } : n));
        }
        throw new Error("cascade did not reach a fixpoint");
      }),
    );
  });

  it("§12 a task ending with live owned work is held as completing; otherwise terminal", () => {
    const nodes = [node(1), node(2, { owner: 1 }), node(3, { owner: 1, background: true })];
    expect(decideEnd(1, nodes)).toBe("completing");
    expect(decideEnd(1, [node(1), node(3, { owner: 1, background: true })])).toBe("terminal");
  });

  it("§12 property: finalize frees holds in rounds, and never one with live owned work", () => {
    fc.assert(
      fc.property(forest, (nodes) => {
        const done = new Set(planFinalize(nodes));
        const after = nodes.map((n) => (done.has(n.id) ? { ...n, status: "terminal" as Status } : n));
        for (const id of done) expect(ownedLive(id, after)).toEqual([]);
        // Nothing left that could be finalized.
        expect(planFinalize(after)).toEqual([]);
      }),
    );
  });

  it("§12 the abort handler waits until owned work drained (bottom-up)", () => {
    const nodes = [node(1, { abortRequested: true }), node(2, { owner: 1, abortRequested: true })];
    expect(mayRunAbortHandler(1, nodes)).toBe(false);
    expect(mayRunAbortHandler(2, nodes)).toBe(true);
    expect(mayRunAbortHandler(1, [nodes[0]!, { ...nodes[1]!, status: "terminal", outcome: "aborted" }])).toBe(
      true,
    );
  });

  it("§12 wait validation: self, missing, owner chain, failFast on non-owned, abort handler", () => {
    const nodes = [node(1), node(2, { owner: 1 }), node(3, { owner: 2 }), node(4)];
    const none = { waits: new Map<number, number[]>() };
    expect(validateWait(3, [3], "allSettled", nodes, none, false)).toEqual({ code: "self" });
    expect(validateWait(3, [99], "allSettled", nodes, none, false)).toEqual({ code: "missing", id: 99 });
    expect(validateWait(3, [1], "allSettled", nodes, none, false)).toEqual({ code: "owner_chain", id: 1 });
    expect(validateWait(1, [4], "failFast", nodes, none, false)).toEqual({ code: "not_owned", id: 4 });
    expect(validateWait(1, [2], "failFast", nodes, none, true)).toEqual({ code: "in_abort_handler" });
    expect(validateWait(1, [2], "failFast", nodes, none, false)).toBeNull();
    expect(validateWait(1, [4], "allSettled", nodes, none, false)).toBeNull();
  });

  it("§12 wait validation rejects a wait that closes a cycle through waits and owned work", () => {
    // 4 waits on 1; 1 owns 2 (live). If 2 waits on 4, then 2 → 4 → 1 → 2 (1 cannot end before 2 drains).
    const nodes = [node(1), node(2, { owner: 1 }), node(4)];
    const waits = { waits: new Map([[4, [1]]]) };
    const r = validateWait(2, [4], "allSettled", nodes, waits, false);
    expect(r?.code).toBe("cycle");
  });

  it("§12 property: accepted waits keep the wait-for graph acyclic", () => {
    fc.assert(
      fc.property(
        forest,
        fc.array(fc.tuple(fc.nat(), fc.array(fc.nat(), { maxLength: 3 })), { maxLength: 30 }),
        (nodes, tries) => {
          const live = nodes.filter((n) => n.status !== "terminal");
          if (live.length === 0) return;
          const waits = new Map<number, number[]>();
          for (const [w, on] of tries) {
            const waiter = live[w % live.length]!.id;
            if (waits.has(waiter)) continue;
            const targets = on.map((o) => nodes[o % nodes.length]!.id);
            if (validateWait(waiter, targets, "allSettled", nodes, { waits }, false) === null)
              waits.set(waiter, targets);
          }
          const byId = new Map(nodes.map((n) => [n.id, n]));
          const next = (id: number) => {
            const out = [...(waits.get(id) ?? [])];
            for (const c of nodes)
              if (c.owner === id && !c.background && c.status !== "terminal") out.push(c.id);
            return out.filter((n) => byId.get(n)?.status !== "terminal");
          };
          expect(
            findCycle(
              nodes.map((n) => n.id),
              next,
            ),
          ).toBeNull();
        },
      ),
    );
  });

  it("§12 failFast: the first non-completed member marks the other live members, not the waiter", () => {
    const members = [
      node(2, { owner: 1, status: "terminal", outcome: "failed" }),
      node(3, { owner: 1 }),
      node(4, { owner: 1, status: "waiting" }),
      node(5, { owner: 1, status: "terminal", outcome: "completed" }),
    ];
    expect(planFailFast(members)).toEqual([3, 4]);
    expect(planFailFast(members.slice(1))).toEqual([]);
  });

  it("§12 idle: waiting and completing tasks block it, background subtrees do not", () => {
    const bg = [
      node(1, { status: "terminal", outcome: "completed" }),
      node(2, { owner: 1, background: true }),
    ];
    expect(isIdle([bg[0]!], bg)).toBe(true);
    expect(isIdle([node(1, { status: "waiting" })], [])).toBe(false);
    expect(isIdle([node(1, { status: "completing", outcome: "completed" })], [])).toBe(false);
  });
});
