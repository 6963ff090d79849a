/**
 * What a fresh process pays to import Ratchet and open a store: a CLI command, a serverless tick's
 * cold start, a test file.
 *
 *   npm run build && node dist/bench/coldstart.js [--store sqlite|pg] [--runs 15] [--base /abs/other/dist] [--pg-url postgres://…]
 *
 * Each run is a new node process that imports the build's dist/src/index.js, opens a store (SQLite:
 * a new file in a temp dir; PostgreSQL: the `--pg-url` database's schema `coldstart`, migrated by the
 * first run), and closes it. Reported: the import's time, open()'s, and the process's whole CPU time
 * (user + system, from process.cpuUsage at its end), medians of `--runs`; with `--base`, the two
 * builds alternate run by run.
 */
import { spawnSync } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { abBuilds, median } from "./stats.js";

const { values: args } = parseArgs({
  options: {
    store: { type: "string", default: "sqlite" },
    runs: { type: "string", default: "15" },
    base: { type: "string" },
    "pg-url": {
      type: "string",
      default: process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    },
  },
});
const RUNS = Number(args.runs);
if (!Number.isInteger(RUNS) || RUNS < 1 || RUNS > 100) throw new Error("--runs must be in [1, 100]");
if (args.store !== "sqlite" && args.store !== "pg") throw new Error("--store is sqlite or pg");

/** This build's dist/ (this file runs as dist/bench/coldstart.js). */
const OWN = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** The child: import, open, close; prints its three numbers as JSON. */
const CHILD = `
const { mkdtempSync, rmSync } = await import("node:fs");
const { tmpdir } = await import("node:os");
const { join } = await import("node:path");
const [index, kind, pgUrl] = process.argv.slice(1);
const t0 = performance.now();
const { Ratchet, silentLogger } = await import(index);
const t1 = performance.now();
const dir = kind === "sqlite" ? mkdtempSync(join(tmpdir(), "ratchet-coldstart-")) : "";
const r = await Ratchet.open({
  store: kind === "sqlite" ? "sqlite:" + join(dir, "c.db") : pgUrl,
  postgres: { schema: "coldstart" },
  logger: silentLogger,
});
const t2 = performance.now();
await r.close();
if (dir) rmSync(dir, { recursive: true, force: true });
const c = process.cpuUsage();
process.stdout.write(JSON.stringify({ importMs: t1 - t0, openMs: t2 - t1, cpuMs: (c.user + c.system) / 1000 }));
`;

interface Sample {
  importMs: number;
  openMs: number;
  cpuMs: number;
}

const builds = abBuilds(args.base, OWN);
const samples: Record<string, Sample[]> = Object.fromEntries(builds.map(([k]) => [k, []]));
for (let i = 0; i < RUNS; i++) {
  for (const [name, dist] of builds) {
    const index = pathToFileURL(join(dist, "src/index.js")).href;
    const res = spawnSync(
      process.execPath,
      ["--input-type=module", "-e", CHILD, index, args.store!, args["pg-url"]!],
      { encoding: "utf8" },
    );
    if (res.status !== 0) throw new Error(`${name} run failed: ${res.stderr}`);
    samples[name]!.push(JSON.parse(res.stdout) as Sample);
  }
}
console.log(
  `\nA fresh process: import Ratchet, open a ${args.store} store, close; medians of ${RUNS} run(s)\n`,
);
console.log("| build | import (ms) | open (ms) | process CPU (ms) |\n| --- | ---: | ---: | ---: |");
for (const [name, dist] of builds) {
  const s = samples[name]!;
  const m = (f: (x: Sample) => number) => median(s.map(f)).toFixed(1);
  console.log(
    `| ${name} (${dist}) | ${m((x) => x.importMs)} | ${m((x) => x.openMs)} | ${m((x) => x.cpuMs)} |`,
  );
}
