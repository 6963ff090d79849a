/** The dispatch HTTP API (spec §20.27) over a real socket, on SQLite and PostgreSQL. */
import { expect, it } from "vitest";
import { DispatchRunner } from "../../src/dispatch/runner/runner.js";
import { FakeWorker } from "../../src/dispatch/workers/fake.js";
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
