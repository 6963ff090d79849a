/** GET /api/stream: Server-Sent Events of stats and watched tasks, on SQLite and PostgreSQL. */
import { expect, it } from "vitest";
import { forEachBackend, onCleanup, openRatchet, until } from "../engine/helpers.js";
import { errorOf, startServer, TASKS, TOKEN } from "./kit.js";
import { openSse, type SseEvent } from "./sse.js";

type TaskEventData = { id: number; status: string; outcome: string | null; progress: number | null };
const isTask = (id: number, status?: string) => (e: SseEvent) =>
  e.event === "task" &&
  (e.data as TaskEventData).id === id &&
  (status === undefined || (e.data as TaskEventData).status === status);

forEachBackend(() => {
  it("HTTP API: /api/stream sends a stats event every interval", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r, { streamIntervalMs: 50 });
    await r.enqueue("greet", { name: "a" }, { delayMs: 3_600_000 });
    const sse = await openSse(`${s.url}/api/stream`);
    onCleanup(() => sse.close());
    expect(sse.status).toBe(200);
    const first = await sse.next((e) => e.event === "stats");
    expect(first.data).toMatchObject({ queues: [{ queue: "default", byStatus: { waiting: 1 } }] });
    const second = await sse.next((e) => e.event === "stats");
    expect((second.data as { at: number }).at).toBeGreaterThanOrEqual((first.data as { at: number }).at);
  });

  it("HTTP API: /api/stream?watch= shows a watched task go pending → running (progress) → completed while a worker runs", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r, { streamIntervalMs: 50, token: TOKEN });
    const id = await r.enqueue("slow", { gate: "sse-go" });
    const sse = await openSse(`${s.url}/api/stream?watch=${id},424242`, { authorization: `Bearer ${TOKEN}` });
    onCleanup(() => sse.close());
    const missing = await sse.next((e) => e.event === "task" && (e.data as { id: number }).id === 424242);
    expect(missing.data).toEqual({ id: 424242, found: false });
    // The first read sends the baseline. The task may not be pending anymore if it ran fast; here it waits for a signal.
    expect((await sse.next(isTask(id))).data).toMatchObject({ id, status: "pending", attempts: 0 });
    await r.start({ concurrency: 2 });
    onCleanup(() => r.stop());
    const parked = await sse.next(isTask(id, "waiting"));
    expect(parked.data).toMatchObject({ progress: 0.5, progressNote: "half" });
    await r.signal("sse-go");
    const done = await sse.next(isTask(id, "terminal"));
    expect(done.data).toMatchObject({ id, outcome: "completed", progress: 0.5 });
  });

  it("HTTP API: /api/stream bounds its watch list and its open streams; a closed stream frees its slot", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r, { streamIntervalMs: 50, maxStreams: 1 });
    const many = Array.from({ length: 101 }, (_, i) => i + 1).join(",");
    expect(await errorOf(await s.call(`/api/stream?watch=${many}`))).toMatchObject({ status: 400 });
    expect(await errorOf(await s.call("/api/stream?watch=1,x"))).toMatchObject({ status: 400 });
    const one = await openSse(`${s.url}/api/stream`);
    await one.next((e) => e.event === "stats");
    expect(await errorOf(await s.call("/api/stream"))).toMatchObject({
      status: 503,
      code: "RATCHET_TOO_MANY_STREAMS",
    });
    await one.close();
    // The server notices the disconnect at its next write; then the slot is free again.
    const two = await until(async () => {
      const sse = await openSse(`${s.url}/api/stream`);
      if (sse.status === 200) return sse;
      await sse.close();
      return null;
    }, "the stream slot to be freed");
    onCleanup(() => two.close());
    expect((await two.next((e) => e.event === "stats")).event).toBe("stats");
  });

  it("HTTP API: closing the server ends open streams", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r, { streamIntervalMs: 50 });
    const sse = await openSse(`${s.url}/api/stream`);
    onCleanup(() => sse.close());
    await sse.next((e) => e.event === "stats");
    await s.server.close({ timeoutMs: 5_000 });
    await expect(sse.next(() => false, 10_000)).rejects.toThrow(/ended|terminated|aborted/i);
  });
});
