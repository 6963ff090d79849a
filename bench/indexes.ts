/**
 * The partial indexes of `ratchet_tasks` that a plain task's claim and completion never enter (the
 * same ten on both stores): pgshape.ts and rowcost.ts drop them to measure what testing their
 * predicates on every rewrite of a row costs.
 */
export const RARE_INDEXES = [
  "wake",
  "dedupe",
  "job",
  "spawn",
  "marked",
  "completing",
  "parked",
  "scope",
  "seat",
  "seat_parked",
].map((n) => `ratchet_tasks_${n}`);
