/**
 * spec 8.5 / 3.2: two worker processes share one SQLite file; the claim alone
 * gives exclusivity, so with no crash every task body runs exactly once.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Ratchet, silentLogger, type TaskRecord } from "../../src/index.js";
import { makeTasks } from "../fixtures/tasks.js";
import { ledgerLines, Sandbox, waitUntil } from "./harness.js";

const TOTAL = 5_000;
const BATCH = 1_000;

describe("two worker processes on one SQLite file", () => {
  let sb: Sandbox;
  let r: Ratchet | undefined;

  beforeEach(() => {
    sb = new Sandbox();
  });

  afterEach(async () => {
    await r?.close();
    r = undefined;
    await sb.cleanup();
  });

  it("spec 8.5: drain 5,000 tasks, each completed exactly once, both processes working", async () => {
    // The test process only enqueues and reads; the bodies never run here (ledgerFd is unused).
    r = await Ratchet.open({
      store: `sqlite:${sb.db}`,
      tasks: makeTasks({ ledgerFd: -1, blockStepTwo: false }),
      logger: silentLogger,
    });
    const ledgers = [sb.path("ledger-a.txt"), sb.path("ledger-b.txt")];
    const workers = ledgers.map((ledger) => sb.spawn({ ledger, concurrency: 8, pollMs: 20 }));
    await Promise.all(workers.map((w) => w.waitFor("ready")));

    const ids: number[] = [];
    for (let i = 0; i < TOTAL; i += BATCH) {
      const batch = Array.from({ length: Math.min(BATCH, TOTAL - i) }, (_, k) => ({
        task: "ledger",
        input: { n: i + k },
      }));
      ids.push(...(await r.enqueueMany(batch)));
    }
    expect(new Set(ids).size).toBe(TOTAL);

    for (const w of workers) w.send("go");
    await Promise.all(workers.map((w) => w.waitFor("started")));

    const completed = async () => {
      const [q] = await r!.stats();
      return q?.byOutcome.completed ?? 0;
    };
    await waitUntil(
      `${TOTAL} completed`,
      async () => {
        for (const w of workers) if (!w.alive) throw new Error(`worker ${w.pid} died; stderr:\n${w.stderr}`);
        return (await completed()) === TOTAL;
      },
      25_000,
    );

    // Graceful stop: both exit 0 and wrote no errors.
    expect(await Promise.all(workers.map((w) => w.stop()))).toEqual([0, 0]);
    for (const w of workers) expect(w.stderr).toBe("");

    // Ledgers: the union holds each id exactly once, and both processes did work.
    const perProcess = ledgers.map((l) => ledgerLines(l).map(Number));
    for (const lines of perProcess) expect(lines.length).toBeGreaterThan(0);
    const all = perProcess.flat();
    expect(all.length).toBe(TOTAL);
    expect(new Set(all).size).toBe(TOTAL);
    expect([...all].sort((a, b) => a - b)).toEqual([...ids].sort((a, b) => a - b));

    // Store: one queue, every task terminal completed after a single claim.
    const stats = await r.stats();
    expect(stats).toEqual([
      { queue: "default", byStatus: { terminal: TOTAL }, byOutcome: { completed: TOTAL } },
    ]);
    const records: TaskRecord[] = [];
    let before: number | undefined;
    for (;;) {
      const page: TaskRecord[] = await r.list(
        before === undefined ? { limit: 1000 } : { limit: 1000, before },
      );
      if (page.length === 0) break;
      records.push(...page);
      before = page.at(-1)!.id;
    }
    expect(records.length).toBe(TOTAL);
    for (const t of records) {
      expect({ id: t.id, status: t.status, outcome: t.outcome, attempts: t.attempts }).toEqual({
        id: t.id,
        status: "terminal",
        outcome: "completed",
        attempts: 1,
      });
    }
  });
});
