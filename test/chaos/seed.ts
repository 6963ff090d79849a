/**
 * The seed of the short chaos runs inside `npm test`: RATCHET_CHAOS_SEED
 * replays one; otherwise a fresh one, printed in every failure message
 * (replay it with `npm run chaos -- --seed N --scenario NAME`).
 */
import type { ScenarioConfig } from "../../chaos/scenario.js";

export function shortRun(): ScenarioConfig {
  const env = process.env.RATCHET_CHAOS_SEED;
  const seed = env ? Number(env) : Math.floor(Math.random() * 2 ** 31);
  return { seed, full: false, log: () => {} };
}
