/**
 * Each destination's status and lag (spec §21.12), read the same way by the
 * CLI (`ratchet outbox`), /metrics and `GET /api/outbox`. Nothing here carries
 * a secret: the store keeps none (spec §21.6).
 */
import type { DestinationRow, OutboxOps } from "../../store/outbox/ops.js";

/** Lag is counted up to this many facts (spec §21.12). */
export const LAG_COUNT_CAP = 100_000;

export interface DestinationStatus {
  readonly name: string;
  readonly state: DestinationRow["state"];
  readonly cursor: string;
  /** Facts after the cursor, up to LAG_COUNT_CAP (its filter not applied). */
  readonly lagFacts: number;
  /** Age of the oldest fact after the cursor, in seconds (0 when none). */
  readonly lagSeconds: number;
  readonly since: number | null;
  readonly failures: number;
  readonly lastError: string | null;
  readonly nextAt: number | null;
  readonly deadBatch: string | null;
  readonly lastOkAt: number | null;
  readonly holder: string | null;
  readonly delivered: number;
  readonly batches: number;
  readonly failed: number;
}

export async function outboxStatus(
  o: OutboxOps,
): Promise<{ now: number; destinations: DestinationStatus[] }> {
  const [{ now }, rows] = await Promise.all([o.head(), o.destinations()]);
  const destinations: DestinationStatus[] = [];
  for (const d of rows) {
    const lag = await o.backlog(d.cursor, LAG_COUNT_CAP);
    destinations.push({
      name: d.name,
      state: d.state,
      cursor: d.cursor,
      lagFacts: lag.facts,
      lagSeconds: lag.oldestAt === null ? 0 : Math.max(0, (now - lag.oldestAt) / 1000),
      since: d.since,
      failures: d.failures,
      lastError: d.lastError,
      nextAt: d.nextAt,
      deadBatch: d.deadBatch,
      lastOkAt: d.lastOkAt,
      holder: d.leaseUntil !== null && d.leaseUntil > now ? d.holder : null,
      delivered: d.delivered,
      batches: d.batches,
      failed: d.failed,
    });
  }
  return { now, destinations };
}
