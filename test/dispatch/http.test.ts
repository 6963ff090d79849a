/** The dispatch HTTP API (spec §20.27) over a real socket, on SQLite and PostgreSQL. */
import { expect, it } from "vitest";
import { PipelineError } from "../../src/core/dispatch/pipeline.js";
import { DispatchRunner } from "../../src/dispatch/runner/runner.js";
import { FakeWorker } from "../../src/dispatch/workers/fake.js";
import type { Ratchet } from "../../src/engine/ratchet.js";
import { ConfigError } from "../../src/errors.js";
import { createServer } from "../../src/server/server.js";
import type { DispatchCapable } from "../../src/store/dispatch/ops.js";
import { FakeClock, forEachBackend, openRatchet } from "../engine/helpers.js";
import { errorOf, startServer, TOKEN } from "../server/kit.js";

forEachBackend(() => {
  it("§20.27 items, attempts, timelines, close-outs, wakes, seats and the board over HTTP", async () => {
    const clock = new FakeClock();
    const r = await openRatchet([], { clock });
    const { call } = await startServer(r, { token: TOKEN, dashboard: false });
    const store = r.store as unknown as DispatchCapable;
    const worker = new FakeWorker({ clock, programs: { wait: (s) => s.say("hi\n") } });
    const spawn = { command: ["wait"] };
    const runner = new DispatchRunner({
      store,
      pipelines: [{ name: "fix", steps: [{ name: "build", worker: "fake", spawn }] }],
      workers: [worker],
      timeouts: { stopGraceSeconds: 0 },
    });

    const added = await call("/api/dispatch/items", {
      json: { pipeline: "fix", step: "build", input: { title: "t" } },
    });
    expect(added.status).toBe(201);
    const { item } = (await added.json()) as { item: { id: string; input: string } };
    expect(JSON.parse(item.input)).toEqual({ title: "t" });
    expect(
      await errorOf(
        await call("/api/dispatch/items", { json: { pipeline: "fix", step: "build", extra: 1 } }),
      ),
    ).toMatchObject({
      status: 400,
      code: "RATCHET_INVALID_INPUT",
    });
    expect((await errorOf(await call("/api/dispatch/items?state=bogus"))).status).toBe(400);
    expect((await call("/api/dispatch/items", { token: null })).status).toBe(401);

    await runner.pass();
    const board = (await (await call("/api/dispatch/board?pipeline=fix")).json()) as {
      steps: Record<string, { id: string; attempt: { id: string; state: string } | null }[]>;
    };
    expect(board.steps.build!.map((i) => [i.id, i.attempt?.state])).toEqual([[item.id, "running"]]);
    const attemptId = board.steps.build![0]!.attempt!.id;

    expect((await errorOf(await call(`/api/dispatch/attempts/${attemptId}/wake`, { json: {} }))).status).toBe(
      404,
    );
    const co = await call(`/api/dispatch/attempts/${attemptId}/closeout`, {
      json: { outcome: "succeeded", summary: "fixed" },
    });
    expect(((await co.json()) as { attempt: { state: string } }).attempt.state).toBe("closing");
    expect(
      (
        await errorOf(
          await call(`/api/dispatch/attempts/${attemptId}/closeout`, { json: { outcome: "maybe" } }),
        )
      ).status,
    ).toBe(400);
    await runner.pass(); // stop
    await runner.pass(); // settle by the close-out

    const one = (await (await call(`/api/dispatch/attempts/${attemptId}`)).json()) as {
      attempt: { state: string };
      events: { kind: string }[];
    };
    expect(one.attempt.state).toBe("succeeded");
    expect(one.events.map((e) => e.kind)).toEqual(expect.arrayContaining(["claimed", "closeout", "settled"]));
    const list = (await (await call(`/api/dispatch/attempts?item=${item.id}&live=false`)).json()) as {
      attempts: unknown[];
    };
    expect(list.attempts).toHaveLength(1);
    const got = (await (await call(`/api/dispatch/items/${item.id}`)).json()) as { item: { state: string } };
    expect(got.item.state).toBe("done");
    expect((await errorOf(await call(`/api/dispatch/items/${item.id}/close`, { json: {} }))).status).toBe(
      404,
    );
    await store.dispatch.setSeatLimit("fake", 2);
    expect(await (await call("/api/dispatch/seats")).json()).toEqual({
      seats: [{ worker: "fake", limit: 2, held: 0, refusals: 0, backoffUntil: null }],
    });
  });
});

forEachBackend(() => {
  it("§20.28 GET /api/dispatch/attempts/{id}/why explains an attempt with the server's pipelines and timeouts", async () => {
    const clock = new FakeClock();
    const r = await openRatchet([], { clock });
    const pipelines = [
      {
        name: "fix",
        steps: [{ name: "build", worker: "fake", spawn: { command: ["wait"] }, timeoutMinutes: 7 }],
      },
    ];
    const timeouts = { stallMinutes: 11 };
    const { call } = await startServer(r, {
      token: TOKEN,
      dashboard: false,
      dispatch: { pipelines, timeouts },
    });
    const bare = await startServer(r, { token: TOKEN, dashboard: false });
    const store = r.store as unknown as DispatchCapable;
    const worker = new FakeWorker({ clock, programs: { wait: (s) => s.say("hi\n") } });
    const runner = new DispatchRunner({ store, pipelines, workers: [worker], timeouts });
    await store.dispatch.addItem("fix", "build", JSON.stringify({ title: "t" }));
    await runner.pass();
    const [a] = await store.dispatch.listAttempts({ live: true, limit: 10 });
    expect(a!.state).toBe("running");

    type Why = {
      attempt: string;
      reason: { kind: string; since: number; timeoutAt: number };
      sentence: string;
    };
    const why = (await (await call(`/api/dispatch/attempts/${a!.id}/why`)).json()) as Why;
    expect(why.attempt).toBe(a!.id);
    expect(why.reason.kind).toBe("running");
    expect(why.reason.timeoutAt).toBe(why.reason.since + 7 * 60_000);
    expect(why.sentence).toContain("stall-closed 11 min");
    // Without the configuration the server explains with the defaults (the CLI's rule, one function).
    const plain = (await (await bare.call(`/api/dispatch/attempts/${a!.id}/why`)).json()) as Why;
    expect(plain.reason.timeoutAt).toBe(plain.reason.since + 120 * 60_000);
    expect(plain.sentence).toContain("stall-closed 30 min");

    expect((await errorOf(await call("/api/dispatch/attempts/999999/why"))).status).toBe(404);
    expect((await errorOf(await call("/api/dispatch/attempts/nope/why"))).status).toBe(400);
    expect((await call(`/api/dispatch/attempts/${a!.id}/why`, { token: null })).status).toBe(401);
  });
});

it("§20.28 a server given a pipeline that fails its check is refused at createServer (spec §20.10)", () => {
  const bad = { name: "fix", steps: [{ name: "build", worker: "fake", spawn: { command: [] } }] };
  expect(() => createServer({} as Ratchet, { dispatch: { pipelines: [bad] } })).toThrow(PipelineError);
  expect(() => createServer({} as Ratchet, { dispatch: { timeouts: { stallMinutes: -1 } } })).toThrow(
    ConfigError,
  );
});

forEachBackend(() => {
  it("§20.30 GET /api/dispatch/items/{id} says an item is stuck, and POST …/move moves it to a step its pipeline has; bad input changes nothing", async () => {
    const r = await openRatchet([]);
    const pipelines = [
      { name: "fix", steps: [{ name: "build", worker: "fake", spawn: { command: ["wait"] } }] },
    ];
    const { call } = await startServer(r, { token: TOKEN, dashboard: false, dispatch: { pipelines } });
    const bare = await startServer(r, { token: TOKEN, dashboard: false });
    const store = r.store as unknown as DispatchCapable;
    const item = await store.dispatch.addItem("fix", "triage", "{}");
    const orphan = await store.dispatch.addItem("gone", "triage", "{}");

    type Got = { item: { step: string }; stuck: { kind: string; steps?: string[] } | null };
    const got = (await (await call(`/api/dispatch/items/${item.id}`)).json()) as Got;
    expect(got.stuck).toMatchObject({ kind: "unknown_step", steps: ["build"] });
    expect(((await (await bare.call(`/api/dispatch/items/${item.id}`)).json()) as Got).stuck).toBeNull();

    const move = (id: string, json: unknown, via = call) => via(`/api/dispatch/items/${id}/move`, { json });
    expect(await errorOf(await move(item.id, { step: "nope" }))).toMatchObject({ status: 400 });
    expect(await errorOf(await move(item.id, { step: "build", extra: 1 }))).toMatchObject({ status: 400 });
    expect(await errorOf(await move(item.id, { step: "build" }, bare.call))).toMatchObject({ status: 400 });
    expect(await errorOf(await move(orphan.id, { step: "build" }))).toMatchObject({ status: 400 });
    expect(await errorOf(await move("999999", { step: "build" }))).toMatchObject({ status: 404 });
    expect(await store.dispatch.getItem(item.id)).toEqual(item);

    const moved = await move(item.id, { step: "build" });
    expect(((await moved.json()) as Got).item.step).toBe("build");
    expect(((await (await call(`/api/dispatch/items/${item.id}`)).json()) as Got).stuck).toBeNull();
    await store.dispatch.closeItem(item.id);
    expect(await errorOf(await move(item.id, { step: "build" }))).toMatchObject({ status: 404 });
  });
});
