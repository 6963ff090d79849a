/**
 * Whether the PostgreSQL tests can run, checked once per test file, and the
 * schemas they use.
 *
 * Policy: with no server, CI fails loudly (the PostgreSQL suites throw); a
 * local run registers one passing test per suite that prints a warning to
 * stderr. Never it.skip / describe.skip (the project forbids them).
 * Server: env RATCHET_PG_URL, default postgres://postgres@127.0.0.1:5432/test.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";

export const PG_URL = process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

const where = (() => {
  try {
    const u = new URL(PG_URL);
    return `${u.hostname}:${u.port || "5432"}`;
  } catch {
    return PG_URL;
  }
})();

async function probe(): Promise<string | null> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2_000 });
  client.on("error", () => {});
  try {
    await client.connect();
    await client.query("SELECT 1");
    return null;
  } catch (e) {
    return (e as Error).message || String(e);
  } finally {
    await client.end().catch(() => {});
  }
}

/** Why PostgreSQL is unusable, or null when it is reachable. */
export const pgProblem: string | null = await probe();
export const pgAvailable = pgProblem === null;

const inCI = (() => {
  const v = process.env.CI;
  return v !== undefined && v !== "" && v !== "0" && v.toLowerCase() !== "false";
})();

/**
 * Call at the top of a PostgreSQL suite's describe body. Returns true when the
 * suite may register its tests. Without a server it throws in CI and, locally,
 * registers a single passing test that prints a loud warning.
 */
export function pgGate(it: (name: string, fn: () => void) => void): boolean {
  if (pgAvailable) return true;
  const msg = `PostgreSQL tests SKIPPED: no server at ${where}`;
  if (inCI) {
    throw new Error(
      `PostgreSQL is required when CI is set, but there is no server at ${where} (${pgProblem}). Start one or set RATCHET_PG_URL.`,
    );
  }
  it(msg, () => {
    const bar = "!".repeat(msg.length + 8);
    process.stderr.write(`\n${bar}\n!!! ${msg} !!!\n!!! (${pgProblem})\n${bar}\n\n`);
  });
  return false;
}

const fileTag = randomBytes(4).toString("hex");
let seq = 0;

/** A new schema name, `rt_<random per file>_<n>`; the schema is created by the store's migrate. */
export function newSchemaName(): string {
  return `rt_${fileTag}_${++seq}`;
}

/** Drops the given schemas (DROP SCHEMA … CASCADE) through one pg.Client. */
export async function dropSchemas(names: readonly string[]): Promise<void> {
  if (names.length === 0) return;
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 5_000 });
  client.on("error", () => {});
  await client.connect();
  try {
    // One DROP locks every table, index and sequence of its schemas until it commits: 100 schemas of
    // today's ~40 tables and their indexes passed the server's lock table ("out of shared memory",
    // max_locks_per_transaction 64 × connections). 10 at a time stay far below it.
    for (let i = 0; i < names.length; i += 10) {
      const chunk = names.slice(i, i + 10).map((n) => `"${n}"`);
      await client.query(`DROP SCHEMA IF EXISTS ${chunk.join(", ")} CASCADE`);
    }
  } finally {
    await client.end().catch(() => {});
  }
}
