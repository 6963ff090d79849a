/**
 * Priority with aging, computed once at enqueue. spec §3.5.
 *
 * effective(t) = priority + floor((now − created) / AGING_STEP_MS). Ordering by
 * effective DESC at any single `now` is the same as ordering by
 * created − priority·AGING_STEP_MS ASC, which does not depend on `now`. So the
 * claim reads an index on this key and never computes per row, and aging is
 * applied inside the selection (no top-k re-rank, fixing SEM A.5.7).
 * The floor() makes the two orders differ only inside one 6-minute step, where
 * the key order is the finer (FIFO) one.
 */
export const AGING_STEP_MS = 6 * 60_000;
export const MIN_PRIORITY = -1000;
export const MAX_PRIORITY = 1000;

export function orderKey(createdAt: number, priority: number): number {
  return createdAt - priority * AGING_STEP_MS;
}

export function effectivePriority(createdAt: number, priority: number, now: number): number {
  return priority + Math.floor(Math.max(0, now - createdAt) / AGING_STEP_MS);
}
