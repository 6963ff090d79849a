/** Conformance: reads, prune, ids and JSON round trips (spec §1.4, §4.6, §4.7, §9, §10.3). */
import type { QueueStats } from "../../store/store.js";
import {
  claimId,
  claimReq,
  completeId,
  type Define,
  failId,
  fenceOf,
  GRACE,
  ids,
  must,
  newTask,
  unlimited,
} from "./kit.js";

const byQueue = (s: QueueStats[]) =>
  [...s].sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0));

export function registerReadTests(it: Define): void {
  it("§9.1 get returns null for an unknown id; needsOf lists a task's needs in id order", async ({
    store,
    expect,
  }) => {
    const [a, b, c] = await ids(store, [
      newTask(),
      newTask(),
      newTask({ needs: [{ index: 1 }, { index: 0 }] }),
    ]);
    expect(await store.get(987_654)).toBeNull();
    expect(await store.needsOf(c!)).toEqual([a, b]);
    expect(await store.needsOf(a!)).toEqual([]);
    expect(await store.steps(987_654)).toEqual([]);
    expect(await store.events(987_654)).toEqual([]);
  });

  it("§9.1 list filters by status, outcome, queue, job and name, newest first", async ({ store, expect }) => {
    const [j1, j2] = await ids(store, [
      newTask({ name: "ok", job: "J" }),
      newTask({ name: "boom", job: "J" }),
    ]);
    const [s] = await ids(store, [newTask({ name: "ok", queue: "side" })]);
    const [w] = await ids(store, [newTask({ name: "ok", delayMs: 60_000 })]);
    await completeId(store, j1!);
    await failId(store, j2!);
    const list = async (f: object) => (await store.list({ limit: 100, ...f })).map((t) => t.id);
    expect(await list({ job: "J" })).toEqual([j2, j1]);
    expect(await list({ queue: "side" })).toEqual([s]);
    expect(await list({ name: "boom" })).toEqual([j2]);
    expect(await list({ status: "waiting" })).toEqual([w]);
    expect(await list({ status: "pending" })).toEqual([s]);
    expect(await list({ outcome: "failed" })).toEqual([j2]);
    expect(await list({ status: "terminal", queue: "default" })).toEqual([j2, j1]);
    expect(await list({ name: "ok", queue: "default" })).toEqual([w, j1]);
    expect(await list({ job: "none" })).toEqual([]);
    expect(await list({})).toEqual([w, s, j2, j1]);
  });

  it("§9.1 list pages newest first with a `before` cursor and its limit", async ({ store, expect }) => {
    const all = await ids(
      store,
      Array.from({ length: 7 }, () => newTask()),
    );
    const seen: number[] = [];
    let before: number | undefined;
    for (let i = 0; i < 10; i++) {
      const page = await store.list({ limit: 3, ...(before === undefined ? {} : { before }) });
      expect(page.length).toBeLessThan(4);
      if (page.length === 0) break;
      seen.push(...page.map((t) => t.id));
      before = page[page.length - 1]!.id;
    }
    expect(seen).toEqual([...all].reverse());
    expect(await store.list({ limit: 1000 })).toHaveLength(7);
    expect((await store.list({ limit: 2, before: all[3]! })).map((t) => t.id)).toEqual([all[2], all[1]]);
  });

  it("§9.1 jobStatus counts per status and outcome, with total, and is settled only when nothing is live", async ({
    store,
    expect,
  }) => {
    const [ok, bad, later] = await ids(store, [
      newTask({ name: "ok", job: "J" }),
      newTask({ name: "bad", job: "J" }),
      newTask({ job: "J", delayMs: 60_000 }),
      newTask({ job: "other" }),
    ]);
    await completeId(store, ok!);
    await failId(store, bad!);
    expect(await store.jobStatus("J")).toEqual({
      job: "J",
      total: 3,
      byStatus: { terminal: 2, waiting: 1 },
      byOutcome: { completed: 1, failed: 1 },
      settled: false,
    });
    await store.abort(later!);
    expect(await store.jobStatus("J")).toEqual({
      job: "J",
      total: 3,
      byStatus: { terminal: 3 },
      byOutcome: { completed: 1, failed: 1, aborted: 1 },
      settled: true,
    });
    expect(await store.jobStatus("unknown")).toEqual({
      job: "unknown",
      total: 0,
      byStatus: {},
      byOutcome: {},
      settled: true,
    });
  });

  it("§9.2 stats counts tasks by queue, status and outcome", async ({ store, expect }) => {
    expect(await store.stats()).toEqual([]);
    const [done, bad, run] = await ids(store, [
      newTask({ name: "done" }),
      newTask({ name: "bad" }),
      newTask({ name: "run" }),
      newTask({ delayMs: 60_000 }),
      newTask(),
      newTask({ queue: "side" }),
      newTask({ queue: "side" }),
    ]);
    await completeId(store, done!);
    await failId(store, bad!);
    await claimId(store, run!);
    expect(byQueue(await store.stats())).toEqual([
      {
        queue: "default",
        byStatus: { terminal: 2, running: 1, waiting: 1, pending: 1 },
        byOutcome: { completed: 1, failed: 1 },
      },
      { queue: "side", byStatus: { pending: 2 }, byOutcome: {} },
    ]);
  });

  it("§9.5 depths reads each queue's live tasks, by queue name; a queue whose tasks ended reads 0", async ({
    store,
    expect,
  }) => {
    expect(await store.depths()).toEqual([]);
    const [done, bad, run, side] = await ids(store, [
      newTask({ name: "done" }),
      newTask({ name: "bad" }),
      newTask({ name: "run" }),
      newTask({ queue: "side" }),
      newTask({ delayMs: 60_000 }),
      newTask(),
      newTask({ queue: "Zeta" }),
    ]);
    expect(await store.depths()).toEqual([
      { queue: "Zeta", live: 1 },
      { queue: "default", live: 5 },
      { queue: "side", live: 1 },
    ]);
    await completeId(store, done!);
    await failId(store, bad!);
    await claimId(store, run!);
    await completeId(store, side!);
    expect(await store.depths()).toEqual([
      { queue: "Zeta", live: 1 },
      { queue: "default", live: 3 },
      { queue: "side", live: 0 },
    ]);
  });

  it("§9.3 nextRunAt: null when nothing is due, now when a task is pending, else the earliest timer or lease expiry", async ({
    clock,
    store,
    expect,
  }) => {
    expect(await store.nextRunAt()).toBeNull();
    const t0 = clock.now();
    const [later] = await ids(store, [newTask({ delayMs: 50_000 })]);
    // A needs-blocked waiting task has no timer and does not count.
    await ids(store, [newTask({ needs: [{ id: later! }] })]);
    expect(await store.nextRunAt()).toBe(t0 + 50_000);
    await ids(store, [newTask({ delayMs: 20_000 })]);
    expect(await store.nextRunAt()).toBe(t0 + 20_000);
    const [now] = await ids(store, [newTask({ name: "now", maxMs: 1_000 })]);
    expect(await store.nextRunAt()).toBe(clock.now());
    // A running task's lease counts: a dead holder's task becomes ready when it expires.
    await claimId(store, now!, { leaseGraceMs: 1_000 });
    expect(await store.nextRunAt()).toBe(t0 + 2_000);
    clock.advance(5_000);
    expect(await store.nextRunAt()).toBe(t0 + 2_000);
  });

  it("§8.3 countReady counts due pending tasks in the given queues with the given names, up to cap", async ({
    store,
    expect,
  }) => {
    await ids(store, [
      newTask(),
      newTask(),
      newTask(),
      newTask({ name: "u" }),
      newTask({ delayMs: 60_000 }),
      newTask({ queue: "q2" }),
    ]);
    expect(await store.countReady(["default"], ["t"], 10)).toBe(3);
    expect(await store.countReady(["default"], ["t"], 2)).toBe(2);
    expect(await store.countReady(["default", "q2"], ["t", "u"], 10)).toBe(5);
    expect(await store.countReady(["default"], ["zzz"], 10)).toBe(0);
    expect(await store.countReady(["default"], [], 10)).toBe(0);
  });

  it("§10.3 terminal tasks are kept until pruned; prune deletes only old terminal tasks, in bounded batches, with their steps and events", async ({
    clock,
    store,
    expect,
  }) => {
    const done = await ids(
      store,
      Array.from({ length: 5 }, () => newTask()),
    );
    const [live] = await ids(store, [newTask({ delayMs: 60_000 })]);
    const [run] = await ids(store, [newTask({ name: "run" })]);
    const held = await claimId(store, run!);
    for (const c of await store.claim(claimReq())) {
      await store.commitStep(fenceOf(c), "s", "1");
      await store.settle([
        { kind: "fail", fence: fenceOf(c), outcome: "failed", error: { name: "E", message: "m" } },
      ]);
    }
    clock.advance(10_000);
    expect(await store.prune(60_000, 100)).toBe(0);
    expect(await store.prune(5_000, 2)).toBe(2);
    expect(await store.prune(5_000, 2)).toBe(2);
    expect(await store.prune(5_000, 2)).toBe(1);
    expect(await store.prune(5_000, 2)).toBe(0);
    for (const id of done) {
      expect(await store.get(id)).toBeNull();
      expect(await store.steps(id)).toEqual([]);
      expect(await store.events(id)).toEqual([]);
    }
    expect((await must(store, live!)).status).toBe("waiting");
    expect((await must(store, run!)).status).toBe("running");
    await store.heartbeat(fenceOf(held), 1_000, GRACE);
  });

  it("§1.4 an id is never reused, not even after the newest task is pruned", async ({
    clock,
    store,
    expect,
  }) => {
    const [a] = await ids(store, [newTask()]);
    await completeId(store, a!);
    clock.advance(1_000);
    expect(await store.prune(0, 100)).toBe(1);
    const [b] = await ids(store, [newTask()]);
    expect(b).toBeGreaterThan(a!);
  });

  it("§4.6 / §4.7 inputs, results, step results and errors read back exactly as written (values and key order)", async ({
    store,
    expect,
  }) => {
    const values: [string, unknown][] = [
      ["key order", { b: 1, a: [1, 2.5, -3e-7, 1e21, { z: null, y: true }], "": "empty key", ü: "ü ✓ 🚀" }],
      ["numeric-looking keys", { "10": 1, "2": 2, x: { "1": "a", b: "c" } }],
      ["NUL in a string", "nul \u0000 inside"],
      ["lone surrogate", "lone \ud800 surrogate"],
      ["line separators and escapes", 'line\u2028sep\u2029 "quoted" \\ \n\t'],
      ["number edge cases", [0, -1.5, Number.MAX_SAFE_INTEGER, 5e-324, 1.7976931348623157e308, 0.1 + 0.2]],
      ["empty values", ["", [], {}, null, false]],
      ["deep nesting", JSON.parse(`${"[".repeat(60)}1${"]".repeat(60)}`)],
    ];
    const problems: string[] = [];
    const same = (what: string, got: unknown, want: unknown) => {
      if (JSON.stringify(got) !== JSON.stringify(want)) {
        problems.push(`${what}: wrote ${JSON.stringify(want)}, read ${JSON.stringify(got)}`);
      }
    };
    for (const [label, v] of values) {
      const text = JSON.stringify(v);
      let id: number;
      try {
        [id] = (await store.enqueue([newTask({ name: "json", input: text })], unlimited)).map(
          (e) => e.id,
        ) as [number];
      } catch (e) {
        problems.push(`${label}: enqueue threw ${String(e)}`);
        continue;
      }
      same(`${label} (input)`, (await must(store, id)).input, v);
      try {
        const c = await claimId(store, id);
        await store.commitStep(fenceOf(c), "s", text);
        same(`${label} (step result)`, (await store.steps(id))[0]?.result, v);
        same(`${label} (loadSteps)`, (await store.loadSteps(id)).get("s"), v);
        await store.settle([{ kind: "complete", fence: fenceOf(c), result: text }]);
        same(`${label} (task result)`, (await must(store, id)).result, v);
      } catch (e) {
        problems.push(`${label}: ${String(e)}`);
      }
    }
    const error = {
      name: "Weird\u0000Error",
      message: `m ${"x".repeat(4_000)} \ud800 ü`,
      stack: `s ${"y".repeat(16_000)}`,
      code: "E_W",
    };
    const [e] = await ids(store, [newTask({ name: "err" })]);
    try {
      const c = await claimId(store, e!);
      await store.settle([{ kind: "retry", fence: fenceOf(c), delayMs: 0, error }]);
      same("error (task)", (await must(store, e!)).error, error);
      same(
        "error (event detail)",
        ((await store.events(e!))[0]?.detail as { error?: unknown })?.error,
        error,
      );
    } catch (err) {
      problems.push(`error: ${String(err)}`);
    }
    expect(problems, "values that did not read back as written").toEqual([]);
  });
}
