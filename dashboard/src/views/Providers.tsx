/**
 * Providers (spec §18.6, §18.9): each circuit breaker per provider+model with its state (from
 * GET /api/providers), and the usage ledger's totals and totals per provider and model (from
 * GET /api/usage). Live by polling once a second while mounted.
 */
import { useState } from "preact/hooks";
import type { BreakerRecord } from "../../../src/store/breakers/ops.js";
import type { ModelUsage, UsageTotals } from "../../../src/store/usage/ops.js";
import { call } from "../api.js";
import { time } from "../format.js";
import { usePoll } from "../poll.js";
import { usd } from "./Conversations.js";

interface UsageReply {
  totals: UsageTotals;
  byModel: ModelUsage[];
}

function Breakers({ list }: { list: BreakerRecord[] }) {
  if (list.length === 0)
    return (
      <p class="muted" data-section="breakers">
        Every breaker is closed (none has failed).
      </p>
    );
  return (
    <table class="tasks" data-section="breakers">
      <thead>
        <tr>
          <th>Provider/model</th>
          <th>State</th>
          <th>Failures</th>
          <th>Opened</th>
          <th>Updated</th>
        </tr>
      </thead>
      <tbody>
        {list.map((b) => (
          <tr key={b.key} data-breaker={b.key}>
            <td>{b.key}</td>
            <td>
              <span class={`tag breaker-${b.state}`} data-field="breaker-state">
                {b.state}
              </span>
            </td>
            <td data-field="failures">{b.failures}</td>
            <td>{b.state === "closed" ? "" : time(b.openedAt)}</td>
            <td>{time(b.updatedAt)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function UsageRow({ u, label }: { u: UsageTotals; label: string }) {
  return (
    <>
      <td>{label}</td>
      <td data-field="responses">{u.responses}</td>
      <td data-field="failed">{u.failed}</td>
      <td data-field="input">{u.input}</td>
      <td data-field="output">{u.output}</td>
      <td data-field="cached">{u.cached}</td>
      <td data-field="reasoning">{u.reasoning}</td>
      <td data-field="cost">{usd(u.cost)}</td>
    </>
  );
}

export function Providers() {
  const [breakers, setBreakers] = useState<BreakerRecord[] | null>(null);
  const [usage, setUsage] = useState<UsageReply | null>(null);
  const error = usePoll(async () => {
    const [b, u] = await Promise.all([
      call<{ breakers: BreakerRecord[] }>("/api/providers"),
      call<UsageReply>("/api/usage"),
    ]);
    setBreakers(b.breakers);
    setUsage(u);
  }, []);
  if (!breakers || !usage) return <p class="muted">{error ?? "Loading providers…"}</p>;
  return (
    <div data-view="providers">
      <h2>Providers</h2>
      <h3>Circuit breakers</h3>
      <Breakers list={breakers} />
      <h3>Usage</h3>
      <table class="tasks" data-section="usage">
        <thead>
          <tr>
            <th />
            <th>Responses</th>
            <th>Failed</th>
            <th>Input</th>
            <th>Output</th>
            <th>Cached</th>
            <th>Reasoning</th>
            <th>Cost</th>
          </tr>
        </thead>
        <tbody>
          <tr data-usage="total">
            <UsageRow u={usage.totals} label="total" />
          </tr>
          {usage.byModel.map((m) => (
            <tr key={`${m.provider}/${m.model}`} data-usage={`${m.provider}/${m.model}`}>
              <UsageRow u={m} label={`${m.provider}/${m.model}`} />
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
