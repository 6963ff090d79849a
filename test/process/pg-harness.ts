/**
 * Helpers for the PostgreSQL process tests (pg-*.test.ts): worker processes
 * running the fixture with `--store postgres://… --schema S`, one fresh schema
 * and temp dir per test, direct SQL for checks, and server control (restart,
 * wait until it accepts connections again).
 *
 * Availability policy, schema names and DROP SCHEMA come from test/pg-available.ts.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { Ratchet, silentLogger } from "../../src/index.js";
import { makePgTasks, PG_TASK } from "../fixtures/pg-tasks.js";
import { dropSchemas, newSchemaName, PG_URL } from "../pg-available.js";
import { FixtureProcess, waitUntil } from "./harness.js";

export { PG_URL, pgGate } from "../pg-available.js";
export { ledgerLines, waitUntil } from "./harness.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const _WORKER = join(ROOT, "test/fixtures/worker.ts");

export type { WorkerMessage as PgMessage } from "./harness.js";

export interface PgWorkerArgs {
  schema: string;
  /** application_name of this worker's connections, so tests can find its backends. */
  appName: string;
  ledger: string;
  steps?: string;
  order?: string;
  concurrency?: number;
  graceMs?: number;
  pollMs?: number;
  maxMs?: number;
  pool?: number;
  reportWakes?: boolean;
}

/** `PG_URL` with an application_name, so pg_stat_activity tells whose backend is whose. */
export function urlWithAppName(appName: string): string {
  const u = new URL(PG_URL);
  u.searchParams.set("application_name", appName);
  return u.toString();
}

/** A worker on a PostgreSQL schema; its connections carry `appName` so tests can find its backends. */
export class PgWorker extends FixtureProcess {
  readonly appName: string;

  constructor(a: PgWorkerArgs) {
    const argv = ["--store", urlWithAppName(a.appName), "--schema", a.schema, "--ledger", a.ledger];
    if (a.steps) argv.push("--steps", a.steps);
    if (a.order) argv.push("--order", a.order);
    if (a.concurrency !== undefined) argv.push("--concurrency", String(a.concurrency));
    if (a.graceMs !== undefined) argv.push("--grace", String(a.graceMs));
    if (a.pollMs !== undefined) argv.push("--poll", String(a.pollMs));
    if (a.maxMs !== undefined) argv.push("--max-ms", String(a.maxMs));
    if (a.pool !== undefined) argv.push("--pool", String(a.pool));
    if (a.reportWakes) argv.push("--report-wakes");
    super(argv);
    this.appName = a.appName;
  }
}

/** The version directory of the local cluster (e.g. "15"), for pg_ctlcluster. */
function clusterVersion(): string {
  const v = readdirSync("/etc/postgresql").sort().at(-1);
  if (!v) throw new Error("no cluster under /etc/postgresql");
  return v;
}

function isReady(): boolean {
  const u = new URL(PG_URL);
  try {
    execFileSync("pg_isready", ["-q", "-h", u.hostname, "-p", u.port || "5432"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** Waits until the server accepts connections; starts the cluster if it stays down. */
export async function ensurePgRunning(timeoutMs = 60_000): Promise<void> {
  try {
    await waitUntil("PostgreSQL to accept connections", isReady, Math.min(20_000, timeoutMs), 100);
    return;
  } catch {
    // Down for good (e.g. a failed restart): start it, then wait again.
  }
  try {
    execFileSync("pg_ctlcluster", ["--skip-systemctl-redirect", clusterVersion(), "main", "start"], {
      stdio: "pipe",
    });
  } catch {
    // Already starting; pg_isready below decides.
  }
  await waitUntil("PostgreSQL to accept connections after start", isReady, timeoutMs, 100);
}

/** Restarts the local cluster synchronously (fast shutdown: every session is terminated). */
export function restartPg(): void {
  execFileSync("pg_ctlcluster", ["--skip-systemctl-redirect", clusterVersion(), "main", "restart"], {
    stdio: "pipe",
  });
}

/**
 * One test's resources: a fresh schema, a temp dir for ledgers, worker
 * processes, the test's own Ratchet (enqueues and reads), and a pg.Client for
 * direct SQL. cleanup() kills leftover children, makes sure the server is up,
 * and drops the schema.
 */
export class PgSandbox {
  readonly schema = newSchemaName();
  readonly dir = mkdtempSync(join(tmpdir(), "ratchet-pg-"));
  readonly workers: PgWorker[] = [];
  readonly tag = randomBytes(3).toString("hex");
  #ratchet: Ratchet | undefined;
  #client: pg.Client | undefined;

  path(name: string): string {
    return join(this.dir, name);
  }

  /** The test process's Ratchet on this schema (migrates it); bodies never run here. */
  async open(maxMs?: number): Promise<Ratchet> {
    this.#ratchet = await Ratchet.open({
      store: urlWithAppName(`rt-test-${this.tag}`),
      postgres: { schema: this.schema, poolMax: 3 },
      tasks: makePgTasks({ ledgerFd: -1, stepsFd: -1, orderFd: -1, maxMs: maxMs ?? 30_000 }),
      logger: silentLogger,
    });
    return this.#ratchet;
  }

  spawn(args: Omit<PgWorkerArgs, "schema" | "appName">): PgWorker {
    const w = new PgWorker({
      schema: this.schema,
      appName: `rt-w${this.workers.length}-${this.tag}`,
      ...args,
    });
    this.workers.push(w);
    return w;
  }

  /** Runs one statement; `{s}` is replaced by the quoted schema. Reconnects after a server restart. */
  async sql<R = Record<string, unknown>>(text: string, values: unknown[] = []): Promise<R[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        if (!this.#client) {
          const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 5_000 });
          c.on("error", () => {
            if (this.#client === c) this.#client = undefined;
          });
          await c.connect();
          this.#client = c;
        }
        const res = await this.#client.query(text.replaceAll("{s}", `"${this.schema}"`), values);
        return res.rows as R[];
      } catch (err) {
        const c = this.#client;
        this.#client = undefined;
        await c?.end().catch(() => {});
        if (attempt >= 3) throw err;
      }
    }
  }

  async cleanup(): Promise<void> {
    for (const w of this.workers) w.kill("SIGKILL");
    await Promise.all(this.workers.map((w) => w.exited));
    await ensurePgRunning();
    await this.#ratchet?.close().catch(() => {});
    await this.#client?.end().catch(() => {});
    await dropSchemas([this.schema]);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Completed count per stats(); -1 while the store is unreachable (e.g. during a restart). */
export async function completedCount(r: Ratchet): Promise<number> {
  try {
    let n = 0;
    for (const q of await r.stats()) n += q.byOutcome.completed ?? 0;
    return n;
  } catch {
    return -1;
  }
}

/** Counts how often each line occurs. */
export function countLines(lines: Iterable<string>): Map<string, number> {
  const m = new Map<string, number>();
  for (const l of lines) m.set(l, (m.get(l) ?? 0) + 1);
  return m;
}

export interface Mix {
  all: number[];
  noop: number[];
  steps: number[];
  /** Chains of 5 (enqueueJob each, link k needs link k-1), ids in link order. */
  chains: number[][];
}

/**
 * Enqueues `rounds` rounds, each: one enqueueMany of `noop` no-op and `steps`
 * three-step tasks interleaved, then `chains` enqueueJob calls of 5 linked tasks.
 * Rounds interleave the kinds over the whole claim order. `workMs` makes each
 * no-op body and each step "s2" body wait that long (simulated work).
 */
export async function enqueueMix(
  r: Ratchet,
  o: { rounds: number; noop: number; steps: number; chains: number; workMs?: number },
): Promise<Mix> {
  const mix: Mix = { all: [], noop: [], steps: [], chains: [] };
  const input = o.workMs ? { workMs: o.workMs } : {};
  let chainNo = 0;
  for (let round = 0; round < o.rounds; round++) {
    const kinds: ("noop" | "steps")[] = [];
    for (let i = 0, a = 0, b = 0; i < o.noop + o.steps; i++) {
      // Spread the step tasks evenly among the no-ops.
      if (b < o.steps && (a >= o.noop || b * o.noop <= a * o.steps)) {
        kinds.push("steps");
        b++;
      } else {
        kinds.push("noop");
        a++;
      }
    }
    const ids = await r.enqueueMany(
      kinds.map((k) => ({ task: k === "noop" ? PG_TASK.noop : PG_TASK.steps, input })),
    );
    for (const [i, id] of ids.entries()) mix[kinds[i]!].push(id);
    for (let c = 0; c < o.chains; c++, chainNo++) {
      const links = await r.enqueueJob(
        `chain-${chainNo}`,
        Array.from({ length: 5 }, (_, k) => ({
          task: PG_TASK.chain,
          input: { chain: chainNo, k },
          ...(k > 0 ? { needs: [-1] } : {}),
        })),
      );
      mix.chains.push(links);
    }
  }
  mix.all = [...mix.noop, ...mix.steps, ...mix.chains.flat()];
  return mix;
}

/**
 * Chain links ran in order: in the shared order file (O_APPEND, so the file
 * order is the order of the writes), the first line of link k of each chain
 * comes after the first line of link k-1. Returns the violations.
 */
export function chainOrderViolations(orderLines: string[], chains: number): string[] {
  const first = new Map<string, number>();
  orderLines.forEach((l, i) => {
    if (!first.has(l)) first.set(l, i);
  });
  const bad: string[] = [];
  for (let c = 0; c < chains; c++) {
    for (let k = 0; k < 5; k++) {
      const at = first.get(`${c}:${k}`);
      if (at === undefined) bad.push(`chain ${c} link ${k} never ran`);
      else if (k > 0 && at < (first.get(`${c}:${k - 1}`) ?? Number.POSITIVE_INFINITY))
        bad.push(`chain ${c} link ${k} ran before link ${k - 1}`);
    }
  }
  return bad;
}
