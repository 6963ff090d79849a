/**
 * Scenario 3, event-loop stall: worker A claims a "stall" task and, inside a
 * step, blocks its own event loop with a busy loop until worker B has taken
 * the task over (its lease lapsed: A sent no heartbeat). In mode "running" A
 * wakes while B still holds the task; in "settled" after B completed it. A
 * then tries every holder write it can make — the engine's own step commit and
 * settlement, ctx.step/heartbeat/progress, and each store write with its stale
 * fence. The checker counts them: every one must be refused (P4, spec §3.7),
 * A's ctx.signal must have fired, the store must show B's work only, and B's
 * claim must come within poll + slack of A's lease end (P5).
 */
import {
  checkNoLostTask,
  checkStderr,
  integrityCheck,
  readAcks,
  readStore,
  type StoredTask,
} from "../checker.js";
import { Enqueuer } from "../enqueuer.js";
import { type ChaosProcess, fileLines, Sandbox, waitUntil } from "../process.js";
import type { ScenarioConfig, ScenarioResult, Violation } from "../scenario.js";

const MAX_MS = 2_000;
const GRACE_MS = 300;
const POLL_MS = 50;
/** P5 slack over A's lease end + the poll interval. */
const SLACK_MS = 2_000;

export async function stall(c: ScenarioConfig): Promise<ScenarioResult> {
  const t0 = Date.now();
  const rounds = c.rounds ?? (c.full ? 10 : 2);
  const sb = new Sandbox();
  const violations: Violation[] = [];
  const rejected: number[] = [];
  const lags: number[] = [];
  let enq: Enqueuer | undefined;
  try {
    enq = await Enqueuer.open(sb.db, sb.acks, MAX_MS);
    const opts = { concurrency: 2, maxMs: MAX_MS, graceMs: GRACE_MS, pollMs: POLL_MS, logWrites: true };
    for (let round = 0; round < rounds; round++) {
      // Alternate the modes; the seed decides which comes first.
      const mode = (round + (c.seed % 2)) % 2 === 0 ? "running" : "settled";
      const a = sb.worker(opts);
      const b = sb.worker(opts);
      await Promise.all([a.waitFor("ready"), b.waitFor("ready")]);
      a.send("go");
      await a.waitFor("started");
      const id = (await enq.enqueue("stall", { mode }))!;
      // B starts only once A holds the task, so A is the one that stalls.
      await waitUntil(
        `A to claim task ${id}`,
        async () => (await enq!.r.get(id))?.lockedBy === a.workerId,
        20_000,
      );
      b.send("go");
      await b.waitFor("started");
      await enq.r.waitFor(id, { timeoutMs: 60_000 });
      await waitUntil(`A's stall-done for task ${id}`, () => line(sb, `stall-done ${id} `), 60_000);
      for (const w of [a, b]) {
        w.send("stop");
        const e = await w.exitWithin(30_000);
        if (e?.code !== 0)
          violations.push({
            promise: "P7",
            detail: `worker ${w.pid} exited ${e?.code ?? "not at all"} on stop`,
          });
      }
      const r = judgeRound(sb, id, a, mode);
      violations.push(...r.violations);
      rejected.push(r.rejected);
      c.log(`stall round ${round + 1}/${rounds} (${mode}): ${r.rejected} stale writes refused`);
    }
    violations.push(...checkStderr(sb.children));
    violations.push(...enq.violations);
    await enq.close();
    enq = undefined;
    const store = await readStore(sb.db);
    violations.push(...checkNoLostTask(readAcks(sb.acks), store));
    for (const s of store.values()) {
      const v = checkStoreAfterStall(s);
      violations.push(...v.violations);
      if (v.lag !== undefined) {
        lags.push(v.lag);
        if (v.lag > POLL_MS + SLACK_MS)
          violations.push({
            promise: "P5",
            detail: `task ${s.task.id} claimed again ${v.lag} ms after its lease ended`,
          });
      }
    }
    const integrity = integrityCheck(sb.db);
    if (integrity !== "ok") violations.push({ promise: "P1", detail: `integrity_check: ${integrity}` });
    return {
      name: "stall",
      seed: c.seed,
      ms: Date.now() - t0,
      violations,
      stats: {
        rounds,
        "stale writes refused": rejected.reduce((x, y) => x + y, 0),
        "per round": rejected.join("/"),
        "takeover after lease end max ms": lags.length ? Math.max(...lags) : 0,
        "lease ms": MAX_MS + GRACE_MS,
      },
    };
  } finally {
    await enq?.close().catch(() => {});
    await sb.cleanup(c.keep);
  }
}

function line(sb: Sandbox, prefix: string): string | undefined {
  return fileLines(sb.effects).find((l) => l.startsWith(prefix));
}

/** The ledger side of one round: A saw the takeover, every write after it was refused, its signal fired. */
function judgeRound(
  sb: Sandbox,
  id: number,
  a: ChaosProcess,
  mode: string,
): { violations: Violation[]; rejected: number } {
  const out: Violation[] = [];
  const lines = fileLines(sb.effects);
  const woke = lines.findIndex((l) => l.startsWith(`stall-woke ${id} `));
  if (woke < 0)
    return { violations: [{ promise: "harness", detail: `task ${id}: no stall-woke line` }], rejected: 0 };
  const [, , token, epoch] = lines[woke]!.split(" ");
  if (Number(epoch) <= Number(token))
    out.push({ promise: "harness", detail: `task ${id} (${mode}): A's busy loop gave up before a takeover` });
  let rejected = 0;
  for (const l of lines.slice(woke + 1)) {
    const w = l.split(" ");
    if (w[0] === "stall-write" && w[1] === String(id)) {
      // Through ctx: refused in the process; straight to the store: refused by the fence.
      if (w[3] === "accepted")
        out.push({ promise: "P4", detail: `task ${id} (${mode}): stale ${w[2]} was accepted` });
    } else if (w[0] === "write" && w[1] === String(a.pid) && w[3] === String(id) && w[4] === token) {
      // Every fenced write of A's store with the stale token, the engine's own included.
      if (w[5] === "ok")
        out.push({ promise: "P4", detail: `task ${id} (${mode}): stale store ${w[2]} returned ok` });
      else rejected++;
    } else if (w[0] === "stall-signal" && w[1] === String(id)) {
      if (w[2] !== "true" || !["RATCHET_LEASE_LOST", "RATCHET_TIMEOUT"].includes(w[3]!))
        out.push({
          promise: "P4",
          detail: `task ${id} (${mode}): A's ctx.signal aborted=${w[2]} reason ${w[3]}`,
        });
    }
  }
  if (rejected === 0) out.push({ promise: "harness", detail: `task ${id}: no stale store write was logged` });
  return { violations: out, rejected };
}

/** The store side: only B's work is there; B claimed within the bound after A's lease ended. */
function checkStoreAfterStall(s: StoredTask): { violations: Violation[]; lag?: number } {
  const out: Violation[] = [];
  const t = s.task;
  if (t.name !== "stall") return { violations: out };
  const res = t.result as { a?: number; stale?: boolean } | null;
  if (res?.stale || res?.a !== t.attempts)
    out.push({
      promise: "P4",
      detail: `task ${t.id}: result ${JSON.stringify(res)} is not the latest claim's`,
    });
  const names = s.steps.map((x) => x.name).sort();
  const want = [
    "before",
    "stall",
    ...((t.input as { mode: string }).mode === "running" ? ["hold"] : []),
  ].sort();
  if (names.join(",") !== want.join(","))
    out.push({ promise: "P4", detail: `task ${t.id}: steps ${names.join(",")}, expected ${want.join(",")}` });
  const stalled = s.steps.find((x) => x.name === "stall");
  if (stalled && stalled.attempt !== t.attempts)
    out.push({ promise: "P4", detail: `task ${t.id}: step "stall" committed by claim ${stalled.attempt}` });
  if (t.progress !== null)
    out.push({ promise: "P4", detail: `task ${t.id}: stale progress ${t.progress} stored` });
  const bad = s.events.filter(
    (e) => e.kind === "released" || e.kind === "attempt_failed" || e.kind === "failed",
  );
  if (bad.length > 0)
    out.push({
      promise: "P4",
      detail: `task ${t.id}: stale settlement left events ${bad.map((e) => e.kind).join(",")}`,
    });
  const reclaim = s.events.find((e) => e.kind === "reclaimed");
  if (!reclaim) {
    out.push({ promise: "harness", detail: `task ${t.id}: never reclaimed` });
    return { violations: out };
  }
  const lag = reclaim.at - (reclaim.detail as { leaseUntil: number }).leaseUntil;
  return { violations: out, lag };
}
