/**
 * `ratchet demo`: 300 documents are fetched, summarised by a flaky,
 * rate-limited model, and joined into a report — in one job that survives
 * being killed at any moment.
 *
 * Run it, kill it (or pass --crash-after N), run it again: the second run
 * resumes, committed steps are not executed again, and the side ledger
 * (next to the database) shows how many step bodies ran in each run.
 */
import { rmSync, writeSync } from "node:fs";
import { resolve } from "node:path";
import {
  type BatchEntry,
  ConfigError,
  type JobStatus,
  Ratchet,
  silentLogger,
  type TaskRecord,
} from "../../src/index.js";
import { Ledger } from "./ledger.js";
import { StatusLine } from "./progress.js";
import { TokenBucket } from "./sim.js";
import { buildSummary, type DemoSummary, describeHeld, printSummary } from "./summary.js";
import { type DemoWorld, demoTasks, JOB } from "./tasks.js";

export type { DemoSummary } from "./summary.js";

export const DEMO_STORE = "sqlite:./ratchet-demo.db";
/**
 * The model's rate limit: 400 calls per second, bursts of 20, and a caller
 * waits at most 100 ms for a token. At the default concurrency (16) the
 * model runs at its limit without refusals; from about --concurrency 60 the
 * excess is refused with 429s and retried with backoff, and under heavy
 * overload a document can run out of attempts (a rerun retries it).
 */
const MODEL_RATE = 400;
const MODEL_BURST = 20;
const MODEL_MAX_WAIT_MS = 100;
/** Short leases, so a rerun after a kill reclaims the dead run's tasks within seconds. */
const LEASE_GRACE_MS = 1_000;

export interface DemoOptions {
  store: string;
  fresh: boolean;
  docs: number;
  concurrency: number;
  seed: number;
  /** SIGKILL this process once this many tasks have finished in this run. */
  crashAfter?: number;
  json: boolean;
}

function sqlitePath(store: string): string | undefined {
  const p = store.startsWith("sqlite:") ? store.slice("sqlite:".length) : "";
  return p && p !== ":memory:" ? resolve(p) : undefined;
}

function ledgerPath(db: string | undefined): string | undefined {
  return db ? `${db.replace(/\.(db|sqlite3?)$/, "")}.ledger` : undefined;
}

function removeFresh(db: string | undefined): void {
  if (!db) return;
  for (const f of [db, `${db}-wal`, `${db}-shm`, ledgerPath(db)!]) rmSync(f, { force: true });
}

/** The job: per document fetch-doc → summarize, then one report that needs every summary. */
function entries(docs: number, defs: ReturnType<typeof demoTasks>): BatchEntry[] {
  const out: BatchEntry[] = [];
  for (let i = 1; i <= docs; i++) {
    out.push({ task: defs.fetchDoc, input: { doc: i }, key: `fetch-${i}`, dedupe: `demo:fetch:${i}` });
    out.push({
      task: defs.summarize,
      input: { doc: i },
      key: `sum-${i}`,
      needs: [`fetch-${i}`],
      dedupe: `demo:sum:${i}`,
    });
  }
  const all = Array.from({ length: docs }, (_, i) => `sum-${i + 1}`);
  out.push({ task: defs.report, input: { docs }, key: "report", needs: all, dedupe: "demo:report" });
  return out;
}

/** The world the tasks run in; crashes the process on purpose when asked to. */
function createWorld(o: DemoOptions, ledger: Ledger, beforeKill: () => void): DemoWorld {
  let finished = 0;
  return {
    seed: o.seed,
    ledger,
    limiter: new TokenBucket(MODEL_RATE, MODEL_BURST, MODEL_MAX_WAIT_MS),
    errors: { overloaded: 0, rateLimited: 0 },
    onTaskFinished() {
      finished++;
      if (o.crashAfter === undefined || finished < o.crashAfter) return;
      beforeKill();
      // writeSync: the message must be out before the kill, whatever stderr is.
      writeSync(
        2,
        `crash-after ${o.crashAfter}: ${finished} tasks finished; killing this process (SIGKILL)\n`,
      );
      process.kill(process.pid, "SIGKILL");
    },
  };
}

/** Refuses a database that holds a demo of another size: the dedupe keys would mix two jobs. */
async function checkExisting(ratchet: Ratchet, o: DemoOptions): Promise<JobStatus> {
  const before = await ratchet.jobStatus(JOB);
  if (before.total === 0) return before;
  const [old] = await ratchet.list({ job: JOB, name: "report", limit: 1 });
  const docs = (old?.input as { docs?: number } | undefined)?.docs;
  if (docs !== undefined && docs !== o.docs) {
    throw new ConfigError(`${o.store} holds a demo of ${docs} documents; pass --docs ${docs}, or --fresh`);
  }
  return before;
}

export async function runDemo(o: DemoOptions): Promise<DemoSummary> {
  const say = (text: string) => {
    if (!o.json) process.stdout.write(`${text}\n`);
  };
  const db = sqlitePath(o.store);
  if (o.fresh) removeFresh(db);
  const ledger = new Ledger(ledgerPath(db));
  let status: StatusLine | undefined;
  const world = createWorld(o, ledger, () => status?.breakLine());
  const defs = demoTasks(world);
  const ratchet = await Ratchet.open({ store: o.store, logger: silentLogger, leaseGraceMs: LEASE_GRACE_MS });
  world.ratchet = ratchet;
  try {
    for (const d of Object.values(defs)) ratchet.register(d);
    const total = 2 * o.docs + 1;
    const before = await checkExisting(ratchet, o);
    say(
      "Ratchet demo: documents are fetched, summarised by a flaky, rate-limited model, and joined into a report.",
    );
    say(`store ${o.store} · ${o.docs} documents · seed ${o.seed} · concurrency ${o.concurrency}`);
    if (before.total > 0) {
      const done = before.byOutcome.completed ?? 0;
      say(`resuming: ${done} of ${total} tasks already completed; their committed steps will not run again`);
      const held = await describeHeld(ratchet);
      if (held) say(held);
    }

    // One transaction; with the dedupe keys a rerun adds nothing (or only what failed before).
    const reportId = (await ratchet.enqueueJob(JOB, entries(o.docs, defs))).at(-1)!;
    const after = await ratchet.jobStatus(JOB);
    const enqueued = after.total - before.total;
    if (enqueued === 0)
      say("nothing new to enqueue: the dedupe keys (demo:fetch:N, demo:sum:N, demo:report) all matched");
    else say(`enqueued ${enqueued} tasks in job "${JOB}": fetch-doc → summarize → report`);

    const completedAtStart = after.byOutcome.completed ?? 0;
    const t0 = performance.now();
    let report = (await ratchet.get(reportId))!;
    if (report.status === "terminal") {
      const at = new Date(report.endedAt!).toISOString();
      say(
        `the report is already done (task ${reportId}, ${report.outcome} at ${at}); use --fresh to start over`,
      );
    } else {
      if (!o.json) {
        status = new StatusLine({
          ratchet,
          job: JOB,
          total,
          completedAtStart,
          retries: () => world.errors.overloaded + world.errors.rateLimited,
        });
      }
      report = await work(ratchet, o.concurrency, reportId, status);
    }
    const summary = buildSummary({
      store: o.store,
      report,
      resumed: before.total > 0,
      enqueued,
      total,
      completedAtStart,
      end: await ratchet.jobStatus(JOB),
      retries: world.errors,
      seconds: (performance.now() - t0) / 1000,
      ledger: ledger.counts(),
    });
    if (o.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
    else printSummary(summary, report);
    return summary;
  } finally {
    await ratchet.close();
  }
}

/** Runs a worker in this process until the report is terminal. */
async function work(
  ratchet: Ratchet,
  concurrency: number,
  reportId: number,
  status: StatusLine | undefined,
): Promise<TaskRecord> {
  await ratchet.start({ concurrency });
  status?.start();
  try {
    return await ratchet.waitFor(reportId, { timeoutMs: 10 * 60_000 });
  } finally {
    await status?.stop();
    await ratchet.stop();
  }
}
