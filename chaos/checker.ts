/**
 * The checker: reads the three records of a run and judges the promises of
 * spec §15 against them.
 *
 * - the acknowledgement log: `ack ID` lines the enqueuer appended after
 *   `enqueue()` resolved — what a caller was promised;
 * - the effects ledger: lines the task bodies appended, outside the engine's
 *   transactions (chaos/fixtures/tasks.ts) — what actually ran;
 * - the store, read after the run through the Ratchet API.
 *
 * Each check returns violations naming the promise; none throws on a finding,
 * so one run reports everything it saw.
 */
import Database from "better-sqlite3";
import { Ratchet, type StepRecord, silentLogger, type TaskEvent, type TaskRecord } from "../src/index.js";
import { fileLines } from "./process.js";
import { percentile, type Violation } from "./scenario.js";

export interface StoredTask {
  task: TaskRecord;
  steps: StepRecord[];
  events: TaskEvent[];
}

export interface StepRun {
  task: number;
  step: string;
  attempt: number;
  pid: number;
  nonce: string;
  /** The fencing token of the claim the body ran in. */
  token: number;
}

/** The acknowledged task ids, in acknowledgement order. */
export function readAcks(path: string): number[] {
  return fileLines(path)
    .filter((l) => l.startsWith("ack "))
    .map((l) => Number(l.split(" ")[1]));
}

/** Step runs of the effects ledger, keyed by `task/step`. */
export function readStepRuns(path: string): Map<string, StepRun[]> {
  const out = new Map<string, StepRun[]>();
  for (const l of fileLines(path)) {
    const w = l.split(" ");
    if (w[0] !== "step") continue;
    const run = {
      task: Number(w[1]),
      step: w[2]!,
      attempt: Number(w[3]),
      pid: Number(w[4]),
      nonce: w[5]!,
      token: Number(w[6]),
    };
    const k = `${run.task}/${run.step}`;
    const list = out.get(k) ?? [];
    list.push(run);
    out.set(k, list);
  }
  return out;
}

/** Every task of the store with its steps and events (opened through the engine, then closed). */
export async function readStore(db: string): Promise<Map<number, StoredTask>> {
  const r = await Ratchet.open({ store: `sqlite:${db}`, logger: silentLogger });
  try {
    return await readTasks(r);
  } finally {
    await r.close();
  }
}

/** Every task of an open Ratchet's store with its steps and events, through the public API (any backend). */
export async function readTasks(r: Ratchet): Promise<Map<number, StoredTask>> {
  const out = new Map<number, StoredTask>();
  let before: number | undefined;
  for (;;) {
    const page = await r.list({ limit: 1000, ...(before === undefined ? {} : { before }) });
    for (const t of page) {
      const d = await r.details(t.id);
      out.set(t.id, { task: d.task, steps: d.steps, events: d.events });
    }
    if (page.length < 1000) break;
    before = page[page.length - 1]!.id;
  }
  return out;
}

/** `PRAGMA integrity_check` of the file: "ok" or what SQLite found. */
export function integrityCheck(db: string): string {
  const conn = new Database(db, { readonly: true });
  try {
    const rows = conn.pragma("integrity_check") as { integrity_check: string }[];
    return rows.map((r) => r.integrity_check).join("; ");
  } finally {
    conn.close();
  }
}

/**
 * P1: every acknowledged task exists and is terminal; with `outcome`, every
 * one of them (or those `outcome` selects) ended with it.
 */
export function checkNoLostTask(
  acks: readonly number[],
  store: ReadonlyMap<number, StoredTask>,
  expected: (t: TaskRecord) => string | null = () => "completed",
): Violation[] {
  const out: Violation[] = [];
  for (const id of acks) {
    const s = store.get(id);
    if (!s) {
      out.push({ promise: "P1", detail: `acknowledged task ${id} is not in the store` });
      continue;
    }
    const t = s.task;
    if (t.status !== "terminal") {
      out.push({ promise: "P1", detail: `acknowledged task ${id} (${t.name}) is ${t.status}, not terminal` });
      continue;
    }
    const want = expected(t);
    if (want !== null && t.outcome !== want) {
      out.push({
        promise: "P1",
        detail: `task ${id} (${t.name}) ended ${t.outcome}, expected ${want}: ${t.error?.name}: ${t.error?.message}`,
      });
    }
  }
  return out;
}

export interface StepCheckStats {
  committedSteps: number;
  bodyRuns: number;
  reruns: number;
}

/**
 * P2, P3, P4 for tasks whose steps return `{ a: attempt, p: pid, n: nonce }`
 * (the "chain" task; `stepCount(task)` says how many steps a completed one has):
 * - P3: every committed step has a body run in the ledger whose nonce is the
 *   committed one (at least once); no step body ran twice in one claim (claims
 *   are told apart by fencing token); a rerun only happened in a claim earlier
 *   than the committing one — a claim that was superseded, so it lost its
 *   lease (or ended) before its commit.
 * - P2: a body never ran in a claim after the one that committed it (the
 *   replay returned the stored result); results seen committed during the run
 *   (`seen`) are unchanged at the end.
 * - P4: the committed record names the claim that ran the body; a completed
 *   task's result comes from its latest claim (the outcome write was not a
 *   superseded holder's).
 */
export function checkSteps(
  store: ReadonlyMap<number, StoredTask>,
  runs: ReadonlyMap<string, StepRun[]>,
  stepCount: (t: TaskRecord) => number | null,
  seen: ReadonlyMap<string, string> = new Map(),
): { violations: Violation[]; stats: StepCheckStats } {
  const out: Violation[] = [];
  const stats: StepCheckStats = { committedSteps: 0, bodyRuns: 0, reruns: 0 };
  for (const { task, steps } of store.values()) {
    const n = stepCount(task);
    if (n === null) continue;
    const committed = new Map(steps.map((s) => [s.name, s]));
    if (task.outcome === "completed") {
      for (let i = 0; i < n; i++)
        if (!committed.has(`s${i}`))
          out.push({ promise: "P2", detail: `completed task ${task.id} has no committed step s${i}` });
      const res = task.result as { a?: number } | null;
      if (res?.a !== task.attempts)
        out.push({
          promise: "P4",
          detail: `task ${task.id}: result written by claim ${res?.a}, but its latest claim is ${task.attempts}`,
        });
    }
    for (const s of steps) {
      stats.committedSteps++;
      const key = `${task.id}/${s.name}`;
      const list = runs.get(key) ?? [];
      stats.bodyRuns += list.length;
      stats.reruns += Math.max(0, list.length - 1);
      const value = s.result as { a: number; n: string };
      const before = seen.get(key);
      if (before !== undefined && before !== JSON.stringify(s.result))
        out.push({
          promise: "P2",
          detail: `step ${key} changed after commit: ${before} → ${JSON.stringify(s.result)}`,
        });
      const source = list.find((r) => r.nonce === value.n);
      if (!source) {
        out.push({
          promise: "P3",
          detail: `step ${key}: committed result ${JSON.stringify(value)} matches no body run`,
        });
        continue;
      }
      if (s.attempt !== source.attempt || value.a !== source.attempt)
        out.push({
          promise: "P4",
          detail: `step ${key}: record says claim ${s.attempt}, the body that produced it ran in claim ${source.attempt}`,
        });
      const tokens = list.map((r) => r.token);
      if (new Set(tokens).size !== tokens.length)
        out.push({
          promise: "P3",
          detail: `step ${key}: body ran twice in one claim (tokens ${tokens.join(",")})`,
        });
      for (const r of list)
        if (r.token > source.token)
          out.push({
            promise: "P2",
            detail: `step ${key}: body ran again in claim ${r.token} after claim ${source.token} committed it`,
          });
    }
  }
  return { violations: out, stats };
}

export interface Kill {
  workerId: string;
  at: number;
}

/**
 * P5: each task a killed worker held is claimed again within `boundMs` of the
 * kill (lease + poll interval + a stated slack), and never before its lease
 * expired (spec §3.3). Returns the recovery times (reclaim − kill).
 */
export function checkRecovery(
  store: ReadonlyMap<number, StoredTask>,
  kills: readonly Kill[],
  boundMs: number,
): { violations: Violation[]; recoveries: number[]; liveHolderReclaims: number } {
  const killedAt = new Map(kills.map((k) => [k.workerId, k.at]));
  const out: Violation[] = [];
  const recoveries: number[] = [];
  let liveHolderReclaims = 0;
  for (const { task, events } of store.values()) {
    for (const e of events) {
      if (e.kind !== "reclaimed") continue;
      const d = e.detail as { previousHolder: string | null; leaseUntil: number };
      if (e.at < d.leaseUntil)
        out.push({
          promise: "P4",
          detail: `task ${task.id} reclaimed at ${e.at}, before its lease ended ${d.leaseUntil}`,
        });
      const k = d.previousHolder === null ? undefined : killedAt.get(d.previousHolder);
      if (k === undefined || k > d.leaseUntil) {
        liveHolderReclaims++;
        continue;
      }
      const ms = e.at - k;
      recoveries.push(ms);
      if (ms > boundMs)
        out.push({
          promise: "P5",
          detail: `task ${task.id} reclaimed ${ms} ms after its holder was killed (bound ${boundMs})`,
        });
    }
  }
  return { violations: out, recoveries, liveHolderReclaims };
}

export function recoveryStats(recoveries: readonly number[]): Record<string, number> {
  return {
    reclaims: recoveries.length,
    "recovery p50 ms": percentile(recoveries, 50),
    "recovery max ms": recoveries.length ? Math.max(...recoveries) : 0,
  };
}

/**
 * P7: a worker process printed nothing on stderr (no unhandled rejection, no
 * raw driver error, no logged engine error). `expectedDeath` exempts the
 * processes a poison task took down on purpose.
 */
export function checkStderr(
  procs: readonly { pid: number; stderr: string }[],
  expectedDeath: (pid: number) => boolean = () => false,
): Violation[] {
  return procs
    .filter((p) => p.stderr.trim() !== "" && !expectedDeath(p.pid))
    .map((p) => ({
      promise: "P7" as const,
      detail: `process ${p.pid} wrote to stderr: ${p.stderr.slice(0, 600)}`,
    }));
}
