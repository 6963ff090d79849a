/**
 * Scenario 10, one sequence: runs commands against the model and a real store
 * side by side and stops at the first difference.
 *
 * For each command: the model gives its allowed outcomes (`Branch`es); the
 * store runs the same call through the fault wrapper; the runner reads the
 * store back (readSnapshot) and accepts the first branch whose answer (value
 * or error code) and whole state match. The simulated workers are clients:
 * they keep the fences their claims returned and learn only what a real
 * worker would (a refusal drops a claim, an abort mark is noted); a crash
 * forgets every claim, so only lease expiry can free those tasks.
 *
 * Invariant: the model alone decides what is right; the store's answers only
 * choose among the branches the model allows.
 */
import { isDeepStrictEqual } from "node:util";
import { RatchetError } from "../../src/errors.js";
import type { Store, TaskId } from "../../src/store/store.js";
import type { FakeClock } from "../../src/testing/fake-clock.js";
import { type Cmd, type Fault, formatCmd, WORKERS } from "./commands.js";
import * as M from "./model.js";
import { diffState, type ReadPlan, readSnapshot } from "./observe.js";
import { type Held, type KnownBug, type Plan, planFor } from "./plans.js";

export interface ModelStats {
  sequences: number;
  commands: number;
  skipped: number;
  byCommand: Record<string, number>;
  faultsBefore: number;
  faultsAfter: number;
  /** Fenced holder writes refused (lease_lost or abort_marked). */
  refused: number;
  /** Tasks handed out by claims, and claims that found nothing. */
  claimed: number;
  emptyClaims: number;
  reclaims: number;
  exhausted: number;
  queueFull: number;
  deduped: number;
  /** Commands where the model allowed more than one outcome. */
  choices: number;
  outcomes: Record<string, number>;
}

export function emptyStats(): ModelStats {
  return {
    sequences: 0,
    commands: 0,
    skipped: 0,
    byCommand: {},
    faultsBefore: 0,
    faultsAfter: 0,
    refused: 0,
    claimed: 0,
    emptyClaims: 0,
    reclaims: 0,
    exhausted: 0,
    queueFull: 0,
    deduped: 0,
    choices: 0,
    outcomes: {},
  };
}

export interface SequenceEnv {
  /** The store under test, behind the fault wrapper. */
  store: Store;
  clock: FakeClock;
  queues: readonly [string, string];
  plan: ReadPlan;
  cfg: M.ModelConfig;
  /** Arms the fault wrapper for the next write. */
  setFault(f: Fault): void;
  /** Known store bugs whose paths the sequences stay off (plans.ts, KNOWN_BUGS). */
  avoid: readonly KnownBug[];
  stats: ModelStats;
}

type Raw = { ok: true; value: unknown } | { ok: false; error: unknown };

export class ModelMismatch extends Error {
  override name = "ModelMismatch";
}

export class SequenceRun {
  model: M.ModelState;
  /** Model index → store id. */
  readonly ids: TaskId[] = [];
  readonly held: Held[][] = WORKERS.map(() => []);
  readonly trace: string[] = [];
  readonly env: SequenceEnv;

  constructor(env: SequenceEnv) {
    this.env = env;
    this.model = M.initialState(env.clock.now());
  }

  async run(cmds: readonly Cmd[]): Promise<void> {
    this.env.stats.sequences++;
    for (const c of cmds) await this.step(c);
    await this.finalCheck();
    for (const t of this.model.tasks) {
      const k = t.outcome ?? t.status;
      this.env.stats.outcomes[k] = (this.env.stats.outcomes[k] ?? 0) + 1;
    }
  }

  async step(cmd: Cmd): Promise<void> {
    const env = this.env;
    const plan = planFor(this, cmd);
    if (!plan) {
      env.stats.skipped++;
      return;
    }
    env.stats.commands++;
    env.stats.byCommand[cmd.c] = (env.stats.byCommand[cmd.c] ?? 0) + 1;
    let branches = plan.branches;
    if (plan.fault === "before") {
      env.stats.faultsBefore++;
      branches = [{ state: this.model, obs: { error: "RATCHET_STORE" } }];
    } else if (plan.fault === "after") {
      env.stats.faultsAfter++;
      // It landed; the caller sees only the lost acknowledgement (an error the store threw itself stays).
      branches = branches.map((b) =>
        "ok" in b.obs ? { state: b.state, obs: { error: "RATCHET_STORE" } } : b,
      );
    }
    env.setFault(plan.fault);
    let raw: Raw;
    try {
      raw = { ok: true, value: await plan.call() };
    } catch (error) {
      raw = { ok: false, error };
    } finally {
      env.setFault("none");
    }
    const known = new Set(this.ids);
    const stepIds = plan.stepsOf.map((k) => this.ids[k]).filter((id): id is TaskId => id !== undefined);
    const snap = await readSnapshot(env.store, env.plan, stepIds);
    const fresh = [...snap.tasks.keys()].filter((id) => !known.has(id)).sort((a, b) => a - b);
    const indexOf = (id: TaskId) => {
      const k = this.ids.indexOf(id);
      if (k >= 0) return k;
      const j = fresh.indexOf(id);
      return j >= 0 ? this.ids.length + j : -1;
    };
    const idOf = (k: number): TaskId | undefined =>
      k < this.ids.length ? this.ids[k] : fresh[k - this.ids.length];
    let best: string[] | null = null;
    for (const b of branches) {
      const expected = plan.fault === "none" && plan.expect ? plan.expect(b, idOf) : b.obs;
      const obs = raw.ok && "ok" in expected ? plan.toObs(raw.value, indexOf, b) : errorObs(raw);
      const diffs = isDeepStrictEqual(expected, obs)
        ? []
        : [`answer: model ${JSON.stringify(expected)}, store ${JSON.stringify(obs)}`];
      diffs.push(...diffState(b.state, snap, idOf, env.plan));
      if (diffs.length === 0) {
        if (branches.length > 1) env.stats.choices++;
        this.#accept(cmd, plan, b, obs, fresh);
        plan.after?.(b, obs);
        return;
      }
      if (best === null || diffs.length < best.length) best = diffs;
    }
    throw this.#mismatch(cmd, plan, best ?? []);
  }

  /** End of the sequence: every task's steps, and one `reclaimed` event per reclaim (spec §3.3). */
  async finalCheck(): Promise<void> {
    const env = this.env;
    const snap = await readSnapshot(env.store, { ...env.plan, full: true }, []);
    const idOf = (k: number) => this.ids[k];
    const diffs = diffState(this.model, snap, idOf, { ...env.plan, full: true });
    for (const [k, t] of this.model.tasks.entries()) {
      const events = await env.store.events(this.ids[k]!);
      const n = events.filter((e) => e.kind === "reclaimed").length;
      if (n !== t.reclaims)
        diffs.push(`#${k}: ${t.reclaims} reclaims in the model, ${n} reclaimed events (spec §3.3)`);
    }
    if (diffs.length > 0) throw this.#mismatch(null, null, diffs);
  }

  #accept(cmd: Cmd, plan: Plan, b: M.Branch, obs: M.Obs, fresh: TaskId[]): void {
    const before = this.model;
    const added = b.state.tasks.length - this.ids.length;
    this.ids.push(...fresh.slice(0, added));
    this.model = b.state;
    const stats = this.env.stats;
    b.state.tasks.forEach((t, k) => {
      const was = before.tasks[k];
      if (t.error?.name === "AttemptsExhausted" && was && was.status !== "terminal") stats.exhausted++;
    });
    this.trace.push(`${formatCmd(cmd)}${plan.note ? ` [${plan.note}]` : ""} → ${JSON.stringify(obs)}`);
  }

  #mismatch(cmd: Cmd | null, plan: Plan | null, diffs: string[]): ModelMismatch {
    const what = cmd ? `${formatCmd(cmd)}${plan?.note ? ` [${plan.note}]` : ""}` : "";
    const at = cmd ? `command ${this.trace.length + 1} (${what})` : "the end-of-sequence check";
    const lines = [
      `model and store disagree at ${at}:`,
      ...diffs.map((d) => `    ${d}`),
      "  the run up to there (command → the store's answer, in model indices #k):",
      ...this.trace.map((t, i) => `    ${i + 1}. ${t}`),
      `  ids: ${this.ids.map((id, k) => `#${k}=${id}`).join(" ")}`,
    ];
    return new ModelMismatch(lines.join("\n"));
  }
}

function errorObs(raw: Raw): M.Obs {
  if (raw.ok) return { ok: raw.value ?? null };
  const e = raw.error;
  // spec §15.7 (P7): every rejection is a RatchetError with a code; anything else is a finding.
  if (e instanceof RatchetError) return { error: e.code };
  return { error: `not a RatchetError: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}` };
}
