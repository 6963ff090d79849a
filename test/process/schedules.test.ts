/**
 * spec §14.2 with real processes: four worker processes on one SQLite file
 * all declare the same every-second schedule and race for its ticks on the
 * real clock. Every tick must give exactly one task (unique dedupe keys, whole
 * seconds strictly increasing), and every task ran once (the ledger holds each
 * id once).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Ratchet, silentLogger } from "../../src/index.js";
import { makeTasks } from "../fixtures/tasks.js";
import { ledgerLines, Sandbox, waitUntil } from "./harness.js";

describe("schedules with four worker processes on one SQLite file", () => {
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

  it("spec §14.2: each tick of an every-second schedule is enqueued and run exactly once while four processes race", async () => {
    const ledgers = [0, 1, 2, 3].map((i) => sb.path(`ledger-${i}.txt`));
    const workers = ledgers.map((ledger) =>
      sb.spawn({ ledger, concurrency: 4, pollMs: 20, schedule: "* * * * * *", maintenanceMs: 25 }),
    );
    await Promise.all(workers.map((w) => w.waitFor("ready")));
    for (const w of workers) w.send("go");
    await Promise.all(workers.map((w) => w.waitFor("started")));

    r = await Ratchet.open({
      store: `sqlite:${sb.db}`,
      tasks: makeTasks({ ledgerFd: -1, blockStepTwo: false }),
      logger: silentLogger,
    });
    const ticks = async () => (await r!.store.list({ name: "ledger", limit: 1000 })).length;
    await waitUntil(
      "five ticks",
      async () => {
        for (const w of workers) if (!w.alive) throw new Error(`worker ${w.pid} died; stderr:\n${w.stderr}`);
        return (await ticks()) >= 5;
      },
      20_000,
    );
    await Promise.all(workers.map((w) => w.stop()));

    const tasks = await r.store.list({ name: "ledger", limit: 1000 });
    const keys = tasks.map((t) => t.dedupe!);
    expect(new Set(keys).size).toBe(keys.length);
    const seconds = keys.map((k) => Number(k.split(":")[2])).sort((a, b) => a - b);
    // Whole seconds, strictly increasing. (A gap would mean every worker stalled past a tick; with missed
    // "once" that tick still runs once, so gaps are allowed, duplicates are not.)
    for (let i = 1; i < seconds.length; i++) {
      const gap = seconds[i]! - seconds[i - 1]!;
      expect(gap > 0 && gap % 1000 === 0, `gap ${gap} ms between ticks`).toBe(true);
    }
    // Each task ran at most once, and every completed one exactly once (a tick enqueued just before the
    // graceful stop may still be pending).
    const ran = ledgers.flatMap((l) => ledgerLines(l));
    expect(new Set(ran).size).toBe(ran.length);
    const done = tasks.filter((t) => t.outcome === "completed").map((t) => String(t.id));
    expect(done.length).toBeGreaterThanOrEqual(4);
    expect([...ran].sort()).toEqual(done.sort());
    const [row] = await r.schedules();
    expect(row!.firingAt).toBeNull();
  });
});
