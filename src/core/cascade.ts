/**
 * Failure cascade over `needs`. spec §6.1, §6.3.
 * Pure: the store reads the dependents reachable from a root (id, status,
 * outcome, needs) and applies what this returns.
 */
import { InvalidStateError } from "../errors.js";
import type { Outcome, Status } from "./model.js";

export interface DependentNode {
  id: number;
  status: Status;
  outcome: Outcome | null;
  /** The ids this task needs. */
  needs: readonly number[];
}

/**
 * Every live transitive dependent of `rootId` becomes upstream_failed.
 * Walks with a visited set and no depth limit (fixes SEM A.7.4's depth-25 cap).
 * Invariant: terminal dependents are never touched.
 */
export function planUpstreamFailure(rootId: number, dependents: readonly DependentNode[]): number[] {
  const byNeed = new Map<number, DependentNode[]>();
  for (const d of dependents) {
    for (const n of d.needs) {
      const list = byNeed.get(n);
      if (list) list.push(d);
      else byNeed.set(n, [d]);
    }
  }
  const visited = new Set<number>([rootId]);
  const queue = [rootId];
  const out: number[] = [];
  while (queue.length > 0) {
    const id = queue.shift()!;
    for (const d of byNeed.get(id) ?? []) {
      if (visited.has(d.id)) continue;
      visited.add(d.id);
      if (d.status === "terminal") continue;
      out.push(d.id);
      queue.push(d.id);
    }
  }
  return out.sort((a, b) => a - b);
}

/**
 * retry(root): the upstream_failed dependents reachable through
 * upstream_failed tasks go back to waiting on their needs. A dependent that
 * also needs another task which ended badly (and is not being reset) stays
 * upstream_failed: resetting it would leave it waiting for ever.
 * `outcomeOf(id)` is null for a live task.
 * Invariant: every reset task has needsPending ≥ 1 (the root at least).
 */
export function planRetrySubtree(
  rootId: number,
  dependents: readonly DependentNode[],
  outcomeOf: (id: number) => Outcome | null,
): { id: number; needsPending: number }[] {
  const byNeed = new Map<number, DependentNode[]>();
  for (const d of dependents) for (const n of d.needs) byNeed.set(n, [...(byNeed.get(n) ?? []), d]);
  const reset = new Map<number, DependentNode>();
  const queue = [rootId];
  while (queue.length > 0) {
    const id = queue.shift()!;
    for (const d of byNeed.get(id) ?? []) {
      if (reset.has(d.id) || d.outcome !== "upstream_failed") continue;
      reset.set(d.id, d);
      queue.push(d.id);
    }
  }
  const blocks = (n: number) => {
    if (n === rootId || reset.has(n)) return false;
    const o = outcomeOf(n);
    return o !== null && o !== "completed";
  };
  for (let changed = true; changed; ) {
    changed = false;
    for (const d of reset.values()) {
      if (d.needs.some(blocks)) {
        reset.delete(d.id);
        changed = true;
      }
    }
  }
  const out: { id: number; needsPending: number }[] = [];
  for (const d of reset.values()) {
    const pending = d.needs.filter((n) => n === rootId || reset.has(n) || outcomeOf(n) === null).length;
    out.push({ id: d.id, needsPending: pending });
  }
  return out.sort((a, b) => a.id - b.id);
}

/** spec §6.3: a retry would revive a dependent whose dedupe key another task holds now. */
export function keyTaken(root: number, dependent: number, key: string, holder: number): InvalidStateError {
  return new InvalidStateError(
    `retrying task ${root} would revive its dependent task ${dependent}, whose dedupe key "${key}" is now held by task ${holder}`,
  );
}
