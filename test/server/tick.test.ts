/**
 * The HTTP tick driver, POST /api/tick (spec §8.12): its body bounds, its auth, its report, and that
 * it is one more driver on the store (spec §8.5): two HTTP ticks and a worker at once run each task
 * once. On both backends.
 */
import { expect, it } from "vitest";
import type { TaskContext } from "../../src/engine/context.js";
import { defineTask } from "../../src/engine/definition.js";
import { countTasks, forEachBackend, openRatchet, sharedStoreOptions } from "../engine/helpers.js";
import { errorOf, startServer, TOKEN } from "./kit.js";

forEachBackend(() => {
  it("§8.12 POST /api/tick runs what fits and answers with the tick report; bad bodies are 400 and run nothing", async () => {
    const hello = defineTask({ name: "hello", maxMs: 1_000, run: (_c, i: number) => i * 2 });
    const r = await openRatchet([hello]);
    const s = await startServer(r, { token: TOKEN });
    const ids = await r.enqueueMany([1, 2, 3].map((i) => ({ task: hello, input: i })));
    const bad: unknown[] = [
      {},
      { budgetMs: -1 },
      { budgetMs: 900_001 },
      { budgetMs: 1.5 },
      { budgetMs: "10000" },
      { budgetMs: 10_000, concurrency: 0 },
      { budgetMs: 10_000, concurrency: 1_001 },
      { budgetMs: 10_000, max: 5 },
      [10_000],
    ];
    for (const body of bad) {
      const res = await s.call("/api/tick", { json: body });
      expect({ body, ...(await errorOf(res)) }).toMatchObject({
        body,
        status: 400,
        code: "RATCHET_INVALID_INPUT",
      });
    }
    // Token-protected and JSON-only like every write.
    expect((await s.call("/api/tick", { token: null, json: { budgetMs: 10_000 } })).status).toBe(401);
    const form = await s.call("/api/tick", { method: "POST", body: '{"budgetMs":10000}' });
    expect(form.status).toBe(415);
    for (const id of ids) expect((await r.get(id))!.status).toBe("pending");

    const res = await s.call("/api/tick", { json: { budgetMs: 60_000, concurrency: 2 } });
    expect(res.status).toBe(200);
    const report = (await res.json()) as Record<string, unknown>;
    expect(report).toMatchObject({ ran: 3, done: 3, failed: 0, retried: 0, skipped: 0 });
    expect(Object.keys(report).sort()).toEqual([
      "budgetLeft",
      "done",
      "failed",
      "ms",
      "ran",
      "retried",
      "skipped",
    ]);
    for (const [i, id] of ids.entries())
      expect(await r.get(id)).toMatchObject({ outcome: "completed", result: (i + 1) * 2 });
    // A budget the task cannot fit (maxMs 1 s + 3 s reserve) starts nothing and counts it skipped.
    await r.enqueue(hello, 4);
    const small = await (await s.call("/api/tick", { json: { budgetMs: 2_000 } })).json();
    expect(small).toMatchObject({ ran: 0, skipped: 1 });
    expect(await countTasks(r)).toBe(4);
  });

  it("§8.12, §8.5 two concurrent HTTP ticks and a worker on one store run each task once", async () => {
    const N = 120;
    const runs = new Map<number, number>();
    const work = defineTask({
      name: "work",
      maxMs: 5_000,
      async run(ctx: TaskContext, i: number) {
        runs.set(ctx.taskId, (runs.get(ctx.taskId) ?? 0) + 1);
        return ctx.step("double", async () => i * 2);
      },
    });
    const shared = sharedStoreOptions();
    const served = await openRatchet([work], shared);
    const worker = await openRatchet([work], shared);
    const s = await startServer(served, { token: TOKEN });
    const ids = await served.enqueueMany(Array.from({ length: N }, (_, i) => ({ task: work, input: i })));
    const tick = () => s.call("/api/tick", { json: { budgetMs: 120_000, concurrency: 4 } });
    const [a, b] = await Promise.all([tick(), tick(), worker.start({ concurrency: 4 })]);
    expect([a!.status, b!.status]).toEqual([200, 200]);
    const reports = [await a!.json(), await b!.json()] as { ran: number; failed: number }[];
    await worker.waitForIdle({ timeoutMs: 60_000 });
    await worker.stop();
    for (const [i, id] of ids.entries())
      expect(await served.get(id)).toMatchObject({ outcome: "completed", attempts: 1, result: i * 2 });
    expect(ids.filter((id) => runs.get(id) !== 1)).toEqual([]);
    // Every claim was made by exactly one driver: the ticks' starts and the worker's claims add up to N.
    const byWorker = worker.workerCounters().claims;
    expect(reports[0]!.ran + reports[1]!.ran + byWorker).toBe(N);
    expect(reports.map((r) => r.failed)).toEqual([0, 0]);
  });
});
