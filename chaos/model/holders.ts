/**
 * Scenario 10, the holder commands: step commits, heartbeats, progress and settlements as a worker
 * of the engine sends them with the fences its claims returned, and what the worker learns from the
 * answers (a refusal drops the claim; an abort mark is noted).
 *
 * The workers decide as the engine does: after an error, `decideFailure` (spec §5.2) with the
 * command's jitter as the random draw; a claim that came with the abort mark runs no code and
 * settles `aborted` (spec §12.5); a run-mode holder reports an interrupted run (`aborted`) only once
 * it knows of the mark (spec §4.5, §7.2).
 */
import { decideFailure, type RetryPolicy } from "../../src/core/backoff.js";
import type { StoredError } from "../../src/core/json.js";
import type { Fence, Settlement, SettleResult } from "../../src/store/store.js";
import { type Cmd, DEFS, type DefName, WORKERS } from "./commands.js";
import * as M from "./model.js";
import type { Held, Plan, PlanContext } from "./plans.js";

/** The engine's retry policy for the simulated workers (spec §5.1, §5.2); jitter comes from the command. */
const policy = (name: DefName): RetryPolicy => ({
  maxAttempts: DEFS[name].maxAttempts,
  baseMs: 1_000,
  factor: 2,
  capMs: 8_000,
  floorMs: 0,
});

const fenceOf = (x: PlanContext, h: Held): Fence => ({
  taskId: x.ids[h.task]!,
  token: h.token,
  claimedAt: h.claimedAt,
  mode: h.mode,
});
const mfenceOf = (h: Held): M.MFence => ({ task: h.task, token: h.token, mode: h.mode });
const noteOf = (w: number, hs: readonly Held[]) =>
  `${WORKERS[w]!.id} holds ${hs.map((h) => `#${h.task} token ${h.token}${h.mode === "abort" ? " (abort mode)" : ""}`).join(", ")}`;

/**
 * The claims a holder command points at: the named worker's (and, for a batch, its next one — the
 * same claim again when it holds one), or else the next worker's that holds any, so fewer commands
 * are skipped; null when no worker holds a claim.
 */
function heldBy(
  x: PlanContext,
  worker: number,
  claim: number,
  batch: "one" | "two" | "two settlements",
): { w: number; hs: Held[] } | null {
  for (let i = 0; i < x.held.length; i++) {
    const w = (worker + i) % x.held.length;
    const held = x.held[w]!;
    if (held.length === 0) continue;
    const first = held[claim % held.length]!;
    const second = held[(claim + 1) % held.length]!;
    const same =
      second === first && batch === "two settlements" && x.env.avoid.includes("duplicateCompletion");
    if (batch === "one" || same) return { w, hs: [first] };
    return { w, hs: [first, second] };
  }
  return null;
}

/** What a holder learns from one fenced write's answer (a value or a code). */
function learn(x: PlanContext, w: number, h: Held, r: unknown): void {
  const held = x.held[w]!;
  if (r === "ok") return;
  if (r === "lease_lost" || r === "RATCHET_LEASE_LOST") {
    x.env.stats.refused++;
    if (held.includes(h)) held.splice(held.indexOf(h), 1);
  } else if (r === "abort_marked" || r === "RATCHET_ABORTED") {
    x.env.stats.refused++;
    h.abortKnown = true;
  }
}

/** The answer of item `i` of a (possibly batched) fenced write. */
const itemOf = (obs: M.Obs, i: number): unknown =>
  "error" in obs ? obs.error : Array.isArray(obs.ok) ? obs.ok[i] : "ok";

/** Step commits (one, or a commitSteps batch of two), heartbeats and progress: fenced writes (spec §3.7). */
export function planHolder(
  x: PlanContext,
  cmd: Extract<Cmd, { c: "step" | "heartbeat" | "progress" }>,
): Plan | null {
  const { store, cfg } = x.env;
  const held = heldBy(x, cmd.worker, cmd.claim, cmd.c === "step" && cmd.batch ? "two" : "one");
  if (!held) return null;
  const { w, hs } = held;
  const h = hs[0]!;
  const base = {
    stepsOf: hs.map((k) => k.task),
    note: noteOf(w, hs),
    after: (_b: M.Branch, obs: M.Obs) => {
      for (const [i, k] of hs.entries()) learn(x, w, k, itemOf(obs, i));
    },
  };
  if (cmd.c === "heartbeat") {
    const maxMs = DEFS[h.name].maxMs;
    return {
      ...base,
      branches: M.heartbeat(x.model, cfg, mfenceOf(h), maxMs),
      fault: cmd.fault,
      call: () => store.heartbeat(fenceOf(x, h), maxMs, cfg.graceMs),
      toObs: () => ({ ok: null }),
    };
  }
  if (cmd.c === "progress") {
    return {
      ...base,
      branches: M.progress(x.model, mfenceOf(h), cmd.fraction, "p"),
      fault: "none",
      call: () => store.progress(fenceOf(x, h), cmd.fraction, "p"),
      toObs: () => ({ ok: null }),
    };
  }
  const value = (k: Held) => ({ v: cmd.value, by: WORKERS[w]!.id, token: k.token });
  if (!cmd.batch) {
    return {
      ...base,
      branches: M.commitStep(x.model, mfenceOf(h), cmd.step, value(h)),
      fault: cmd.fault,
      call: () => store.commitStep(fenceOf(x, h), cmd.step, JSON.stringify(value(h))),
      toObs: () => ({ ok: null }),
    };
  }
  return {
    ...base,
    branches: M.commitSteps(
      x.model,
      hs.map((k) => ({ f: mfenceOf(k), name: cmd.step, result: value(k) })),
    ),
    fault: cmd.fault,
    call: () =>
      store.commitSteps(
        hs.map((k) => ({ fence: fenceOf(x, k), name: cmd.step, result: JSON.stringify(value(k)) })),
      ),
    toObs: (v) => ({ ok: v }),
  };
}

/** One settlement per claim, as the engine would decide it (spec §4.1, §5.2, §5.3, §7.2, §8.2); null: none to send. */
function settlementOf(
  h: Held,
  fence: Fence,
  cmd: Extract<Cmd, { c: "settle" }>,
  worker: string,
): { model: M.ModelSettlement; real: Settlement } | null {
  const err = (name: string, message: string): StoredError => ({ name, message });
  // A claim taken with the mark runs no code: without an abort handler it ends aborted (spec §12.5).
  switch (h.mode === "abort" ? "aborted" : cmd.kind) {
    case "complete": {
      const result = { by: worker, token: h.token };
      return {
        model: { kind: "complete", result },
        real: { kind: "complete", fence, result: JSON.stringify(result) },
      };
    }
    case "error": {
      const e = err("Error", `attempt ${h.attempt} threw`);
      const d = decideFailure(h.attempt, "error", policy(h.name), () => cmd.jitter);
      return d.kind === "retry"
        ? {
            model: { kind: "retry", delayMs: d.delayMs, error: e },
            real: { kind: "retry", fence, delayMs: d.delayMs, error: e },
          }
        : { model: { kind: "fail", error: e }, real: { kind: "fail", fence, outcome: "failed", error: e } };
    }
    case "fatal": {
      const e = err("NonRetryableError", "gave up");
      return {
        model: { kind: "fail", error: e },
        real: { kind: "fail", fence, outcome: "failed", error: e },
      };
    }
    case "sleep":
      return {
        model: { kind: "sleep", step: "nap", delayMs: 4_000 },
        real: { kind: "sleep", fence, step: "nap", delayMs: 4_000 },
      };
    case "release":
      return { model: { kind: "release" }, real: { kind: "release", fence } };
    case "aborted": {
      // Only a holder that knows of the mark reports an interrupted run.
      if (!h.abortKnown) return null;
      const e = err("Aborted", "abort requested");
      return {
        model: { kind: "aborted", error: e },
        real: { kind: "aborted", fence, error: e, handler: false },
      };
    }
    default:
      return null;
  }
}

/** One settle call: one settlement, or (batch) two — the same claim twice when the worker holds one. */
export function planSettle(x: PlanContext, cmd: Extract<Cmd, { c: "settle" }>): Plan | null {
  const held = heldBy(x, cmd.worker, cmd.claim, cmd.batch ? "two settlements" : "one");
  if (!held) return null;
  const { w, hs } = held;
  const items = hs.map((h) => settlementOf(h, fenceOf(x, h), cmd, WORKERS[w]!.id));
  if (items.some((i) => i === null)) return null;
  const ok = items as { model: M.ModelSettlement; real: Settlement }[];
  return {
    branches: M.settle(
      x.model,
      x.env.cfg,
      hs.map((h, i) => ({ f: mfenceOf(h), st: ok[i]!.model })),
    ),
    fault: cmd.fault,
    stepsOf: hs.map((h) => h.task),
    note: `${noteOf(w, hs)}; sends ${ok.map((i) => `${i.model.kind}${"delayMs" in i.model ? ` ${i.model.delayMs} ms` : ""}`).join(", ")}`,
    call: () => x.env.store.settle(ok.map((i) => i.real)),
    toObs: (v) => ({ ok: v }),
    after: (_b, obs) => {
      for (const [i, h] of hs.entries()) {
        const r = itemOf(obs, i) as SettleResult | string;
        const list = x.held[w]!;
        if (r === "ok" && list.includes(h)) list.splice(list.indexOf(h), 1);
        else learn(x, w, h, r);
      }
    },
  };
}
