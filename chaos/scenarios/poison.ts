/**
 * Scenario 7, poison tasks: among normal "chain" tasks, "poison" tasks that
 * take their worker down on every run — `process.exit`, an endless synchronous
 * loop, or allocation until the heap limit (`--max-old-space-size` on every
 * worker) kills the process. Dead workers are replaced; a worker whose event
 * loop stops answering (the endless loop) is killed by a liveness probe, as a
 * supervisor would. P6: each poison task ends `failed` after exactly
 * `maxAttempts` claims (spec §5.4) and never runs again; every normal task
 * completes (P1) with P2–P4 intact.
 */
import {
  checkNoLostTask,
  checkStderr,
  checkSteps,
  integrityCheck,
  readAcks,
  readStepRuns,
  readStore,
  type StoredTask,
} from "../checker.js";
import { Enqueuer } from "../enqueuer.js";
import { POISON_MAX_ATTEMPTS, type PoisonKind } from "../fixtures/tasks.js";
import { WorkerPool } from "../pool.js";
import { fileLines, Sandbox } from "../process.js";
import { pause, Rng, type ScenarioConfig, type ScenarioResult, type Violation } from "../scenario.js";

const MAX_MS = 2_000;
const KINDS: PoisonKind[] = ["exit", "loop", "oom"];
/** A worker silent this long (it prints "alive" every 200 ms) is stuck. */
const SILENT_MS = 1_500;
const HEAP_MB = 96;
const STEPS = 3;

export async function poison(c: ScenarioConfig): Promise<ScenarioResult> {
  const t0 = Date.now();
  const perKind = c.full ? 3 : 1;
  const normal = c.rounds ?? (c.full ? 300 : 30);
  const rng = new Rng(c.seed);
  const sb = new Sandbox();
  const pool = new WorkerPool(sb, {
    concurrency: 2,
    maxMs: MAX_MS,
    graceMs: 300,
    pollMs: 50,
    nodeArgs: [`--max-old-space-size=${HEAP_MB}`],
  });
  const violations: Violation[] = [];
  let enq: Enqueuer | undefined;
  try {
    enq = await Enqueuer.open(sb.db, sb.acks, MAX_MS);
    const jobs: { name: string; input: unknown }[] = [];
    for (const kind of KINDS)
      for (let i = 0; i < perKind; i++) jobs.push({ name: "poison", input: { kind } });
    for (let i = 0; i < normal; i++)
      jobs.push({ name: "chain", input: { steps: STEPS, ms: rng.int(10, 40) } });
    // Shuffle (seeded) so poison tasks sit among normal ones in claim order.
    for (let i = jobs.length - 1; i > 0; i--) {
      const j = rng.int(0, i);
      [jobs[i], jobs[j]] = [jobs[j]!, jobs[i]!];
    }
    for (const j of jobs) await enq.enqueue(j.name, j.input);
    await pool.start(3);
    const deadline = Date.now() + (c.full ? 600_000 : 120_000);
    for (;;) {
      pool.replaceDead();
      pool.probe(SILENT_MS);
      if ((await enq.terminal()) >= enq.acked) break;
      if (Date.now() > deadline) {
        violations.push({ promise: "P6", detail: `not every task is terminal after ${Date.now() - t0} ms` });
        break;
      }
      await pause(100);
    }
    const codes = await pool.stopAll();
    if (codes.some((x) => x !== 0))
      violations.push({ promise: "P7", detail: `graceful stop exit codes ${codes.join(",")}` });
    violations.push(...enq.violations);
    await enq.close();
    enq = undefined;

    const store = await readStore(sb.db);
    violations.push(
      ...checkNoLostTask(readAcks(sb.acks), store, (t) => (t.name === "poison" ? "failed" : "completed")),
    );
    const pidOf = new Map(
      pool.all.filter((w) => w.workerId !== undefined).map((w) => [w.workerId!, w.pid] as const),
    );
    violations.push(...checkPoison(store, fileLines(sb.effects), pidOf));
    const steps = checkSteps(store, readStepRuns(sb.effects), (t) => (t.name === "chain" ? STEPS : null));
    violations.push(...steps.violations);
    const died = pool.all.filter((w) => !w.killed && w.child.exitCode !== 0);
    // A worker a poison task took down may print its death (the V8 OOM report); the others must be silent.
    violations.push(...checkStderr(pool.all, (pid) => died.some((w) => w.pid === pid)));
    const integrity = integrityCheck(sb.db);
    if (integrity !== "ok") violations.push({ promise: "P1", detail: `integrity_check: ${integrity}` });
    return {
      name: "poison",
      seed: c.seed,
      ms: Date.now() - t0,
      violations,
      stats: {
        "poison tasks": KINDS.length * perKind,
        "normal tasks": normal,
        "workers died": died.length,
        "hung workers killed": pool.hung.length,
        // Runs of the endless-loop poison: each hangs its process until the probe kills it. A poison
        // task claimed beside another may lose every claim's process before it starts (see checkPoison).
        "loop poison runs": fileLines(sb.effects).filter((l) => /^poison \d+ loop /.test(l)).length,
        "oom deaths": died.filter((w) => w.child.signalCode === "SIGABRT" || w.child.exitCode === 134).length,
        "normal reruns": steps.stats.reruns,
      },
    };
  } finally {
    await enq?.close().catch(() => {});
    await sb.cleanup(c.keep);
  }
}

/**
 * P6: each poison task failed after exactly maxAttempts claims (spec §5.4), and ran its code at most
 * once per claim. A claim in which it did not run must have been held by a worker that another
 * poison task took down: with two slots per worker, a poison task claimed beside another (or
 * reclaimed beside it, their leases having expired together) may lose its process before its own
 * code starts. The holder of claim a is the `previousHolder` of the `reclaimed` event of claim a + 1,
 * or for the last claim the holder its failure names.
 */
function checkPoison(
  store: ReadonlyMap<number, StoredTask>,
  ledger: readonly string[],
  pidOf: ReadonlyMap<string, number>,
): Violation[] {
  const out: Violation[] = [];
  /** Per poison task, the claims (attempts) its code ran in, with the process it ran in. */
  const runs = new Map<number, { attempt: number; pid: number }[]>();
  for (const l of ledger) {
    const w = l.split(" ");
    if (w[0] !== "poison") continue;
    const list = runs.get(Number(w[1])) ?? [];
    list.push({ attempt: Number(w[3]), pid: Number(w[4]) });
    runs.set(Number(w[1]), list);
  }
  for (const { task, events } of store.values()) {
    if (task.name !== "poison") continue;
    const kind = (task.input as { kind: string }).kind;
    const own = runs.get(task.id) ?? [];
    const attempts = own.map((r) => r.attempt).sort((a, b) => a - b);
    if (new Set(attempts).size !== attempts.length || attempts.some((a) => a < 1 || a > POISON_MAX_ATTEMPTS))
      out.push({
        promise: "P6",
        detail: `poison ${task.id} (${kind}) ran in claims ${attempts.join(",")}, expected each of 1..${POISON_MAX_ATTEMPTS} at most once`,
      });
    // Processes another poison task ran in: each of them went down with it.
    const downed = new Set<number>();
    for (const [id, list] of runs) if (id !== task.id) for (const r of list) downed.add(r.pid);
    for (let a = 1; a <= POISON_MAX_ATTEMPTS; a++) {
      if (attempts.includes(a)) continue;
      const holder =
        a < POISON_MAX_ATTEMPTS
          ? (
              events.find((e) => e.kind === "reclaimed" && e.attempt === a + 1)?.detail as
                | { previousHolder?: string }
                | undefined
            )?.previousHolder
          : /last holder (\S+)/.exec(task.error?.message ?? "")?.[1];
      const pid = holder === undefined ? undefined : pidOf.get(holder);
      if (pid === undefined || !downed.has(pid))
        out.push({
          promise: "P6",
          detail: `poison ${task.id} (${kind}) did not run in claim ${a}, whose holder ${holder ?? "?"} no other poison task took down`,
        });
    }
    if (task.attempts !== POISON_MAX_ATTEMPTS)
      out.push({ promise: "P6", detail: `poison ${task.id} (${kind}) ended after ${task.attempts} claims` });
    if (task.error?.name !== "AttemptsExhausted")
      out.push({
        promise: "P6",
        detail: `poison ${task.id} (${kind}) ended with ${task.error?.name}: ${task.error?.message}`,
      });
  }
  return out;
}
