/** Queues at a glance: counts by status and outcome (each a link to the list), and the rate chart. */

import { useStats } from "../live.js";
import { listHref } from "../router.js";
import { OUTCOMES, type QueueStats, STATUSES } from "../types.js";
import { ThroughputChart } from "./Chart.js";

function QueueCard({ q }: { q: QueueStats }) {
  const live = STATUSES.filter((s) => s !== "terminal");
  const total = Object.values(q.byStatus).reduce((a, b) => a + (b ?? 0), 0);
  return (
    <section class="card queue" data-queue={q.queue}>
      <h3>
        <a href={listHref({ queue: q.queue })}>{q.queue}</a> <span class="muted">{total} tasks</span>
      </h3>
      <div class="counts">
        {live.map((s) => (
          <a
            key={s}
            class={`count status-${s}`}
            href={listHref({ queue: q.queue, status: s })}
            data-count={s}
          >
            <strong>{q.byStatus[s] ?? 0}</strong> {s}
          </a>
        ))}
      </div>
      <div class="counts">
        {OUTCOMES.map((o) => (
          <a
            key={o}
            class={`count outcome-${o}`}
            href={listHref({ queue: q.queue, status: "terminal", outcome: o })}
            data-count={o}
          >
            <strong>{q.byOutcome[o] ?? 0}</strong> {o.replace("_", " ")}
          </a>
        ))}
      </div>
    </section>
  );
}

export function Overview() {
  const stats = useStats();
  return (
    <div data-view="overview">
      <h2>Queues</h2>
      {stats === null && <p class="muted">Waiting for the first update…</p>}
      {stats !== null && stats.queues.length === 0 && <p class="muted">No tasks yet.</p>}
      <div class="queues">
        {stats?.queues.map((q) => (
          <QueueCard key={q.queue} q={q} />
        ))}
      </div>
      <h2>Throughput</h2>
      <ThroughputChart />
    </div>
  );
}
