/**
 * Task trees: ownership, cancellation intent, cascades, the completing hold
 * and wait validation, decided over plain records (SEM B.8–B.10; spec §12 will
 * number these rules when issue 3 wires them into the stores).
 * The stores read the live part of a tree and apply what these return.
 */
import { findCycle } from "./cycles.js";
import type { Outcome, Status } from "./model.js";

export interface TreeNode {
  id: number;
  /** Owning task; null for a task owned by its scope (a root). Immutable. */
  owner: number | null;
  /** A background child is a boundary: cascades, holds and idle checks stop at it. */
  background: boolean;
  status: Status;
  /** For completing (held) and terminal tasks. */
  outcome: Outcome | null;
  abortRequested: boolean;
}

/**
 * Cancellation intent (SEM B.10.2): a *live* task's own abort mark, or a held
 * (completing) outcome other than completed. A terminal owner never has intent:
 * it became terminal only after its owned work drained.
 */
export function hasIntent(n: TreeNode): boolean {
  if (n.status === "terminal") return false;
  if (n.abortRequested) return true;
  return n.status === "completing" && n.outcome !== null && n.outcome !== "completed";
}

function index(nodes: readonly TreeNode[]) {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const children = new Map<number, TreeNode[]>();
  for (const n of nodes) {
    if (n.owner === null) continue;
    const list = children.get(n.owner);
    if (list) list.push(n);
    else children.set(n.owner, [n]);
  }
  return { byId, children };
}

/**
 * Ordinary owned work of `id` (SEM B.9.4): every live task reached below it
 * through non-background children; a background child and its subtree are
 * skipped. Owner edges never form cycles (owners exist before their children),
 * but the walk keeps a visited set anyway.
 */
export function ownedLive(id: number, nodes: readonly TreeNode[]): number[] {
  const { children } = index(nodes);
  const out: number[] = [];
  const seen = new Set<number>([id]);
  const stack = [id];
  while (stack.length > 0) {
    const cur = stack.pop()!;
    for (const c of children.get(cur) ?? []) {
      if (seen.has(c.id) || c.background) continue;
      seen.add(c.id);
      if (c.status !== "terminal") out.push(c.id);
      stack.push(c.id);
    }
  }
  return out.sort((a, b) => a - b);
}

/**
 * The abort marks a reconcile must add (SEM B.10.2, spec §12): every live,
 * unmarked, non-background task below an owner with intent, walking through
 * non-background tasks only. Derived from durable records alone, so running it
 * again after a crash finds what is still missing and nothing else.
 * Invariant: never marks a background task (it needs its own intent) and never
 * marks anything because of a terminal owner.
 */
export function planCascade(nodes: readonly TreeNode[]): number[] {
  const { children } = index(nodes);
  const marks = new Set<number>();
  const visit = (id: number) => {
    for (const c of children.get(id) ?? []) {
      if (c.background) continue;
      if (c.status !== "terminal" && !c.abortRequested) marks.add(c.id);
      visit(c.id);
    }
  };
  for (const n of nodes) if (hasIntent(n)) visit(n.id);
  return [...marks].sort((a, b) => a - b);
}

/**
 * Which completing tasks may become terminal now (SEM B.9.6): those with no
 * live ordinary owned work. Finalizing one can free its owner, so this runs
 * in rounds until nothing changes.
 */
export function planFinalize(nodes: readonly TreeNode[]): number[] {
  const state = new Map(nodes.map((n) => [n.id, { ...n }]));
  const done: number[] = [];
  for (let changed = true; changed; ) {
    changed = false;
    const current = [...state.values()];
    for (const n of current) {
      if (n.status !== "completing") continue;
      if (ownedLive(n.id, current).length > 0) continue;
      n.status = "terminal";
      done.push(n.id);
      changed = true;
    }
  }
  return done.sort((a, b) => a - b);
}

/**
 * A task's own end while owned work is live is held as completing (SEM B.9.5
 * rule 1); otherwise it is terminal at once.
 */
export function decideEnd(id: number, nodes: readonly TreeNode[]): "terminal" | "completing" {
  return ownedLive(id, nodes).length > 0 ? "completing" : "terminal";
}

/** May the abort handler of `id` start? Only once its ordinary owned work drained (SEM B.10.3). */
export function mayRunAbortHandler(id: number, nodes: readonly TreeNode[]): boolean {
  return ownedLive(id, nodes).length === 0;
}

export type WaitPolicy = "allSettled" | "failFast";

export type WaitRejection =
  | { code: "missing"; id: number }
  | { code: "self" }
  | { code: "owner_chain"; id: number }
  | { code: "not_owned"; id: number }
  | { code: "cycle"; path: number[] }
  | { code: "in_abort_handler" };

export interface WaitEdges {
  /** Current waits: waiter → ids it waits on (live waiters only). */
  waits: ReadonlyMap<number, readonly number[]>;
}

/**
 * Validates a wait before it is committed (SEM B.8.2, F.9, spec §12): every
 * id exists; not the task itself nor a task on its owner chain (they cannot
 * finish first); failFast only on members the waiter owns; an abort handler
 * cannot wait; and the wait must not close a cycle in the wait-for graph,
 * whose edges run from each task to what it waits on and to its live ordinary
 * owned work.
 */
export function validateWait(
  waiter: number,
  on: readonly number[],
  policy: WaitPolicy,
  nodes: readonly TreeNode[],
  edges: WaitEdges,
  inAbortHandler: boolean,
): WaitRejection | null {
  if (inAbortHandler) return { code: "in_abort_handler" };
  const { byId, children } = index(nodes);
  for (const id of on) {
    if (id === waiter) return { code: "self" };
    if (!byId.has(id)) return { code: "missing", id };
  }
  const chain = new Set<number>();
  for (
    let cur = byId.get(waiter)?.owner ?? null;
    cur !== null && !chain.has(cur);
    cur = byId.get(cur)?.owner ?? null
  ) {
    chain.add(cur);
  }
  for (const id of on) if (chain.has(id)) return { code: "owner_chain", id };
  if (policy === "failFast") {
    for (const id of on) if (byId.get(id)!.owner !== waiter) return { code: "not_owned", id };
  }
  const next = (id: number): number[] => {
    const out = [...(id === waiter ? on : (edges.waits.get(id) ?? []))];
    for (const c of children.get(id) ?? []) if (!c.background && c.status !== "terminal") out.push(c.id);
    return out.filter((n) => byId.get(n)?.status !== "terminal");
  };
  const cycle = findCycle([waiter], next);
  return cycle ? { code: "cycle", path: cycle } : null;
}

/**
 * failFast (SEM B.8.3): once a member holds or ends with an outcome other
 * than completed, every other live member gets an abort mark; the waiter is
 * not marked.
 */
export function planFailFast(members: readonly TreeNode[]): number[] {
  const tripped = members.some(
    (m) => (m.status === "terminal" || m.status === "completing") && m.outcome !== "completed",
  );
  if (!tripped) return [];
  return members
    .filter((m) => m.status !== "terminal" && m.status !== "completing" && !m.abortRequested)
    .map((m) => m.id);
}

/**
 * A scope is idle when no live task is reachable from its roots through
 * ordinary traversal (SEM B.13.3): background subtrees do not count, waiting
 * and completing tasks do.
 */
export function isIdle(roots: readonly TreeNode[], nodes: readonly TreeNode[]): boolean {
  for (const r of roots) {
    if (r.background) continue;
    if (r.status !== "terminal") return false;
    if (ownedLive(r.id, nodes).length > 0) return false;
  }
  return true;
}
