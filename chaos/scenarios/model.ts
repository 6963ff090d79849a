/**
 * Scenario 10, model-based simulation: fast-check generates sequences of
 * enqueue, claim, step commit, heartbeat, progress, settlement, crash, clock
 * advance, abort, retry and injected faults; each runs against a pure model
 * of the spec (chaos/model/) and against the real SQLite and PostgreSQL stores
 * on a fake clock, and every answer and the whole observable state must agree
 * after every command. A failing sequence is shrunk to a minimal one and
 * reported with the seed (chaos/model/runner.ts).
 *
 * Sizes: short (npm test) 1,000 sequences on SQLite and 300 on PostgreSQL;
 * full 10,000 and 2,000, up to 60 commands each, with every read on both
 * stores. `--rounds N` sets the sequences per store.
 */
import { type Backend, type ModelRunResult, pgProblem, runModel } from "../model/runner.js";
import type { Promise_, ScenarioConfig, ScenarioResult, Violation } from "../scenario.js";

interface Size {
  sequences: Record<Backend, number>;
  maxCommands: number;
  /** Every read after every command on PostgreSQL too (twice the time per sequence). */
  fullReads: boolean;
}

const FULL: Size = { sequences: { sqlite: 10_000, postgres: 2_000 }, maxCommands: 60, fullReads: true };
const SHORT: Size = { sequences: { sqlite: 1_000, postgres: 300 }, maxCommands: 50, fullReads: false };

/**
 * The promise a disagreement breaks, judged from what differed: a raw error or a store error where
 * the model has an answer is P7, a step P2, a fence or lease P4, an exhausted task P6, a task that
 * is missing or extra P1; anything else is a rule of the claim path (P4's "no reclaim before the
 * lease ended" and its neighbours).
 */
export function promiseOf(failure: string): Promise_ {
  if (/not a RatchetError|store \{"error":"RATCHET_STORE"\}/.test(failure)) return "P7";
  if (/\.steps:/.test(failure)) return "P2";
  if (/AttemptsExhausted/.test(failure)) return "P6";
  if (/missing from the store|not in the model/.test(failure)) return "P1";
  return "P4";
}

export async function model(c: ScenarioConfig): Promise<ScenarioResult> {
  const t0 = Date.now();
  const size = c.full ? FULL : SHORT;
  const violations: Violation[] = [];
  const stats: Record<string, number | string> = {};
  const results: ModelRunResult[] = [];
  for (const backend of ["sqlite", "postgres"] as const) {
    if (backend === "postgres") {
      const problem = await pgProblem();
      if (problem) {
        violations.push({ promise: "harness", detail: `PostgreSQL unreachable: ${problem}` });
        continue;
      }
    }
    const sequences = c.rounds ?? size.sequences[backend];
    c.log(`${backend}: ${sequences} sequences of up to ${size.maxCommands} commands, seed ${c.seed}`);
    const r = await runModel({
      backend,
      seed: c.seed,
      sequences,
      maxCommands: size.maxCommands,
      fullReads: backend === "sqlite" || size.fullReads,
    });
    results.push(r);
    c.log(
      `${backend}: ${r.stats.sequences} sequences, ${r.stats.commands} commands in ${(r.ms / 1000).toFixed(1)} s`,
    );
    if (r.failure) violations.push({ promise: promiseOf(r.failure), detail: r.failure });
    stats[`${backend} sequences`] = r.stats.sequences;
    stats[`${backend} commands`] = r.stats.commands;
    stats[`${backend} s`] = (r.ms / 1000).toFixed(1);
  }
  const sum = (f: (r: ModelRunResult) => number) => results.reduce((n, r) => n + f(r), 0);
  stats["commands skipped (no target)"] = sum((r) => r.stats.skipped);
  const byCommand: Record<string, number> = {};
  for (const r of results)
    for (const [k, v] of Object.entries(r.stats.byCommand)) byCommand[k] = (byCommand[k] ?? 0) + v;
  stats["per command"] = Object.entries(byCommand)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  stats["faults before/after"] = `${sum((r) => r.stats.faultsBefore)}/${sum((r) => r.stats.faultsAfter)}`;
  stats["stale or marked writes refused"] = sum((r) => r.stats.refused);
  stats["tasks claimed"] = sum((r) => r.stats.claimed);
  stats.reclaims = sum((r) => r.stats.reclaims);
  stats["AttemptsExhausted ends"] = sum((r) => r.stats.exhausted);
  stats["queue full"] = sum((r) => r.stats.queueFull);
  stats.deduped = sum((r) => r.stats.deduped);
  stats["store's choice among allowed outcomes"] = sum((r) => r.stats.choices);
  return { name: "model", seed: c.seed, ms: Date.now() - t0, violations, stats };
}
