/**
 * The chaos harness on PostgreSQL: the server URL, a fresh schema per run
 * (dropped on every path), the enqueuer and the store reader of the PostgreSQL
 * scenarios, and control of the local server (restart, terminate a worker's
 * connections, wait until it accepts connections again).
 *
 * The enqueuer and reader are the PostgreSQL twins of chaos/enqueuer.ts and
 * `readStore` in chaos/checker.ts: the same acknowledgement log and the same
 * `StoredTask` map, so the checks of chaos/checker.ts judge both backends.
 */
import { execFile, execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync } from "node:fs";
import { promisify } from "node:util";
import pg from "pg";
import { Ratchet, silentLogger } from "../src/index.js";
import { readTasks, type StoredTask } from "./checker.js";
import { waitUntil } from "./process.js";

/** The server of the PostgreSQL scenarios (the same variable and default as the test suites). */
export const CHAOS_PG_URL = process.env.RATCHET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** `url` with an application_name, so pg_stat_activity tells whose backends are whose. */
export function withAppName(url: string, appName: string): string {
  const u = new URL(url);
  u.searchParams.set("application_name", appName);
  return u.toString();
}

/** A fresh schema name for one run; the store creates it at migrate. */
export function newChaosSchema(): string {
  return `rt_chaos_${randomBytes(5).toString("hex")}`;
}

/** Runs one statement on a short-lived connection (bounded: 5 s to connect). */
export async function pgQuery<R = Record<string, unknown>>(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  client.on("error", () => {});
  await client.connect();
  try {
    return (await client.query(text, values)).rows as R[];
  } finally {
    await client.end().catch(() => {});
  }
}

/** DROP SCHEMA … CASCADE; makes sure the server is up first (a run may end mid-restart). */
export async function dropChaosSchema(url: string, schema: string): Promise<void> {
  await ensurePgRunning(url);
  await pgQuery(url, `DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}

/** Every task of a PostgreSQL schema with its steps and events, read through the engine (then closed). */
export async function readPgStore(url: string, schema: string): Promise<Map<number, StoredTask>> {
  const r = await Ratchet.open({ store: url, postgres: { schema, poolMax: 2 }, logger: silentLogger });
  try {
    return await readTasks(r);
  } finally {
    await r.close();
  }
}

// ------------------------------------------------------------ the server

/** The version directory of the local cluster (e.g. "15"), for pg_ctlcluster. */
function clusterVersion(): string {
  const v = readdirSync("/etc/postgresql").sort().at(-1);
  if (!v) throw new Error("no cluster under /etc/postgresql");
  return v;
}

export function isPgReady(url: string): boolean {
  const u = new URL(url);
  try {
    execFileSync("pg_isready", ["-q", "-h", u.hostname, "-p", u.port || "5432"], {
      stdio: "ignore",
      timeout: 5_000,
    });
    return true;
  } catch {
    return false;
  }
}

/** Waits until the server accepts connections; starts the local cluster if it stays down. */
export async function ensurePgRunning(url: string, timeoutMs = 60_000): Promise<void> {
  try {
    await waitUntil("PostgreSQL to accept connections", () => isPgReady(url), 15_000, 100);
    return;
  } catch {
    // Down for good (a restart that failed half-way): start it, then wait again.
  }
  try {
    execFileSync("pg_ctlcluster", ["--skip-systemctl-redirect", clusterVersion(), "main", "start"], {
      stdio: "pipe",
      timeout: 60_000,
    });
  } catch {
    // Already starting; pg_isready decides.
  }
  await waitUntil("PostgreSQL to accept connections after start", () => isPgReady(url), timeoutMs, 100);
}

/**
 * `pg_ctlcluster ACTION` of the local cluster ("restart" and "stop" use fast
 * shutdown: every session is terminated), resolving when it returned; the
 * caller waits for pg_isready. Async, so the caller's event loop (its
 * enqueues) runs during the outage. Every other client of the server loses
 * its connections too.
 */
export async function pgCtl(action: "restart" | "stop" | "start"): Promise<void> {
  await promisify(execFile)(
    "pg_ctlcluster",
    ["--skip-systemctl-redirect", clusterVersion(), "main", action],
    {
      timeout: 120_000,
    },
  );
}

/** The server's start time (ms), to prove a restart hit the server the workers use. */
export async function pgStartedAt(url: string): Promise<number> {
  const rows = await pgQuery<{ t: string }>(
    url,
    "SELECT (extract(epoch from pg_postmaster_start_time()) * 1000)::bigint AS t",
  );
  return Number(rows[0]!.t);
}

/** pg_terminate_backend of every session whose application_name starts with `prefix`; returns how many. */
export async function terminateSessions(url: string, prefix: string): Promise<number> {
  const rows = await pgQuery<{ ok: boolean }>(
    url,
    "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name LIKE $1 AND pid <> pg_backend_pid()",
    [`${prefix.replaceAll("_", "\\_").replaceAll("%", "\\%")}%`],
  );
  return rows.filter((r) => r.ok).length;
}
