/** GET /metrics: Prometheus text format from stats and from the endings the server saw (both backends). */
import { describe, expect, it } from "vitest";
import { BUCKETS, escapeLabel } from "../../src/server/metrics.js";
import { drain, forEachBackend, openRatchet } from "../engine/helpers.js";
import { startServer, TASKS } from "./kit.js";

/** Every non-comment line is `name{labels} value` with a numeric value; every family has HELP and TYPE. */
function parse(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  const typed = new Set<string>();
  for (const line of text.trimEnd().split("\n")) {
    const type = /^# TYPE (\w+) (gauge|counter|histogram)$/.exec(line);
    if (type) typed.add(type[1]!);
    if (line.startsWith("#")) {
      expect(line).toMatch(/^# (HELP|TYPE) \w+ .+$/);
      continue;
    }
    const m = /^(\w+)(\{(?:\w+="(?:[^"\\\n]|\\.)*",?)*\})? (-?[\d.e+]+|\+Inf|NaN)$/.exec(line);
    expect(m, `malformed line: ${line}`).not.toBeNull();
    const family = m![1]!.replace(/_(bucket|sum|count)$/, "");
    expect(typed.has(family) || typed.has(m![1]!), `no TYPE before ${line}`).toBe(true);
    samples.set(`${m![1]}${m![2] ?? ""}`, Number(m![3]));
  }
  return samples;
}

describe("metrics format", () => {
  it("HTTP API: label values escape backslash, double quote and newline", () => {
    expect(escapeLabel('a"b\\c\nd')).toBe('a\\"b\\\\c\\nd');
  });
});

forEachBackend(() => {
  it("HTTP API: /metrics reports tasks by queue and status, terminal by outcome, ends, retries and latency histograms", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    await r.enqueue("greet", { name: "a" });
    await r.enqueue("greet", { name: "b" });
    await r.enqueue("boom", null);
    await r.enqueue("greet", { name: "later" }, { queue: "side", delayMs: 3_600_000 });
    await drain(r);
    const res = await s.call("/metrics");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const m = parse(await res.text());
    expect(m.get('ratchet_tasks{queue="default",status="terminal"}')).toBe(3);
    expect(m.get('ratchet_tasks{queue="side",status="waiting"}')).toBe(1);
    expect(m.get('ratchet_tasks_terminal{queue="default",outcome="completed"}')).toBe(2);
    expect(m.get('ratchet_tasks_terminal{queue="default",outcome="failed"}')).toBe(1);
    expect(m.get('ratchet_task_ends_total{queue="default",outcome="completed"}')).toBe(2);
    expect(m.get('ratchet_task_ends_total{queue="default",outcome="failed"}')).toBe(1);
    expect(m.get('ratchet_task_retries_total{queue="default"}')).toBe(0);
    const run = 'ratchet_task_run_seconds_count{queue="default",outcome="completed"}';
    expect(m.get(run)).toBe(2);
    expect(m.get('ratchet_task_run_seconds_bucket{queue="default",outcome="completed",le="+Inf"}')).toBe(2);
    expect(m.get('ratchet_task_start_delay_seconds_count{queue="default"}')).toBe(3);
    // Buckets are cumulative.
    let prev = 0;
    for (const b of BUCKETS) {
      const v = m.get(`ratchet_task_run_seconds_bucket{queue="default",outcome="completed",le="${b}"}`)!;
      expect(v).toBeGreaterThanOrEqual(prev);
      prev = v;
    }
    expect(m.get("ratchet_metrics_sample_overflows_total")).toBe(0);

    // A second scrape counts only new endings: a retried task that ends again counts again.
    const failed = (await r.list({ outcome: "failed" }))[0]!;
    await r.retry(failed.id);
    await drain(r);
    const again = parse(await (await s.call("/metrics")).text());
    expect(again.get('ratchet_task_ends_total{queue="default",outcome="completed"}')).toBe(2);
    expect(again.get('ratchet_task_ends_total{queue="default",outcome="failed"}')).toBe(2);
    expect(again.get(run)).toBe(2);
  });
});
