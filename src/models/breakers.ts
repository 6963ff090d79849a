/**
 * Breakers for a router outside a store: the same pure transitions (src/core/breaker.ts) over a
 * map in this process. For tests and single-process use; a router given `store.breakers` shares
 * its breakers with every worker instead (spec §18.6).
 *
 * Invariant: the decisions are decideBreaker's, applied synchronously, so at most one probe is
 * admitted per claim within the process.
 */
import { type BreakerState, CLOSED, decideBreaker } from "../core/breaker.js";
import { type Clock, systemClock } from "../core/clock.js";
import type { BreakerAdmission, BreakerOps, BreakerRecord } from "../store/breakers/ops.js";
import { checkBreakerKey, MAX_BREAKERS_LISTED } from "../store/breakers/ops.js";

export function memoryBreakers(clock: Clock = systemClock): BreakerOps {
  const rows = new Map<string, { s: BreakerState; at: number }>();
  const rec = (key: string): BreakerRecord => {
    const r = rows.get(key);
    return { key, ...(r?.s ?? CLOSED), updatedAt: r?.at ?? clock.now() };
  };
  return {
    async admitBreaker(key, config): Promise<BreakerAdmission> {
      checkBreakerKey(key);
      const now = clock.now();
      const d = decideBreaker(rows.get(key)?.s ?? CLOSED, { kind: "request" }, now, config);
      if (d.kind === "refuse") return { admit: false, until: d.until };
      if (d.kind === "admit" && d.next) rows.set(key, { s: d.next, at: now });
      return { admit: true, probe: d.kind === "admit" && d.probe };
    },
    async reportBreaker(key, ok, probe, config) {
      checkBreakerKey(key);
      const now = clock.now();
      const d = decideBreaker(
        rows.get(key)?.s ?? CLOSED,
        { kind: ok ? "success" : "failure", probe },
        now,
        config,
      );
      if (d.kind === "record" && d.next) rows.set(key, { s: d.next, at: now });
      return rec(key);
    },
    async listBreakers(limit = MAX_BREAKERS_LISTED) {
      return [...rows.keys()].sort().slice(0, limit).map(rec);
    },
    async resetBreaker(key) {
      return rows.delete(key);
    },
  };
}
