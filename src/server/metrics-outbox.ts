/**
 * The outbox's part of /metrics (spec §21.12): per destination, its lag in
 * facts and in seconds, its delivered facts and failed deliveries (counters
 * kept in the store, so every server reports the same, and they only grow
 * until the destination is removed), and whether it is dead-lettered.
 */
import { outboxStatus } from "../dispatch/outbox/status.js";
import type { Ratchet } from "../engine/ratchet.js";
import { family, labels } from "./metrics.js";

export async function outboxMetrics(out: string[], ratchet: Ratchet): Promise<void> {
  const { destinations } = await outboxStatus(ratchet.store.outbox);
  const each = (
    name: string,
    type: string,
    help: string,
    value: (d: (typeof destinations)[number]) => number,
  ) => {
    family(out, name, type, help);
    for (const d of destinations) out.push(`${name}${labels({ destination: d.name })} ${value(d)}`);
  };
  each(
    "ratchet_outbox_lag_facts",
    "gauge",
    "Facts after the destination's cursor (counted up to 100,000).",
    (d) => d.lagFacts,
  );
  each(
    "ratchet_outbox_lag_seconds",
    "gauge",
    "Age of the oldest fact after the destination's cursor.",
    (d) => d.lagSeconds,
  );
  each(
    "ratchet_outbox_delivered_total",
    "counter",
    "Facts the destination's sink accepted.",
    (d) => d.delivered,
  );
  each(
    "ratchet_outbox_failures_total",
    "counter",
    "Deliveries to the destination that failed.",
    (d) => d.failed,
  );
  each(
    "ratchet_outbox_dead",
    "gauge",
    "1 while the destination is dead-lettered (it blocks), else 0.",
    (d) => (d.state === "dead" ? 1 : 0),
  );
}
