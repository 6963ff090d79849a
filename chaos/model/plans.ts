/**
 * Scenario 10, what each command does on both sides: the model's branches, the store call (as a
 * worker or an operator of the engine would make it), how the store's answer reads in model terms,
 * and what a simulated worker learns from it. Holder commands live in holders.ts.
 */
import type { ClaimedTask, TaskId, TaskRecord } from "../../src/store/store.js";
import { claimReq, newTask } from "../../src/testing/conformance/kit.js";
import { type Cmd, DEFS, type DefName, type Fault, WORKERS } from "./commands.js";
import { planHolder, planSettle } from "./holders.js";
import * as M from "./model.js";
import { modelView, storeView } from "./observe.js";
import type { SequenceEnv } from "./sequence.js";

/**
 * Store bugs this harness found (issue 7, scenario 10). While one is listed for a backend, sequences
 * on that backend stay off the path that triggers it; the model already says what is right, so a fix
 * only needs its name removed here. Both found so far are fixed (test/chaos/model.test.ts replays
 * their minimal sequences):
 *
 * - `retryDedupeCollision` (both stores): retry() of a root whose upstream_failed dependent has a
 *   dedupe key that a live or completed task holds again (the root itself, say) failed with
 *   RATCHET_STORE, a unique-constraint violation; now RATCHET_INVALID_STATE and nothing changes
 *   (spec §6.3, §2.3, §15.7).
 * - `duplicateCompletion` (PostgreSQL): a settle batch that completes the same claim twice answered
 *   ["ok", "ok"] and released the task's dependents twice; now ["ok", "lease_lost"], as on SQLite
 *   (spec §3.7, §6.2).
 */
export type KnownBug = "retryDedupeCollision" | "duplicateCompletion";
export const KNOWN_BUGS: Record<"sqlite" | "postgres", readonly KnownBug[]> = {
  sqlite: [],
  postgres: [],
};

/** An id no task has (abort and retry of a missing task, spec §7.3). */
const MISSING_ID = 2_000_000_000;

/** A claim a simulated worker holds. `attempt`: the attempt number its claim returned. */
export interface Held {
  task: number;
  token: number;
  /** The claim's time: fences carry it with the token (spec §3.7). */
  claimedAt: number;
  mode: "run" | "abort";
  attempt: number;
  name: DefName;
  /** The worker knows the task carries an abort mark (it was told, or a write was refused). */
  abortKnown: boolean;
}

export interface Plan {
  branches: M.Branch[];
  call(): Promise<unknown>;
  /** The store's answer in model terms, judged against branch `b`. */
  toObs(value: unknown, indexOf: (id: TaskId) => number, b: M.Branch): M.Obs;
  /** The model's answer for branch `b` (default: `b.obs`). */
  expect?(b: M.Branch, idOf: (k: number) => TaskId | undefined): M.Obs;
  fault: Fault;
  /** Model indices whose steps to read. */
  stepsOf: number[];
  /** What the command resolved to, for the trace (the holder and its claim). */
  note?: string;
  /** Worker bookkeeping once a branch was accepted. */
  after?(b: M.Branch, obs: M.Obs): void;
}

/** What the plans read and the workers' claims they update. */
export interface PlanContext {
  readonly model: M.ModelState;
  readonly ids: readonly TaskId[];
  readonly held: Held[][];
  readonly env: SequenceEnv;
}

export function planFor(x: PlanContext, cmd: Cmd): Plan | null {
  switch (cmd.c) {
    case "enqueue":
      return planEnqueue(x, cmd);
    case "claim":
      return planClaim(x, cmd);
    case "step":
    case "heartbeat":
    case "progress":
      return planHolder(x, cmd);
    case "settle":
      return planSettle(x, cmd);
    case "crash":
      // The process is gone: its claims are forgotten and nothing is written.
      x.held[cmd.worker]!.length = 0;
      return {
        branches: [{ state: x.model, obs: { ok: null } }],
        fault: "none",
        stepsOf: [],
        call: async () => null,
        toObs: () => ({ ok: null }),
      };
    case "advance":
    case "advanceTo":
      return planTime(x, cmd);
    case "abort":
    case "retry":
      return planOperator(x, cmd);
  }
}

function planEnqueue(x: PlanContext, cmd: Extract<Cmd, { c: "enqueue" }>): Plan {
  const { store, cfg, queues } = x.env;
  const n = x.model.tasks.length;
  const avoid = cmd.dedupe !== null && x.env.avoid.includes("retryDedupeCollision");
  const need = cmd.need === null || n === 0 || avoid ? null : cmd.need % n;
  const def = DEFS[cmd.name];
  const spec: M.NewTaskSpec = {
    queue: queues[cmd.queue]!,
    name: cmd.name,
    priority: cmd.priority,
    maxMs: def.maxMs,
    maxAttempts: def.maxAttempts,
    delayMs: cmd.delayMs,
    dedupe: cmd.dedupe,
    need,
  };
  const { need: _need, ...fields } = spec;
  return {
    branches: M.enqueue(x.model, cfg, spec),
    fault: cmd.fault,
    stepsOf: [],
    ...(need === null ? {} : { note: `needs #${need}` }),
    call: () =>
      store.enqueue([newTask({ ...fields, needs: need === null ? [] : [{ id: x.ids[need]! }] })], {
        maxDepth: (q) => cfg.maxDepth[q] ?? 1_000_000,
      }),
    toObs: (v, indexOf) => {
      const [e] = v as { id: TaskId; deduped: boolean; status: string }[];
      return { ok: { task: indexOf(e!.id), deduped: e!.deduped, status: e!.status } };
    },
    after: (_b, obs) => {
      if ("error" in obs && obs.error === "RATCHET_QUEUE_FULL") x.env.stats.queueFull++;
      if ("ok" in obs && (obs.ok as { deduped: boolean }).deduped) x.env.stats.deduped++;
    },
  };
}

function planClaim(x: PlanContext, cmd: Extract<Cmd, { c: "claim" }>): Plan {
  const { store, cfg, queues, stats } = x.env;
  const specs = WORKERS.map(
    (w): M.WorkerSpec => ({ id: w.id, queues: w.queues.map((i) => queues[i]!), names: w.names }),
  );
  // The named worker, or the next one that has something ready (else the named one claims nothing).
  let wi = cmd.worker;
  for (let i = 0; i < specs.length; i++) {
    const j = (cmd.worker + i) % specs.length;
    if (M.hasReady(x.model, specs[j]!)) {
      wi = j;
      break;
    }
  }
  const spec = specs[wi]!;
  return {
    branches: M.claim(x.model, cfg, spec, cmd.limit),
    fault: cmd.fault,
    stepsOf: [],
    ...(wi === cmd.worker ? {} : { note: `${spec.id} claims` }),
    call: () =>
      store.claim(
        claimReq({
          workerId: spec.id,
          queues: spec.queues,
          names: spec.names,
          limit: cmd.limit,
          leaseGraceMs: cfg.graceMs,
        }),
      ),
    toObs: (v, indexOf) => ({
      ok: (v as ClaimedTask[]).map(
        (c): M.ClaimView => ({
          task: indexOf(c.id),
          reclaimed: c.reclaimed,
          status: c.status,
          attempts: c.attempts,
          epoch: c.epoch,
          leaseUntil: c.leaseUntil,
          lockedBy: c.lockedBy,
          abortRequested: c.abortRequested,
          startedAt: c.startedAt,
          claimedAt: c.claimedAt,
        }),
      ),
    }),
    after: (b, obs) => {
      if (!("ok" in obs)) return;
      const got = obs.ok as M.ClaimView[];
      stats.claimed += got.length;
      if (got.length === 0) stats.emptyClaims++;
      for (const c of got) {
        if (c.reclaimed) stats.reclaims++;
        x.held[wi]!.push({
          task: c.task,
          token: c.epoch,
          claimedAt: c.claimedAt as number,
          mode: c.abortRequested ? "abort" : "run",
          attempt: c.attempts,
          name: b.state.tasks[c.task]!.name as DefName,
          abortKnown: c.abortRequested,
        });
      }
    },
  };
}

function planTime(x: PlanContext, cmd: Extract<Cmd, { c: "advance" | "advanceTo" }>): Plan | null {
  const m = x.model;
  let ms = cmd.c === "advance" ? cmd.ms : 0;
  if (cmd.c === "advanceTo") {
    // The instants where something becomes ready: lease ends and timers (spec §3.1).
    const instants = [
      ...new Set(
        m.tasks.flatMap((t) =>
          t.status === "running"
            ? [t.leaseUntil!]
            : t.status === "waiting" && t.wakeAt !== null
              ? [t.wakeAt]
              : [],
        ),
      ),
    ].sort((a, b) => a - b);
    if (instants.length === 0) return null;
    ms = instants[cmd.at % instants.length]! + cmd.delta - m.now;
    if (ms <= 0) return null;
  }
  return {
    branches: [{ state: M.advance(m, ms), obs: { ok: null } }],
    fault: "none",
    stepsOf: [],
    ...(cmd.c === "advanceTo" ? { note: `${ms} ms` } : {}),
    call: async () => {
      x.env.clock.advance(ms);
      return null;
    },
    toObs: () => ({ ok: null }),
  };
}

/** abort(id) and retry(id), by an operator (spec §6.3, §7). */
function planOperator(x: PlanContext, cmd: Extract<Cmd, { c: "abort" | "retry" }>): Plan | null {
  const m = x.model;
  if (cmd.task !== null && m.tasks.length === 0) return null;
  const k = cmd.task === null ? null : cmd.task % m.tasks.length;
  const id = k === null ? MISSING_ID : x.ids[k]!;
  const note = k === null ? `id ${MISSING_ID}` : `#${k}`;
  if (cmd.c === "abort") {
    return {
      branches: M.abort(m, x.env.cfg, k),
      fault: "none",
      stepsOf: [],
      note,
      call: () => x.env.store.abort(id),
      toObs: (v, indexOf) => {
        const r = v as { state: string; outcome?: string; marked?: TaskId[] };
        return { ok: { ...r, marked: (r.marked ?? []).map(indexOf) } };
      },
      after: (_b, obs) => {
        // The same process signals its running invocation at once (spec §7.2).
        if (k === null || !("ok" in obs) || (obs.ok as { state: string }).state !== "marked") return;
        for (const held of x.held) for (const h of held) if (h.task === k) h.abortKnown = true;
      },
    };
  }
  return {
    branches: M.retry(m, k),
    fault: "none",
    stepsOf: [],
    note,
    call: () => x.env.store.retry(id),
    // The record retry returns must be the task as it now is.
    expect: (b, idOf) =>
      "ok" in b.obs ? { ok: { task: k, record: modelView(b.state.tasks[k!]!, idOf) } } : b.obs,
    toObs: (v, indexOf, b) => {
      const r = v as TaskRecord;
      const exp = k === null ? undefined : modelView(b.state.tasks[k]!, (j) => x.ids[j]);
      return { ok: { task: indexOf(r.id), record: storeView(r, exp) } };
    },
  };
}
