/** GET /api/tasks/:id/streams[/:name]: a task's durable output streams over SSE (spec §16.8), both stores. */
import { expect, it } from "vitest";
import { defineTask } from "../../src/engine/definition.js";
import { deferred, drain, forEachBackend, onCleanup, openRatchet } from "../engine/helpers.js";
import { errorOf, startServer, TOKEN } from "./kit.js";
import { openSse, type SseEvent } from "./sse.js";

const isChunk = (e: SseEvent) => e.event === "chunk";

forEachBackend(() => {
  it("§16.8 a stream over SSE: event ids are offsets, Last-Event-ID resumes after one, ?from starts at one, end closes it", async () => {
    const more = deferred();
    const writer = defineTask({
      name: "writer",
      async run(ctx) {
        const out = await ctx.stream("answer");
        for (const w of ["Hello", ", ", "world"]) out.write(w);
        await out.flush();
        await more.promise;
        out.write({ tokens: 3 });
        await out.close();
        return null;
      },
    });
    const r = await openRatchet([writer]);
    const s = await startServer(r, { token: TOKEN });
    const auth = { authorization: `Bearer ${TOKEN}` };
    const id = await r.enqueue(writer);
    const ticking = drain(r);

    const live = await openSse(`${s.url}/api/tasks/${id}/streams/answer`, auth);
    onCleanup(() => live.close());
    expect(live.status).toBe(200);
    const first3 = [await live.next(isChunk), await live.next(isChunk), await live.next(isChunk)];
    expect(first3.map((e) => [e.id, e.data])).toEqual([
      ["0", "Hello"],
      ["1", ", "],
      ["2", "world"],
    ]);
    // A second client that saw offset 1 reconnects: it gets 2 and what follows.
    const resumed = await openSse(`${s.url}/api/tasks/${id}/streams/answer`, {
      ...auth,
      "last-event-id": "1",
    });
    onCleanup(() => resumed.close());
    expect((await resumed.next(isChunk)).id).toBe("2");
    more.resolve();
    expect(await live.next(isChunk)).toMatchObject({ id: "3", data: { tokens: 3 } });
    expect((await live.next((e) => e.event === "end")).data).toEqual({ next: 4 });
    expect((await resumed.next(isChunk)).id).toBe("3");
    await ticking;

    const from = await openSse(`${s.url}/api/tasks/${id}/streams/answer?from=3`, auth);
    onCleanup(() => from.close());
    expect((await from.next(isChunk)).id).toBe("3");
    expect((await from.next((e) => e.event === "end")).data).toEqual({ next: 4 });

    const list = await s.call(`/api/tasks/${id}/streams`);
    expect(list.status).toBe(200);
    expect(await list.json()).toMatchObject({ streams: [{ name: "answer", length: 4, closed: true }] });
  });

  it("§16.8 ?follow=false ends at the committed end of a live stream", async () => {
    const gate = deferred();
    const t = defineTask({
      name: "open-ended",
      async run(ctx) {
        const out = await ctx.stream("log");
        out.write("line 1");
        await out.flush();
        await gate.promise;
        return null;
      },
    });
    const r = await openRatchet([t]);
    const s = await startServer(r);
    const id = await r.enqueue(t);
    const ticking = drain(r);
    const sse = await openSse(`${s.url}/api/tasks/${id}/streams/log?follow=true`);
    onCleanup(() => sse.close());
    await sse.next(isChunk);
    const snap = await openSse(`${s.url}/api/tasks/${id}/streams/log?follow=false`);
    onCleanup(() => snap.close());
    expect(await snap.next(isChunk)).toMatchObject({ id: "0", data: "line 1" });
    expect((await snap.next((e) => e.event === "end")).data).toEqual({ next: 1 });
    gate.resolve();
    await ticking;
  });

  it("§16.8 bad requests are refused with typed errors before a stream opens", async () => {
    const r = await openRatchet([]);
    const s = await startServer(r);
    const cases: [string, Record<string, string>, number, string][] = [
      ["/api/tasks/0/streams/out", {}, 400, "RATCHET_INVALID_INPUT"],
      ["/api/tasks/1/streams/out", {}, 404, "RATCHET_NOT_FOUND"],
      ["/api/tasks/1/streams", {}, 404, "RATCHET_NOT_FOUND"],
      ["/api/tasks/1/streams/out?from=-1", {}, 400, "RATCHET_INVALID_INPUT"],
      ["/api/tasks/1/streams/out?follow=maybe", {}, 400, "RATCHET_INVALID_INPUT"],
      ["/api/tasks/1/streams/out?bogus=1", {}, 400, "RATCHET_INVALID_INPUT"],
      ["/api/tasks/1/streams/out", { "last-event-id": "x1" }, 400, "RATCHET_INVALID_INPUT"],
      ["/api/tasks/1/streams/%00", {}, 400, "RATCHET_INVALID_INPUT"],
    ];
    for (const [path, headers, status, code] of cases) {
      const res = await s.call(path, { headers });
      expect([path, res.status]).toEqual([path, status]);
      expect(await errorOf(res)).toMatchObject({ code });
    }
  });
});
