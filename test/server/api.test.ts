/** The JSON API, endpoint by endpoint, on SQLite and PostgreSQL (docs/http.md). */
import { expect, it } from "vitest";
import type { TaskRecord } from "../../src/store/store.js";
import { countTasks, drain, forEachBackend, openRatchet, until } from "../engine/helpers.js";
import { errorOf, startServer, TASKS } from "./kit.js";

forEachBackend(() => {
  it("§2.1 HTTP API: POST /api/tasks enqueues a valid task (201, its id) and it runs", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const res = await s.call("/api/tasks", { json: { task: "greet", input: { name: "ana" }, priority: 3 } });
    expect(res.status).toBe(201);
    const { id } = (await res.json()) as { id: number };
    expect(await r.get(id)).toMatchObject({
      name: "greet",
      status: "pending",
      priority: 3,
      input: { name: "ana" },
    });
    await drain(r);
    expect(await r.get(id)).toMatchObject({ outcome: "completed", result: { hi: "ana" } });
  });

  it("§2.1 HTTP API: bad input is a 400 with the engine's code and writes nothing", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const cases: [unknown, string][] = [
      [{ task: "greet", input: { name: "" } }, "RATCHET_INVALID_INPUT"], // the task's schema
      [{ task: "greet", input: { name: "a" }, priority: 1.5 }, "RATCHET_INVALID_INPUT"],
      [{ task: "greet", input: { name: "a" }, runAfter: "tomorrow" }, "RATCHET_INVALID_INPUT"],
      [{ task: "greet", input: { name: "a" }, prioritty: 1 }, "RATCHET_INVALID_INPUT"], // misspelt field
      [{ task: { name: "greet", run: "x" }, input: {} }, "RATCHET_INVALID_INPUT"], // never a definition
      [{ input: {} }, "RATCHET_INVALID_INPUT"],
      [[{ task: "greet" }], "RATCHET_INVALID_INPUT"], // not an object
    ];
    for (const [body, code] of cases) {
      const e = await errorOf(await s.call("/api/tasks", { json: body }));
      expect({ body, status: e.status, code: e.code }).toEqual({ body, status: 400, code });
    }
    const bad = await s.call("/api/tasks", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    expect(await errorOf(bad)).toMatchObject({ status: 400, code: "RATCHET_INVALID_JSON" });
    const batch = await s.call("/api/tasks/batch", {
      json: {
        entries: [
          { task: "greet", input: { name: "ok" } },
          { task: "greet", input: { name: 7 } },
        ],
      },
    });
    expect(await errorOf(batch)).toMatchObject({ status: 400, code: "RATCHET_INVALID_INPUT" });
    const cycle = await s.call("/api/tasks/batch", {
      json: {
        entries: [
          { task: "greet", input: { name: "a" }, key: "a", needs: ["b"] },
          { task: "greet", input: { name: "b" }, key: "b", needs: ["a"] },
        ],
      },
    });
    expect(await errorOf(cycle)).toMatchObject({ status: 400, code: "RATCHET_CYCLE" });
    expect(await countTasks(r)).toBe(0);
  });

  it("§2.1 HTTP API: an unknown task name is a 422 RATCHET_UNKNOWN_TASK and writes nothing", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const e = await errorOf(await s.call("/api/tasks", { json: { task: "nope", input: {} } }));
    expect(e).toMatchObject({ status: 422, code: "RATCHET_UNKNOWN_TASK" });
    expect(e.message).toContain('"nope"');
    expect(await countTasks(r)).toBe(0);
  });

  it("§2.2 HTTP API: POST /api/tasks/batch enqueues entries in one call, with keys, needs and a job", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const res = await s.call("/api/tasks/batch", {
      json: {
        entries: [
          { task: "greet", input: { name: "a" }, key: "a", job: "j1" },
          { task: "greet", input: { name: "b" }, needs: ["a"], job: "j1", runAfter: "2020-01-01T00:00:00Z" },
        ],
      },
    });
    expect(res.status).toBe(201);
    const { ids } = (await res.json()) as { ids: number[] };
    expect(ids).toHaveLength(2);
    expect((await r.details(ids[1]!)).needs).toEqual([ids[0]]);
    const job = await (await s.call("/api/jobs/j1")).json();
    expect(job).toMatchObject({ job: "j1", total: 2, settled: false });
    await drain(r);
    expect(await (await s.call("/api/jobs/j1")).json()).toMatchObject({
      settled: true,
      byOutcome: { completed: 2 },
    });
  });

  it("§9.1 HTTP API: GET /api/tasks walks every page once, newest first, with an opaque cursor", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const ids = await r.enqueueMany(
      Array.from({ length: 23 }, (_, i) => ({ task: "greet", input: { name: `n${i}` } })),
    );
    const seen: number[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 10; page++) {
      const res = await s.call(`/api/tasks?limit=5${cursor ? `&cursor=${cursor}` : ""}`);
      expect(res.status).toBe(200);
      const body = (await res.json()) as { tasks: TaskRecord[]; nextCursor: string | null };
      expect(body.tasks.length).toBeLessThanOrEqual(5);
      seen.push(...body.tasks.map((t) => t.id));
      cursor = body.nextCursor;
      if (cursor === null) break;
      expect(cursor).not.toMatch(/^\d+$/);
    }
    expect(cursor).toBeNull();
    expect(seen).toEqual([...ids].reverse());
    // A page that ends exactly at the last task has no cursor.
    const exact = (await (await s.call("/api/tasks?limit=23")).json()) as { nextCursor: string | null };
    expect(exact.nextCursor).toBeNull();
  });

  it("§9.1 HTTP API: GET /api/tasks filters by queue, status, outcome, name, job and error text", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const [g1] = await r.enqueueMany([{ task: "greet", input: { name: "a" }, job: "J" }]);
    const [g2] = await r.enqueueMany([{ task: "greet", input: { name: "b" }, queue: "side" }]);
    const [b1] = await r.enqueueMany([{ task: "boom", input: null, job: "J" }]);
    await drain(r);
    const [later] = await r.enqueueMany([{ task: "greet", input: { name: "c" }, delayMs: 3_600_000 }]);
    const ids = async (q: string) =>
      ((await (await s.call(`/api/tasks?${q}`)).json()) as { tasks: TaskRecord[] }).tasks.map((t) => t.id);
    expect(await ids("queue=side")).toEqual([g2]);
    expect(await ids("status=waiting")).toEqual([later]);
    expect(await ids("outcome=failed")).toEqual([b1]);
    expect(await ids("name=greet&status=terminal")).toEqual([g1]); // g2's queue has no worker here
    expect(await ids("name=greet&queue=side&status=pending")).toEqual([g2]);
    expect(await ids("job=J")).toEqual([b1, g1]);
    expect(await ids("error=WIDGET%20BROKE")).toEqual([b1]);
    expect(await ids("error=no-such-text")).toEqual([]);
    for (const q of [
      "status=done",
      "outcome=ok",
      "limit=0",
      "limit=201",
      "cursor=zzz",
      "sort=id",
      "queue=%20x",
    ]) {
      const e = await errorOf(await s.call(`/api/tasks?${q}`));
      expect({ q, status: e.status, code: e.code }).toEqual({
        q,
        status: 400,
        code: "RATCHET_INVALID_INPUT",
      });
    }
  });

  it("§9.1 HTTP API: the error-text filter pages through matches without duplicates or omissions", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const entries = Array.from({ length: 12 }, (_, i) =>
      i % 3 === 0 ? { task: "boom", input: i } : { task: "greet", input: { name: `n${i}` } },
    );
    const ids = await r.enqueueMany(entries);
    await drain(r);
    const failed = ids.filter((_, i) => i % 3 === 0).reverse();
    const seen: number[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 10; page++) {
      const body = (await (
        await s.call(`/api/tasks?error=kaboom&limit=1${cursor ? `&cursor=${cursor}` : ""}`)
      ).json()) as { tasks: TaskRecord[]; nextCursor: string | null };
      seen.push(...body.tasks.map((t) => t.id));
      cursor = body.nextCursor;
      if (cursor === null) break;
    }
    expect(seen).toEqual(failed);
  });

  it("§9.1 HTTP API: GET /api/tasks/:id returns the task with needs, steps, events, error and progress", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const id = await r.enqueue("boom", null);
    await drain(r);
    const res = await s.call(`/api/tasks/${id}`);
    expect(res.status).toBe(200);
    const d = (await res.json()) as {
      task: TaskRecord;
      needs: number[];
      steps: unknown[];
      events: { kind: string }[];
    };
    expect(d.task).toMatchObject({
      id,
      outcome: "failed",
      attempts: 1,
      error: { message: "kaboom: the widget broke" },
    });
    expect(d.needs).toEqual([]);
    expect(d.events.map((e) => e.kind)).toContain("failed");
    expect(await errorOf(await s.call("/api/tasks/999999"))).toMatchObject({
      status: 404,
      code: "RATCHET_NOT_FOUND",
    });
    for (const bad of ["0", "-1", "abc", "1.5", "99999999999999999999"])
      expect(await errorOf(await s.call(`/api/tasks/${bad}`))).toMatchObject({
        status: 400,
        code: "RATCHET_INVALID_INPUT",
      });
  });

  it("§12.10 HTTP API: GET /api/tasks/:id/tree and /explain describe a task; unknown ids are 404", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const id = await r.enqueue("greet", { name: "x" }, { delayMs: 3_600_000 });
    const tree = (await (await s.call(`/api/tasks/${id}/tree`)).json()) as {
      task: TaskRecord;
      children: unknown[];
      truncated: boolean;
    };
    expect(tree).toMatchObject({ task: { id }, children: [], truncated: false });
    const why = (await (await s.call(`/api/tasks/${id}/explain`)).json()) as {
      id: number;
      reason: { kind: string };
      text: string;
    };
    expect(why.id).toBe(id);
    expect(why.text.length).toBeGreaterThan(0);
    expect((await s.call("/api/tasks/424242/tree")).status).toBe(404);
    expect((await s.call("/api/tasks/424242/explain")).status).toBe(404);
    expect(await errorOf(await s.call(`/api/tasks/${id}/tree?limit=0`))).toMatchObject({ status: 400 });
  });

  it("§6.3 HTTP API: POST /api/tasks/:id/retry runs a failed task again; a live one is a 409", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const failed = await r.enqueue("boom", null);
    await drain(r);
    const res = await s.call(`/api/tasks/${failed}/retry`, { json: {} });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { task: TaskRecord }).task).toMatchObject({
      id: failed,
      status: "pending",
    });
    const live = await r.enqueue("greet", { name: "x" }, { delayMs: 3_600_000 });
    expect(await errorOf(await s.call(`/api/tasks/${live}/retry`, { json: {} }))).toMatchObject({
      status: 409,
      code: "RATCHET_INVALID_STATE",
    });
    expect((await s.call("/api/tasks/424242/retry", { json: {} })).status).toBe(404);
  });

  it("§7 HTTP API: POST /api/tasks/:id/abort aborts a task; an ended one reports terminal", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const id = await r.enqueue("greet", { name: "x" }, { delayMs: 3_600_000 });
    expect(await (await s.call(`/api/tasks/${id}/abort`, { json: {} })).json()).toEqual({ state: "aborted" });
    expect(await r.get(id)).toMatchObject({ outcome: "aborted" });
    expect(await (await s.call(`/api/tasks/${id}/abort`, { json: {} })).json()).toEqual({
      state: "terminal",
      outcome: "aborted",
    });
    expect(await errorOf(await s.call(`/api/tasks/${id}/abort`, { json: { now: true } }))).toMatchObject({
      status: 400,
    });
  });

  it("§12.5 HTTP API: POST /api/scopes/:scope/abort marks the scope's live tasks", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const a = await r.enqueue("greet", { name: "a" }, { scope: "conv-1", delayMs: 3_600_000 });
    const b = await r.enqueue("greet", { name: "b" }, { scope: "conv-1", delayMs: 3_600_000 });
    const other = await r.enqueue("greet", { name: "c" }, { scope: "conv-2", delayMs: 3_600_000 });
    const res = await s.call("/api/scopes/conv-1/abort", { json: { background: true } });
    expect(await res.json()).toEqual({ scope: "conv-1", marked: 2 });
    await until(
      async () => (await r.get(a))?.status === "terminal" && (await r.get(b))?.status === "terminal",
    );
    expect((await r.get(other))?.status).toBe("waiting");
    expect(
      await errorOf(await s.call("/api/scopes/conv-2/abort", { json: { background: "yes" } })),
    ).toMatchObject({
      status: 400,
    });
  });

  it("§12.7 HTTP API: POST /api/signals/:name sends a signal once; the task waiting for it completes", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const id = await r.enqueue("slow", { gate: "go-1" });
    await drain(r);
    expect((await r.get(id))?.status).toBe("waiting");
    expect(await (await s.call("/api/signals/go-1", { json: { payload: { by: "ana" } } })).json()).toEqual({
      first: true,
      woken: 1,
    });
    expect(await (await s.call("/api/signals/go-1", { json: {} })).json()).toMatchObject({ first: false });
    await drain(r);
    expect(await r.get(id)).toMatchObject({ outcome: "completed", result: { signalled: true } });
    expect(
      await errorOf(await s.call("/api/signals/x", { json: { payload: "a".repeat(2 * 1024 * 1024) } })),
    ).toMatchObject({
      status: 413,
    });
  });

  it("§9.2 HTTP API: GET /api/stats, /api/inspect and /api/schedules report the store", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    await r.enqueue("greet", { name: "a" });
    await r.enqueue("greet", { name: "b" }, { queue: "side", delayMs: 3_600_000 });
    await r.schedule("nightly", "0 3 * * *", "greet", { name: "n" });
    const stats = (await (await s.call("/api/stats")).json()) as {
      queues: { queue: string; byStatus: object }[];
    };
    expect(stats.queues).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ queue: "default", byStatus: { pending: 1 } }),
        expect.objectContaining({ queue: "side", byStatus: { waiting: 1 } }),
      ]),
    );
    const insp = (await (await s.call("/api/inspect?limit=10")).json()) as { tasks: unknown[] };
    expect(insp.tasks).toHaveLength(2);
    const sch = (await (await s.call("/api/schedules")).json()) as { schedules: { name: string }[] };
    expect(sch.schedules.map((x) => x.name)).toEqual(["nightly"]);
  });

  it("§14.9 HTTP API: GET/PUT /api/concurrency sets, lists and clears run-time limits", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const put = await s.call("/api/concurrency/openai", { method: "PUT", json: { limit: 3, key: "acme" } });
    expect(await put.json()).toEqual({ woken: 0 });
    expect(await (await s.call("/api/concurrency")).json()).toMatchObject({
      overrides: [{ seat: "openai:acme", limit: 3 }],
    });
    await s.call("/api/concurrency/openai", { method: "PUT", json: { limit: null, key: "acme" } });
    expect(await (await s.call("/api/concurrency")).json()).toMatchObject({ overrides: [] });
    for (const json of [{ limit: -1 }, { limit: "3" }, {}, { limit: 1, key: 5 }])
      expect((await s.call("/api/concurrency/openai", { method: "PUT", json })).status).toBe(400);
    expect((await s.call("/api/concurrency/bad%20group", { method: "PUT", json: { limit: 1 } })).status).toBe(
      400,
    );
  });

  it("HTTP API: an unknown route or method is a JSON 404", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    expect(await errorOf(await s.call("/api/nothing"))).toMatchObject({
      status: 404,
      code: "RATCHET_NOT_FOUND",
    });
    expect((await s.call("/api/stats", { method: "DELETE" })).status).toBe(404);
  });
});
