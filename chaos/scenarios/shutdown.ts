/**
 * Scenario 9, graceful shutdown: two workers run a mix of short and long
 * "chain" tasks; a worker holding tasks gets SIGTERM (its handler calls
 * `close()`, as `ratchet worker` does) and a replacement is spawned. Spec §8.2:
 * the worker exits 0; each task it held either finished or was released
 * (event "released", attempt not counted); no task had to wait for a lease to
 * expire (no "reclaimed" event; the lease is 31 s, far above every wait here);
 * P1–P4 hold.
 */
import {
  checkNoLostTask,
  checkStderr,
  checkSteps,
  integrityCheck,
  readAcks,
  readStepRuns,
  readStore,
} from "../checker.js";
import { Enqueuer } from "../enqueuer.js";
import { WorkerPool } from "../pool.js";
import { Sandbox, waitUntil } from "../process.js";
import { Rng, type ScenarioConfig, type ScenarioResult, type Violation } from "../scenario.js";

const MAX_MS = 30_000;
const GRACE_MS = 1_000;
const SHUTDOWN_MS = 1_000;
const STEPS = 3;
/** A released task is claimed again well before its lease (31 s) would have let anyone take it. */
const NEXT_CLAIM_BOUND_MS = 10_000;

export async function shutdown(c: ScenarioConfig): Promise<ScenarioResult> {
  const t0 = Date.now();
  const rounds = c.rounds ?? (c.full ? 10 : 2);
  const rng = new Rng(c.seed);
  const sb = new Sandbox();
  const pool = new WorkerPool(sb, {
    concurrency: 4,
    maxMs: MAX_MS,
    graceMs: GRACE_MS,
    pollMs: 50,
    shutdownMs: SHUTDOWN_MS,
  });
  const violations: Violation[] = [];
  const exitMs: number[] = [];
  let heldAtTerm = 0;
  let enq: Enqueuer | undefined;
  try {
    enq = await Enqueuer.open(sb.db, sb.acks, MAX_MS);
    await pool.start(2);
    for (let round = 0; round < rounds; round++) {
      // Short tasks finish inside the shutdown timeout; long ones (a 3–5 s step) get released.
      for (let i = 0; i < 16; i++) {
        const long = rng.next() < 0.25;
        const ms = Array.from({ length: STEPS }, (_, k) =>
          long && k === 1 ? rng.int(3_000, 5_000) : rng.int(20, 80),
        );
        await enq.enqueue("chain", { steps: STEPS, ms });
      }
      const victim = rng.pick(pool.running);
      const held = await waitUntil(
        `worker ${victim.pid} to hold tasks`,
        async () => {
          const running = await enq!.r.list({ status: "running", limit: 1000 });
          const mine = running.filter((t) => t.lockedBy === victim.workerId).map((t) => t.id);
          return mine.length > 0 && mine;
        },
        20_000,
      );
      heldAtTerm += held.length;
      const termAt = Date.now();
      victim.kill("SIGTERM");
      const exit = await victim.exitWithin(SHUTDOWN_MS + 20_000);
      if (exit?.code !== 0)
        violations.push({
          promise: "P7",
          detail: `SIGTERM: worker ${victim.pid} ended ${JSON.stringify(exit)}`,
        });
      if (exit) exitMs.push(exit.at - termAt);
      // What it held is finished or released: no task is left running under its name.
      for (const id of held) {
        const t = (await enq.r.get(id))!;
        if (t.status === "running" && t.lockedBy === victim.workerId)
          violations.push({
            promise: "P1",
            detail: `task ${id} still held by the stopped worker ${victim.pid}`,
          });
      }
      pool.spawn();
      await pool.settled();
      c.log(
        `shutdown round ${round + 1}/${rounds}: SIGTERM with ${held.length} tasks held, exit ${exit?.code}`,
      );
    }
    // Bounded well below the 31 s lease: a task that waited on a lease would miss it.
    await waitUntil(
      "every task terminal",
      async () => (await enq!.terminal()) >= enq!.acked && true,
      25_000,
    ).catch(() =>
      violations.push({ promise: "P1", detail: "not every task terminal 25 s after the last SIGTERM" }),
    );
    const codes = await pool.stopAll();
    if (codes.some((x) => x !== 0))
      violations.push({ promise: "P7", detail: `graceful stop exit codes ${codes.join(",")}` });
    violations.push(...enq.violations);
    await enq.close();
    enq = undefined;

    const store = await readStore(sb.db);
    violations.push(...checkNoLostTask(readAcks(sb.acks), store));
    const steps = checkSteps(store, readStepRuns(sb.effects), (t) => (t.name === "chain" ? STEPS : null));
    violations.push(...steps.violations);
    let released = 0;
    const nextClaim: number[] = [];
    for (const { task, events } of store.values()) {
      const count = (k: string) => events.filter((e) => e.kind === k).length;
      if (count("reclaimed") > 0)
        violations.push({
          promise: "P1",
          detail: `task ${task.id} waited for a lease to expire (spec §8.2)`,
        });
      const rel = events.filter((e) => e.kind === "released");
      released += rel.length;
      // spec §8.2: a release gives the attempt back.
      if (task.attempts !== 1 + count("attempt_failed"))
        violations.push({
          promise: "P1",
          detail: `task ${task.id}: attempts ${task.attempts} after ${rel.length} releases`,
        });
      const last = rel[rel.length - 1];
      if (last && task.claimedAt !== null) {
        nextClaim.push(task.claimedAt - last.at);
        if (task.claimedAt - last.at > NEXT_CLAIM_BOUND_MS)
          violations.push({
            promise: "P5",
            detail: `task ${task.id} claimed ${task.claimedAt - last.at} ms after its release`,
          });
      }
    }
    violations.push(...checkStderr(pool.all));
    const integrity = integrityCheck(sb.db);
    if (integrity !== "ok") violations.push({ promise: "P1", detail: `integrity_check: ${integrity}` });
    return {
      name: "shutdown",
      seed: c.seed,
      ms: Date.now() - t0,
      violations,
      stats: {
        sigterms: rounds,
        "tasks held at SIGTERM": heldAtTerm,
        released,
        "exit after SIGTERM max ms": exitMs.length ? Math.max(...exitMs) : 0,
        "claim after release max ms": nextClaim.length ? Math.max(...nextClaim) : 0,
        reruns: steps.stats.reruns,
      },
    };
  } finally {
    await enq?.close().catch(() => {});
    await sb.cleanup(c.keep);
  }
}
