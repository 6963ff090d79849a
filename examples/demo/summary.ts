/** What the demo prints at the start of a rerun and at the end. */
import { relative } from "node:path";
import type { JobStatus, Ratchet, TaskRecord } from "../../src/index.js";
import type { LedgerCounts } from "./ledger.js";
import { JOB } from "./tasks.js";

export interface DemoSummary {
  store: string;
  reportId: number;
  outcome: string | null;
  resumed: boolean;
  enqueued: number;
  tasks: { total: number; completed: number; completedThisRun: number; failed: number };
  retries: { overloaded: number; rateLimited: number };
  seconds: number;
  tasksPerSecond: number;
  stepBodies: { thisRun: number; earlierRuns: number; total: number; rerunAfterCrash: number };
  report: string | null;
}

export interface SummaryInput {
  store: string;
  report: TaskRecord;
  resumed: boolean;
  enqueued: number;
  total: number;
  completedAtStart: number;
  end: JobStatus;
  retries: { overloaded: number; rateLimited: number };
  seconds: number;
  ledger: LedgerCounts;
}

export function buildSummary(i: SummaryInput): DemoSummary {
  const completed = i.end.byOutcome.completed ?? 0;
  const failed = Object.entries(i.end.byOutcome).reduce(
    (a, [o, n]) => a + (o === "completed" ? 0 : (n ?? 0)),
    0,
  );
  const result = i.report.result as { report?: unknown } | null;
  return {
    store: i.store,
    reportId: i.report.id,
    outcome: i.report.outcome,
    resumed: i.resumed,
    enqueued: i.enqueued,
    tasks: { total: i.total, completed, completedThisRun: completed - i.completedAtStart, failed },
    retries: { ...i.retries },
    seconds: Math.round(i.seconds * 100) / 100,
    tasksPerSecond: i.seconds > 0 ? Math.round((completed - i.completedAtStart) / i.seconds) : 0,
    stepBodies: {
      thisRun: i.ledger.thisRun,
      earlierRuns: i.ledger.earlier,
      total: i.ledger.thisRun + i.ledger.earlier,
      rerunAfterCrash: i.ledger.rerun,
    },
    report: result && typeof result.report === "string" ? result.report : null,
  };
}

/** Tasks the previous run held when it died: they are reclaimed once their leases expire. */
export async function describeHeld(ratchet: Ratchet): Promise<string | undefined> {
  const running = await ratchet.list({ job: JOB, status: "running", limit: 1000 });
  if (running.length === 0) return undefined;
  const last = Math.max(...running.map((t) => t.leaseUntil ?? 0));
  const secs = Math.max(0, (last - Date.now()) / 1000);
  return `${running.length} tasks were running when the last run stopped; they are reclaimed as their leases expire (within ${secs.toFixed(1)} s)`;
}

export function printSummary(s: DemoSummary, rec: TaskRecord): void {
  const out = (t: string) => process.stdout.write(`${t}\n`);
  const b = s.stepBodies;
  const retries = s.retries.overloaded + s.retries.rateLimited;
  const rows: [string, string][] = [
    ["tasks completed", `${s.tasks.completed} of ${s.tasks.total} (${s.tasks.completedThisRun} in this run)`],
    ["failed", String(s.tasks.failed)],
    [
      "model retries",
      `${retries} (${s.retries.overloaded} overloaded, ${s.retries.rateLimited} rate limited)`,
    ],
    ["time", `${s.seconds.toFixed(2)} s, ${s.tasksPerSecond} tasks/s`],
    ["step bodies run", `${b.thisRun} in this run, ${b.earlierRuns} in earlier runs, ${b.total} in total`],
    [
      "re-run after crash (at-least-once)",
      `${b.rerunAfterCrash} (bodies that ran, but whose commit a kill lost)`,
    ],
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  out("");
  for (const [k, v] of rows) out(`  ${k.padEnd(w)}  ${v}`);
  out("");
  if (rec.outcome === "completed" && s.report) {
    const lines = s.report.split("\n");
    out(`report (task ${s.reportId}), first lines:`);
    for (const l of lines.slice(0, 4)) out(`  ${l}`);
    if (lines.length > 4) out(`  … ${lines.length - 4} more lines`);
  } else {
    out(`the report ended ${rec.outcome}: ${rec.error?.message ?? ""}`);
    out(
      "run the demo again: failed documents get new tasks (their dedupe keys were released), the rest is kept",
    );
  }
  const cli = relative(process.cwd(), process.argv[1] ?? "") || "dist/src/cli/main.js";
  out("");
  out(`look closer:  node ${cli} show ${s.reportId} --store ${s.store}`);
  out(`              node ${cli} ls --job ${JOB} --status failed --store ${s.store}`);
}
