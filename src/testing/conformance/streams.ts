/** Conformance: durable output streams (spec §16), through the Store interface only. */
import type { Fence, Store, TaskId } from "../../store/store.js";
import { MAX_STREAMS_PER_TASK, type StreamAppend } from "../../store/streams/ops.js";
import { claimId, type Define, fenceOf, ids, newTask } from "./kit.js";

const MAX = 1024 * 1024;

function batch(
  fence: Fence,
  expect: number,
  chunks: unknown[],
  over: Partial<StreamAppend> = {},
): StreamAppend {
  const texts = chunks.map((c) => JSON.stringify(c));
  return {
    fence,
    name: "out",
    expect,
    chunks: texts,
    bytes: texts.reduce((n, t) => n + Buffer.byteLength(t), 0),
    close: false,
    maxBytes: MAX,
    ...over,
  };
}

async function claimed(store: Store): Promise<{ id: TaskId; fence: Fence }> {
  const [id] = await ids(store, [newTask()]);
  const c = await claimId(store, id!);
  return { id: id!, fence: fenceOf(c) };
}

async function everything(store: Store, id: TaskId, name = "out", from = 0): Promise<unknown[]> {
  return (await store.readStream(id, name, from)).chunks.map((c) => c.data);
}

export function registerStreamTests(it: Define): void {
  it("§16.4 batches append at the committed length; offsets from 0 without gap; a read from any offset gives the rest", async ({
    store,
    expect,
  }) => {
    const { id, fence } = await claimed(store);
    expect(await store.streamInfo(id, "out")).toBeNull();
    expect(await store.appendStreams([batch(fence, 0, ["a", "b"])])).toEqual(["ok"]);
    expect(
      await store.appendStreams([batch(fence, 2, [{ n: 3 }]), batch(fence, 0, ["x"], { name: "other" })]),
    ).toEqual(["ok", "ok"]);
    expect(await store.appendStreams([batch(fence, 3, ["d", "e", "f"])])).toEqual(["ok"]);
    const all = ["a", "b", { n: 3 }, "d", "e", "f"];
    for (let from = 0; from <= all.length + 1; from++) {
      const r = await store.readStream(id, "out", from);
      expect(r.chunks.map((c) => c.offset)).toEqual(all.slice(from).map((_, i) => from + i));
      expect(r.chunks.map((c) => c.data)).toEqual(all.slice(from));
    }
    const info = await store.streamInfo(id, "out");
    expect(info).toMatchObject({ taskId: id, name: "out", length: 6, closed: false });
    expect(info!.bytes).toBe(all.reduce<number>((n, c) => n + Buffer.byteLength(JSON.stringify(c)), 0));
    expect((await store.listStreams(id)).map((s) => [s.name, s.length])).toEqual([
      ["other", 1],
      ["out", 6],
    ]);
  });

  it("§16.4 a batch sent again after its commit is not applied twice; a batch at another length is refused", async ({
    store,
    expect,
  }) => {
    const { id, fence } = await claimed(store);
    const first = batch(fence, 0, ["a", "b"]);
    expect(await store.appendStreams([first])).toEqual(["ok"]);
    expect(await store.appendStreams([first])).toEqual(["ok"]);
    expect(await everything(store, id)).toEqual(["a", "b"]);
    expect(await store.appendStreams([batch(fence, 1, ["z"])])).toEqual(["conflict"]);
    expect(await store.appendStreams([batch(fence, 5, ["z"])])).toEqual(["conflict"]);
    expect(await store.appendStreams([batch(fence, 3, ["z"], { name: "new" })])).toEqual(["conflict"]);
    expect(await everything(store, id)).toEqual(["a", "b"]);
    expect(await store.streamInfo(id, "new")).toBeNull();
  });

  it("§16.3 a fenced-out holder's batch changes nothing: after a reclaim and after the settlement", async ({
    clock,
    store,
    expect,
  }) => {
    const { id, fence } = await claimed(store);
    await store.appendStreams([batch(fence, 0, ["mine"])]);
    clock.advance(1_000 + 10_000 + 1);
    const again = fenceOf(await claimId(store, id));
    const [stale, fresh] = await store.appendStreams([
      batch(fence, 1, ["stale"]),
      batch(again, 1, ["fresh"]),
    ]);
    expect([stale, fresh]).toEqual(["lease_lost", "ok"]);
    expect(await store.settle([{ kind: "complete", fence: again, result: "null" }])).toEqual(["ok"]);
    expect(await store.appendStreams([batch(again, 2, ["late"])])).toEqual(["lease_lost"]);
    expect(await everything(store, id)).toEqual(["mine", "fresh"]);
    const r = await store.readStream(id, "out", 0);
    expect(r.ended).toBe(true);
    expect(r.exists).toBe(true);
  });

  it("§16.3 the abort mark does not refuse a holder's stream writes", async ({ store, expect }) => {
    const { id, fence } = await claimed(store);
    await store.abort(id);
    expect((await store.get(id))!.abortRequested).toBe(true);
    expect(await store.appendStreams([batch(fence, 0, ["partial"])])).toEqual(["ok"]);
    expect(await everything(store, id)).toEqual(["partial"]);
  });

  it("§16.2 a closed stream refuses more chunks; closing again is a no-op; a close with chunks commits both", async ({
    store,
    expect,
  }) => {
    const { id, fence } = await claimed(store);
    expect(await store.appendStreams([batch(fence, 0, ["a"], { close: true })])).toEqual(["ok"]);
    expect((await store.streamInfo(id, "out"))!.closed).toBe(true);
    expect(await store.appendStreams([batch(fence, 1, [], { close: true })])).toEqual(["ok"]);
    expect(await store.appendStreams([batch(fence, 1, ["b"])])).toEqual(["closed"]);
    expect(await everything(store, id)).toEqual(["a"]);
    expect((await store.readStream(id, "out", 1)).info!.closed).toBe(true);
  });

  it("§16.6 a batch past the stream's byte cap is refused whole; the 65th stream of a task is refused", async ({
    store,
    expect,
  }) => {
    const { id, fence } = await claimed(store);
    expect(await store.appendStreams([batch(fence, 0, ["12345678"], { maxBytes: 16 })])).toEqual(["ok"]);
    expect(await store.appendStreams([batch(fence, 1, ["1234", "5678"], { maxBytes: 16 })])).toEqual([
      "full",
    ]);
    expect(
      await store.appendStreams([batch(fence, 0, ["x".repeat(20)], { name: "big", maxBytes: 16 })]),
    ).toEqual(["full"]);
    expect(await everything(store, id)).toEqual(["12345678"]);
    const more: StreamAppend[] = [];
    for (let i = 1; i < MAX_STREAMS_PER_TASK; i++) more.push(batch(fence, 0, [i], { name: `s${i}` }));
    expect(new Set(await store.appendStreams(more))).toEqual(new Set(["ok"]));
    expect(await store.appendStreams([batch(fence, 0, ["one too many"], { name: "last" })])).toEqual([
      "too_many",
    ]);
    expect(await store.streamInfo(id, "last")).toBeNull();
    expect(await store.listStreams(id)).toHaveLength(MAX_STREAMS_PER_TASK);
  });

  it("§16.5 a read of an unknown task says so; of a stream not written yet, no info; a live task is not ended", async ({
    store,
    expect,
  }) => {
    const gone = await store.readStream(987_654, "out", 0);
    expect(gone).toMatchObject({ chunks: [], info: null, ended: true, exists: false });
    const { id } = await claimed(store);
    expect(await store.readStream(id, "out", 0)).toMatchObject({
      chunks: [],
      info: null,
      ended: false,
      exists: true,
    });
  });

  it("§16.5 a long stream is read in pages: each page continues at the next offset", async ({
    store,
    expect,
  }) => {
    const { id, fence } = await claimed(store);
    const items: StreamAppend[] = [];
    for (let i = 0; i < 250; i++) items.push(batch(fence, i * 2, [i * 2, i * 2 + 1]));
    expect(new Set(await store.appendStreams(items))).toEqual(new Set(["ok"]));
    const seen: number[] = [];
    for (let from = 0, pages = 0; from < 500; pages++) {
      expect(pages).toBeLessThan(10);
      const r = await store.readStream(id, "out", from);
      expect(r.chunks.length).toBeGreaterThan(0);
      for (const c of r.chunks) seen.push(c.data as number);
      from = r.chunks[r.chunks.length - 1]!.offset + 1;
    }
    expect(seen).toEqual(Array.from({ length: 500 }, (_, i) => i));
  });

  it("§16.7 prune deletes a task's streams with the task", async ({ clock, store, expect }) => {
    const { id, fence } = await claimed(store);
    await store.appendStreams([batch(fence, 0, ["a"]), batch(fence, 0, ["b"], { name: "two" })]);
    const { id: keep, fence: f2 } = await claimed(store);
    await store.appendStreams([batch(f2, 0, ["kept"])]);
    await store.settle([{ kind: "complete", fence, result: "null" }]);
    clock.advance(60_000);
    expect(await store.prune(30_000, 100)).toBe(1);
    expect(await store.listStreams(id)).toEqual([]);
    expect((await store.readStream(id, "out", 0)).chunks).toEqual([]);
    expect(await everything(store, keep)).toEqual(["kept"]);
  });
}
