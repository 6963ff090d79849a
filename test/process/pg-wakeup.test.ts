/**
 * spec 8.1 on PostgreSQL: an enqueue in another process wakes an idle worker
 * through LISTEN/NOTIFY, also after its LISTEN connection was killed.
 *
 * Proof by ordering, not wall time. The worker runs with pollIntervalMs
 * 60,000 and the fixture's --report-wakes, so its stdout shows, in order,
 * each LISTEN wake-up ("wake"), each claim ("claim", with the ids it got) and
 * the task body's start ("task-started"). After the enqueue we require: a
 * wake, then the claim that took the task, then the start, within a bound far
 * below the poll interval. (pollIntervalMs only caps the idle backoff, which
 * starts at 5 ms and doubles, so "started within 20 s" alone would not prove
 * that NOTIFY did the waking; the wake before the claim does.)
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Ratchet } from "../../src/index.js";
import { PG_TASK } from "../fixtures/pg-tasks.js";
import { PgSandbox, type PgWorker, pgGate, waitUntil } from "./pg-harness.js";

const POLL_MS = 60_000;
const START_BOUND_MS = 20_000;

/** Waits until the worker is idle: a claim that got nothing, after its last wake-up. */
async function idle(w: PgWorker): Promise<void> {
  const lastWake = w.messages.findLastIndex((m) => m.type === "wake");
  await w.waitForIndex("an empty claim after the last wake-up", (m) => m.type === "claim" && m.got === 0, {
    from: lastWake + 1,
  });
}

/** Enqueues one task and checks the order wake → claim of the task → task-started. */
async function enqueueAndCheckWake(r: Ratchet, w: PgWorker): Promise<void> {
  const mark = w.messages.length;
  const id = await r.enqueue(PG_TASK.announce, {});
  const started = await w.waitForIndex(
    `task-started of task ${id}`,
    (m) => m.type === "task-started" && m.id === id,
    { from: mark, timeoutMs: START_BOUND_MS },
  );
  const took = w.messages.findIndex(
    (m, i) => i >= mark && m.type === "claim" && (m.ids as number[]).includes(id),
  );
  const wake = w.messages.findIndex((m, i) => i >= mark && m.type === "wake");
  const trace = JSON.stringify(w.messages.slice(mark, started + 1).map((m) => m.type));
  expect(wake, `no LISTEN wake-up after the enqueue: ${trace}`).toBeGreaterThanOrEqual(mark);
  expect(took, `the claim that took the task came before the wake-up: ${trace}`).toBeGreaterThan(wake);
  expect(started).toBeGreaterThan(took);
  expect((await r.waitFor(id, { timeoutMs: START_BOUND_MS })).outcome).toBe("completed");
}

describe("LISTEN/NOTIFY wakes an idle PostgreSQL worker process", () => {
  if (!pgGate(it)) return;
  let sb: PgSandbox;
  let r: Ratchet;

  beforeEach(async () => {
    sb = new PgSandbox();
    r = await sb.open();
  });

  afterEach(async () => {
    await sb.cleanup();
  });

  async function idleWorker(): Promise<PgWorker> {
    const w = sb.spawn({ ledger: sb.path("ledger.txt"), pollMs: POLL_MS, reportWakes: true, concurrency: 4 });
    await w.waitFor("ready");
    w.send("go");
    await w.waitFor("started");
    // spec §13.6: the worker LISTENs from its first empty claim on, and the new subscription wakes it
    // once; idle means after that wake-up, so that a later wake can only be a NOTIFY's.
    await w.waitForIndex("the wake-up of its new LISTEN", (m) => m.type === "wake", { from: 0 });
    await idle(w);
    return w;
  }

  it("spec 8.1: a task enqueued by another process starts after a NOTIFY wake-up, long before the poll interval", async () => {
    const w = await idleWorker();
    await enqueueAndCheckWake(r, w);
    // And again, once idle again.
    await idle(w);
    await enqueueAndCheckWake(r, w);
    expect(await w.stop()).toBe(0);
    expect(w.stderr).toBe("");
  });

  it("spec 8.1: single enqueues that overlap, sent as one statement, wake the worker too", async () => {
    const w = await idleWorker();
    const mark = w.messages.length;
    // The first goes out alone and is delayed, so its enqueue sends no NOTIFY; the three that arrive
    // while it is in flight go out together (one enqueue_each call): only that call's NOTIFY can wake
    // the worker before its poll interval.
    const [, ...ids] = await Promise.all([
      r.enqueue(PG_TASK.announce, {}, { delayMs: 3_600_000 }),
      r.enqueue(PG_TASK.announce, {}),
      r.enqueue(PG_TASK.announce, {}),
      r.enqueue(PG_TASK.announce, {}),
    ]);
    for (const id of ids)
      await w.waitForIndex(`task-started of task ${id}`, (m) => m.type === "task-started" && m.id === id, {
        from: mark,
        timeoutMs: START_BOUND_MS,
      });
    const wake = w.messages.findIndex((m, i) => i >= mark && m.type === "wake");
    const took = w.messages.findIndex(
      (m, i) => i >= mark && m.type === "claim" && (m.ids as number[]).some((x) => ids.includes(x)),
    );
    expect(wake, "a LISTEN wake-up after the enqueues").toBeGreaterThanOrEqual(mark);
    expect(took, "the first claim of the tasks came after the wake-up").toBeGreaterThan(wake);
    expect(await w.stop()).toBe(0);
    expect(w.stderr).toBe("");
  });

  it("spec 8.1: after pg_terminate_backend of the LISTEN connection, the worker re-listens and NOTIFY wakes it again", async () => {
    const w = await idleWorker();
    const listeners = async () =>
      (
        await sb.sql<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND application_name = $1",
          [w.appName],
        )
      ).map((x) => x.pid);
    const before = await listeners();
    expect(before.length).toBe(1);

    const mark = w.messages.length;
    const killed = await sb.sql<{ ok: boolean }>(
      "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND application_name = $1",
      [w.appName],
    );
    expect(killed).toEqual([{ ok: true }]);

    // A new LISTEN session replaces the killed one (and only one: no leaked listener) ...
    const after = await waitUntil("a new LISTEN session", async () => {
      const pids = await listeners();
      return pids.length > 0 && !pids.includes(before[0]!) && pids;
    });
    expect(after.length).toBe(1);
    // ... and the worker saw both the loss (a wake-up on "end") and the re-listen (a wake-up after LISTEN).
    await w.waitForIndex("two wake-ups after the kill", (m) => m.type === "wake", { from: mark });
    const first = w.messages.findIndex((m, i) => i >= mark && m.type === "wake");
    await w.waitForIndex("the wake-up after re-listening", (m) => m.type === "wake", { from: first + 1 });
    await idle(w);

    await enqueueAndCheckWake(r, w);
    expect(await listeners()).toEqual(after);
    expect(await w.stop()).toBe(0);
    expect(w.stderr).toBe("");
  });
});
