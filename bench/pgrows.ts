/**
 * The node CPU a worker spends turning a claim's returned rows into JS values, on PostgreSQL: what
 * the fast claim's returned rows cost when they came as one DataRow each (LEAN_RETURNING, until
 * 2026-12-02; the claimed tasks now come as one JSON text, see claimRowText in
 * src/store/postgres/sql.ts, whose cost `node dist/bench/drain.js --base …` measures).
 *
 *   npm run build && node dist/bench/pgrows.js [--rounds 7] [--pg-url postgres://…]
 *
 * Two SELECTs over generate_series return 500 rows shaped like a fast claim's (the values a drain's
 * rows carry: small JSON input, bigint times, NULLs where a plain task has them), parsed by
 * node-postgres with Ratchet's own type parsers:
 * - `all-columns`: the 26 columns the fast claim returned before (the three findings, the 22
 *   CLAIM_COLUMNS, fresh);
 * - `lean`: the 17 it returned then (the findings, LEAN_RETURNING, fresh).
 * Each round runs 200 queries of each, alternating; the table gives the median over rounds of the
 * process's CPU per row. The server's work is not in it (another process).
 */
import { parseArgs } from "node:util";
import pg from "pg";
import { types } from "../src/store/postgres/core.js";
import { median } from "./stats.js";

const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "7" },
    "pg-url": {
      type: "string",
      default: process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    },
  },
});
const ROUNDS = Number(args.rounds);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error("--rounds must be an integer >= 1");
const ROWS = 500;
const QUERIES = 200;

const FINDINGS = "false AS expired, false AS gated, 0 AS promoted";
const INPUT = `'{"seq":' || g || ',"enqueuedAt":1764523000000}' AS input`;
const T0 = "1764523000000::bigint";
const shapes: Record<string, string> = {
  "all-columns": `SELECT ${FINDINGS}, g::bigint AS id, 'default'::text AS queue, 'noop'::text AS name, 1 AS version,
    ${INPUT}, 'running'::text AS status, 0 AS priority, 60000::bigint AS max_ms, 1 AS attempts, 1 AS epoch,
    ${T0} + 61000 AS lease_until, 'worker-4f2a9c-1234'::text AS locked_by, NULL::text AS job, 0 AS abort_requested,
    ${T0} AS started_at, ${T0} AS claimed_at, NULL::bigint AS owner_id, NULL::text AS scope, NULL::text AS checkpoint,
    NULL::text AS seat, NULL::text AS rate, ${T0} + g AS order_key, true AS fresh
    FROM generate_series(1, ${ROWS}) g`,
  lean: `SELECT ${FINDINGS}, g::bigint AS id, 'noop'::text AS name, 1 AS version, ${INPUT}, 0 AS priority,
    60000::bigint AS max_ms, 1 AS attempts, 1 AS epoch, 0 AS abort_requested, ${T0} AS started_at,
    ${T0} + g AS order_key, NULL::text AS rare, ${T0} AS claim_now, true AS fresh
    FROM generate_series(1, ${ROWS}) g`,
};

const client = new pg.Client(args["pg-url"]);
await client.connect();
try {
  const run = (text: string) => client.query({ text, types: types as never });
  const samples: Record<string, number[]> = Object.fromEntries(Object.keys(shapes).map((k) => [k, []]));
  for (const text of Object.values(shapes)) for (let i = 0; i < 20; i++) await run(text); // warm up
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, text] of Object.entries(shapes)) {
      const c0 = process.cpuUsage();
      for (let i = 0; i < QUERIES; i++) await run(text);
      const c = process.cpuUsage(c0);
      samples[name]!.push((c.user + c.system) / (QUERIES * ROWS));
    }
    process.stderr.write(`round ${round + 1}/${ROUNDS}\n`);
  }
  console.log(
    `${QUERIES} queries of ${ROWS} rows per shape and round, ${ROUNDS} rounds; node CPU µs per row (median)\n`,
  );
  console.log("| shape | columns | µs per row |\n| --- | ---: | ---: |");
  for (const [name, s] of Object.entries(samples)) {
    const columns = (await run(`${shapes[name]} LIMIT 1`)).fields.length;
    console.log(`| ${name} | ${columns} | ${median(s).toFixed(2)} |`);
  }
} finally {
  await client.end();
}
