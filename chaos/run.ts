/**
 * The chaos runner: `npm run chaos -- [--seed N] [--full] [--scenario a,b] [--rounds N] [--keep]`.
 * Runs the named scenarios (default: all) one after another, prints the seed
 * first so any run can be replayed, then a summary table, and exits 1 when a
 * promise was violated (each finding is printed with its promise).
 */
import { parseArgs } from "node:util";
import type { ScenarioResult } from "./scenario.js";
import { SCENARIOS } from "./scenarios/index.js";

const { values } = parseArgs({
  options: {
    seed: { type: "string" },
    full: { type: "boolean", default: false },
    scenario: { type: "string" },
    rounds: { type: "string" },
    keep: { type: "boolean", default: false },
  },
});

const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
const names = values.scenario ? values.scenario.split(",").map((s) => s.trim()) : Object.keys(SCENARIOS);
for (const n of names) {
  if (!(n in SCENARIOS)) {
    process.stderr.write(`unknown scenario "${n}"; known: ${Object.keys(SCENARIOS).join(", ")}\n`);
    process.exit(2);
  }
}
const replay = [`--seed ${seed}`, values.full ? "--full" : "", `--scenario ${names.join(",")}`]
  .concat(values.rounds ? [`--rounds ${values.rounds}`] : [])
  .filter(Boolean)
  .join(" ");
console.log(`chaos: seed ${seed} (replay: npm run chaos -- ${replay})`);

const results: ScenarioResult[] = [];
for (const name of names) {
  const started = Date.now();
  console.log(`\n== ${name}`);
  try {
    results.push(
      await SCENARIOS[name]!({
        seed,
        full: values.full,
        ...(values.rounds ? { rounds: Number(values.rounds) } : {}),
        keep: values.keep,
        log: (l) => console.log(`   ${l}`),
      }),
    );
  } catch (err) {
    results.push({
      name,
      seed,
      ms: Date.now() - started,
      violations: [{ promise: "harness", detail: `scenario threw: ${(err as Error).stack ?? String(err)}` }],
      stats: {},
    });
  }
  const r = results[results.length - 1]!;
  for (const v of r.violations) console.log(`   VIOLATION ${v.promise}: ${v.detail}`);
  console.log(
    `   ${r.violations.length === 0 ? "ok" : `${r.violations.length} violation(s)`} in ${(r.ms / 1000).toFixed(1)} s`,
  );
  for (const [k, v] of Object.entries(r.stats)) console.log(`   ${k}: ${v}`);
}

console.log(`\n| scenario | result | time | numbers |\n|---|---|---|---|`);
for (const r of results) {
  const nums = Object.entries(r.stats)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  const verdict = r.violations.length === 0 ? "ok" : `${r.violations.length} violated`;
  console.log(`| ${r.name} | ${verdict} | ${(r.ms / 1000).toFixed(1)} s | ${nums} |`);
}
console.log(`\nseed ${seed}`);
process.exit(results.some((r) => r.violations.length > 0) ? 1 : 0);
