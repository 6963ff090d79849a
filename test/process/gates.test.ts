/**
 * spec §14.9 / §14.10 under several OS processes: four worker processes share
 * one store (a SQLite file, or a fresh PostgreSQL schema) and drain tasks with
 * seats or a token bucket. The seats and buckets live in the store, so the
 * limits hold across processes:
 * - seats: per key, the real [enter, exit) intervals of the bodies (read from
 *   one system-wide monotonic clock) never overlap more than the limit, and
 *   reach it; and no task holds its seat STALL_MS longer than its body ran
 *   (a longer hold is a stall in the store that the seat's parked tasks wait out);
 * - rate: over every window between two claims, the claims admitted are at
 *   most burst + limit·w/periodMs (claimedAt is the clock the bucket uses).
 */
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Ratchet, silentLogger, type TaskRecord } from "../../src/index.js";
import {
  GATE_TASK,
  type GateRun,
  makeGateTasks,
  RATE,
  SEAT_LIMIT,
  SOLO_GROUP,
} from "../fixtures/gate-tasks.js";
import { FixtureProcess, ledgerLines, Sandbox, waitUntil } from "./harness.js";
import { PgSandbox, pgGate, urlWithAppName } from "./pg-harness.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const GATE_WORKER = join(ROOT, "test/fixtures/gate-worker.ts");

const PROCESSES = 4;
const CONCURRENCY = 8;
/** Seat test: 400 tasks over 5 keys (limit 2 each), plus 2 × 20 tasks of one group of limit 1. */
const KEYS = ["k0", "k1", "k2", "k3", "k4"];
const SEAT_TASKS = 400;
const SOLO_TASKS = 20;
/** Rate test: 60 starts through a bucket of 20/s, burst 5: at least (60 − 5) / 20 s = 2.75 s. */
const RATE_TASKS = 60;
const DRAIN_TIMEOUT_MS = 25_000;
/**
 * A seat held this much longer than its task's body ran is a stall in the store, not bookkeeping
 * (twice PostgreSQL's default deadlock_timeout; the bookkeeping stays well under it).
 */
const STALL_MS = 2_000;

/** Set RATCHET_TEST_VERBOSE=1 to print the observed numbers. */
const report = (msg: string) => {
  if (process.env.RATCHET_TEST_VERBOSE) process.stderr.write(`[gates] ${msg}\n`);
};

interface Backend {
  label: string;
  /** The store URL every process opens. */
  store: string;
  schema?: string;
  path(name: string): string;
}

/** The test's own Ratchet (enqueues and reads; bodies never run here) and the worker processes. */
class Fleet {
  readonly workers: FixtureProcess[] = [];
  readonly ledgers: string[] = [];
  #r: Ratchet | undefined;

  constructor(readonly be: Backend) {}

  get r(): Ratchet {
    if (!this.#r) throw new Error("fleet not open");
    return this.#r;
  }

  /** Opens the test's Ratchet (migrating the store), then spawns the workers and waits until they are ready. */
  async open(): Promise<void> {
    this.#r = await Ratchet.open({
      store: this.be.store,
      ...(this.be.schema ? { postgres: { schema: this.be.schema, poolMax: 3 } } : {}),
      tasks: makeGateTasks({ ledgerFd: -1 }),
      logger: silentLogger,
    });
    for (let i = 0; i < PROCESSES; i++) {
      const ledger = this.be.path(`ledger-${i}.jsonl`);
      const args = ["--store", this.be.store, "--ledger", ledger, "--concurrency", String(CONCURRENCY)];
      args.push("--poll", "20", "--maint", "200");
      if (this.be.schema) args.push("--schema", this.be.schema);
      this.ledgers.push(ledger);
      this.workers.push(new FixtureProcess(args, GATE_WORKER));
    }
    await Promise.all(this.workers.map((w) => w.waitFor("ready")));
  }

  /** Starts every worker and waits until `ids` are all terminal; returns the wall time it took. */
  async drain(ids: readonly number[]): Promise<number> {
    const t0 = performance.now();
    for (const w of this.workers) w.send("go");
    await Promise.all(this.workers.map((w) => w.waitFor("started")));
    const want = new Set(ids);
    try {
      await waitUntil(
        `${ids.length} tasks terminal`,
        async () => {
          for (const w of this.workers)
            if (!w.alive) throw new Error(`worker ${w.pid} died; stderr:\n${w.stderr}`);
          const [q] = await this.r.stats();
          return (q?.byStatus.terminal ?? 0) === want.size;
        },
        DRAIN_TIMEOUT_MS,
        25,
      );
    } catch (err) {
      // Say where the rest are (e.g. parked on a seat nobody wakes) and what the workers said.
      const live = (await this.records()).filter((t) => t.status !== "terminal");
      const counts = new Map<string, number>();
      for (const t of live) {
        const where = `${t.name} ${t.status}${t.waitOn ? `/${t.waitOn}` : ""}`;
        counts.set(where, (counts.get(where) ?? 0) + 1);
      }
      const stderr = this.workers.map((w) => `worker ${w.pid}: ${w.stderr.slice(0, 2_000)}`);
      throw new Error(
        `${(err as Error).message}; ${live.length} not terminal: ${JSON.stringify(Object.fromEntries(counts))}\n${stderr.join("\n")}`,
      );
    }
    return performance.now() - t0;
  }

  /** Graceful stop of every worker: exit code 0 and nothing on stderr. */
  async stopAll(): Promise<void> {
    expect(await Promise.all(this.workers.map((w) => w.stop()))).toEqual(this.workers.map(() => 0));
    for (const w of this.workers) expect(w.stderr).toBe("");
  }

  /** Every task of the store, newest first. */
  async records(): Promise<TaskRecord[]> {
    const out: TaskRecord[] = [];
    let before: number | undefined;
    for (;;) {
      const page = await this.r.list(before === undefined ? { limit: 1000 } : { limit: 1000, before });
      if (page.length === 0) return out;
      out.push(...page);
      before = page.at(-1)!.id;
    }
  }

  /** Every ledgered body run, from every process. */
  runs(): GateRun[] {
    return this.ledgers.flatMap((l) => ledgerLines(l).map((line) => JSON.parse(line) as GateRun));
  }

  async dispose(): Promise<void> {
    for (const w of this.workers) w.kill("SIGKILL");
    await Promise.all(this.workers.map((w) => w.exited));
    await this.#r?.close().catch(() => {});
  }
}

/** The largest number of [enter, exit) intervals open at one instant (an exit at t comes before an entry at t). */
function maxOverlap(runs: readonly GateRun[]): number {
  const events = runs.flatMap((r): [number, number][] => [
    [r.enter, 1],
    [r.exit, -1],
  ]);
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let max = 0;
  for (const [, d] of events) {
    open += d;
    max = Math.max(max, open);
  }
  return max;
}

/**
 * Over every window [t_i, t_j] of the sorted claim times, the claims in it
 * against burst + limit·(t_j − t_i)/periodMs. Returns the smallest slack and
 * the windows over the bound.
 */
function rateWindows(
  claims: readonly number[],
  cfg: { limit: number; periodMs: number; burst: number },
): { minSlack: number; violations: string[] } {
  const t = [...claims].sort((a, b) => a - b);
  let minSlack = Number.POSITIVE_INFINITY;
  const violations: string[] = [];
  for (let i = 0; i < t.length; i++)
    for (let j = i; j < t.length; j++) {
      const bound = cfg.burst + (cfg.limit * (t[j]! - t[i]!)) / cfg.periodMs;
      const slack = bound - (j - i + 1);
      minSlack = Math.min(minSlack, slack);
      if (slack < -1e-9 && violations.length < 10)
        violations.push(`${j - i + 1} claims in [${t[i]}, ${t[j]}] (${t[j]! - t[i]!} ms), bound ${bound}`);
    }
  return { minSlack, violations };
}

/** Every task terminal and completed after a single claim; the others are shown with their event logs and ledgered runs. */
async function expectCompletedOnce(fleet: Fleet, records: readonly TaskRecord[], ids: readonly number[]) {
  expect(records.map((t) => t.id).sort((a, b) => a - b)).toEqual([...ids].sort((a, b) => a - b));
  const bad = records.filter((t) => t.status !== "terminal" || t.outcome !== "completed" || t.attempts !== 1);
  const shown = await Promise.all(
    bad.slice(0, 5).map(async (t) => ({
      id: t.id,
      status: t.status,
      outcome: t.outcome,
      attempts: t.attempts,
      events: (await fleet.r.details(t.id)).events,
      runs: fleet.runs().filter((run) => run.id === t.id),
    })),
  );
  expect(shown, `${bad.length} tasks not completed after a single claim`).toEqual([]);
}

/** Each id in exactly one ledger line; each task's result is the run ledgered for it. */
function expectRanOnce(runs: readonly GateRun[], records: readonly TaskRecord[]): void {
  const byId = new Map<number, GateRun[]>();
  for (const run of runs) byId.set(run.id, [...(byId.get(run.id) ?? []), run]);
  const twice = [...byId].filter(([, rs]) => rs.length !== 1).map(([id]) => id);
  expect(twice).toEqual([]);
  expect([...byId.keys()].sort((a, b) => a - b)).toEqual(records.map((t) => t.id).sort((a, b) => a - b));
  for (const t of records) expect(t.result, `result of task ${t.id}`).toEqual(byId.get(t.id)![0]);
}

async function seatsNeverExceeded(fleet: Fleet): Promise<void> {
  await fleet.open();
  const r = fleet.r;
  // Keys and the two definitions of the group interleaved over the claim order.
  const entries = [
    ...Array.from({ length: SEAT_TASKS }, (_, n) => ({
      task: GATE_TASK.seat,
      input: { key: KEYS[n % KEYS.length]!, n },
    })),
    ...Array.from({ length: SOLO_TASKS * 2 }, (_, n) => ({
      task: n % 2 === 0 ? GATE_TASK.soloA : GATE_TASK.soloB,
      input: { n },
    })),
  ];
  const ids = await r.enqueueMany(entries);
  expect(new Set(ids).size).toBe(entries.length);

  const ms = await fleet.drain(ids);
  await fleet.stopAll();

  const records = await fleet.records();
  await expectCompletedOnce(fleet, records, ids);
  const runs = fleet.runs();
  expectRanOnce(runs, records);

  // Per seat: never more than its limit at once, and the limit was reached.
  const seats = new Map<string, GateRun[]>();
  for (const run of runs) seats.set(run.key, [...(seats.get(run.key) ?? []), run]);
  const overlaps = Object.fromEntries([...seats].map(([k, rs]) => [k, maxOverlap(rs)]));
  const want = Object.fromEntries([...KEYS.map((k) => [k, SEAT_LIMIT]), [SOLO_GROUP, 1]]);
  expect(overlaps).toEqual(want);
  // Both definitions of the group ran (their runs shared the one seat above).
  expect(new Set(seats.get(SOLO_GROUP)!.map((run) => run.task))).toEqual(
    new Set([GATE_TASK.soloA, GATE_TASK.soloB]),
  );
  // The bodies did run concurrently (across keys), so the bounds above are not an artefact of serial runs.
  expect(maxOverlap(runs)).toBeGreaterThan(SEAT_LIMIT);

  // The work was shared by several processes.
  const pids = new Set(runs.map((run) => run.pid));
  expect(pids.size).toBeGreaterThan(1);
  const perPid = [...pids].map((p) => runs.filter((run) => run.pid === p).length);

  // A task holds its seat from its claim to its end: its body plus the store's bookkeeping (claim,
  // settle). Holding it a second longer is a stall in the store that every parked task of the seat
  // waits out (on PostgreSQL, e.g. a lock cycle resolved only by deadlock detection after deadlock_timeout).
  const byId = new Map(records.map((t) => [t.id, t]));
  const extra = runs
    .map((run) => {
      const t = byId.get(run.id)!;
      return { id: run.id, key: run.key, ms: t.endedAt! - t.claimedAt! - (run.exit - run.enter) };
    })
    .sort((a, b) => b.ms - a.ms);
  const pct = (p: number) => extra[Math.floor((1 - p) * (extra.length - 1))]!.ms.toFixed(1);
  report(
    `${fleet.be.label} seats: ${ids.length} tasks in ${Math.round(ms)} ms; max overlap ${JSON.stringify(overlaps)}; all keys together ${maxOverlap(runs)}; runs per process ${perPid.join("/")}; seat held beyond the body p50/p99/max ${pct(0.5)}/${pct(0.99)}/${pct(1)} ms`,
  );
  const stalled = extra.filter((x) => x.ms >= STALL_MS);
  expect(
    stalled.map((x) => `task ${x.id} (${x.key}) held its seat ${Math.round(x.ms)} ms beyond its body`),
    `${stalled.length} of ${extra.length} tasks stalled`,
  ).toEqual([]);
}

async function rateNeverExceeded(fleet: Fleet): Promise<void> {
  await fleet.open();
  const r = fleet.r;
  const ids = await r.enqueueMany(
    Array.from({ length: RATE_TASKS }, (_, n) => ({ task: GATE_TASK.rate, input: { n } })),
  );
  const ms = await fleet.drain(ids);
  await fleet.stopAll();

  const records = await fleet.records();
  await expectCompletedOnce(fleet, records, ids);
  expectRanOnce(fleet.runs(), records);

  const claims = records.map((t) => t.claimedAt!);
  expect(claims.every((c) => Number.isInteger(c))).toBe(true);
  const { minSlack, violations } = rateWindows(claims, RATE);
  expect(violations).toEqual([]);

  // The limiter was active: the whole drain spans at least (n − burst) / limit periods.
  const span = Math.max(...claims) - Math.min(...claims);
  const floor = ((RATE_TASKS - RATE.burst) / RATE.limit) * RATE.periodMs;
  expect(span).toBeGreaterThanOrEqual(floor - 100);
  // …and woke parked tasks on time: not much slower than the bucket allows.
  expect(span).toBeLessThan(floor + 3_000);
  const pids = new Set(fleet.runs().map((run) => run.pid));
  expect(pids.size).toBeGreaterThan(1);
  report(
    `${fleet.be.label} rate: ${RATE_TASKS} tasks in ${Math.round(ms)} ms; claim span ${span} ms (floor ${floor}); min window slack ${minSlack.toFixed(3)}; processes ${pids.size}`,
  );
}

describe("flow control under four worker processes on one SQLite file", () => {
  let sb: Sandbox;
  let fleet: Fleet;

  beforeEach(() => {
    sb = new Sandbox();
    fleet = new Fleet({ label: "sqlite", store: `sqlite:${sb.db}`, path: (n) => sb.path(n) });
  });

  afterEach(async () => {
    await fleet.dispose();
    await sb.cleanup();
  });

  it("spec §14.9: across 4 processes no key ever runs more than its seat limit at once, and the limit is reached; every task completes once; no seat is held 2 s past its body", async () => {
    await seatsNeverExceeded(fleet);
  });

  it("spec §14.10: across 4 processes the claims never exceed burst + limit·w/period in any window w", async () => {
    await rateNeverExceeded(fleet);
  });
});

describe("flow control under four worker processes on one PostgreSQL schema", () => {
  if (!pgGate(it)) return;
  let sb: PgSandbox;
  let fleet: Fleet;

  beforeEach(() => {
    sb = new PgSandbox();
    fleet = new Fleet({
      label: "postgres",
      store: urlWithAppName(`rt-gates-${sb.tag}`),
      schema: sb.schema,
      path: (n) => sb.path(n),
    });
  });

  afterEach(async () => {
    await fleet.dispose();
    await sb.cleanup();
  });

  it("spec §14.9: across 4 processes no key ever runs more than its seat limit at once, and the limit is reached; every task completes once; no seat is held 2 s past its body", async () => {
    await seatsNeverExceeded(fleet);
  });

  it("spec §14.10: across 4 processes the claims never exceed burst + limit·w/period in any window w", async () => {
    await rateNeverExceeded(fleet);
  });
});
