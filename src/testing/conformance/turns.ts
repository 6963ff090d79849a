/**
 * Conformance: a model turn's one commit — its still-buffered stream batches, its step and its usage
 * rows in one transaction (spec §18.10, UsageOps.commitTurns) — through the Store interface only.
 */
import type { Fence, Store, TaskId } from "../../store/store.js";
import type { StreamAppend } from "../../store/streams/ops.js";
import type { TurnWrite, UsageRow } from "../../store/usage/ops.js";
import { claimId, type Define, fenceOf, ids, newTask, rejection } from "./kit.js";

function batch(fence: Fence, expect: number, chunks: unknown[], name = "answer"): StreamAppend {
  const texts = chunks.map((c) => JSON.stringify(c));
  const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t), 0);
  return { fence, name, expect, chunks: texts, bytes, close: false, maxBytes: 1024 * 1024 };
}

function usage(key: string, taskId: TaskId): UsageRow {
  return {
    key,
    status: "committed",
    conversationId: "c1",
    taskId,
    provider: "faux",
    model: "m1",
    route: "faux/m1",
    input: 10,
    output: 5,
    cached: 0,
    reasoning: 0,
    cost: 0.5,
  };
}

function turn(x: { id: TaskId; fence: Fence }, streams: StreamAppend[], name = "model:a"): TurnWrite {
  const rows = [usage(`${x.id}:${name}`, x.id)];
  return { fence: x.fence, name, result: JSON.stringify({ text: "ab" }), rows, streams };
}

async function claimed(store: Store): Promise<{ id: TaskId; fence: Fence }> {
  const [id] = await ids(store, [newTask()]);
  const c = await claimId(store, id!);
  return { id: id!, fence: fenceOf(c) };
}

async function chunks(store: Store, id: TaskId, name = "answer"): Promise<unknown[]> {
  return (await store.readStream(id, name, 0)).chunks.map((c) => c.data);
}

export function registerTurnTests(it: Define): void {
  it("§18.10 a turn's buffered chunks, its step and its usage commit together, once", async ({
    store,
    expect,
  }) => {
    const x = await claimed(store);
    expect(await store.appendStreams([batch(x.fence, 0, ["early"])])).toEqual(["ok"]);
    const w = turn(x, [batch(x.fence, 1, ["a", "b"]), batch(x.fence, 0, ["t"], "tools")]);
    expect(await store.usage.commitTurns([w])).toEqual([{ streams: ["ok", "ok"], step: "ok" }]);
    // A repeat (its answer was lost) recognises every part and writes nothing more.
    expect(await store.usage.commitTurns([w])).toEqual([{ streams: ["ok", "ok"], step: "ok" }]);
    expect(await chunks(store, x.id)).toEqual(["early", "a", "b"]);
    expect(await chunks(store, x.id, "tools")).toEqual(["t"]);
    expect((await store.loadSteps(x.id)).get("model:a")).toEqual({ text: "ab" });
    expect((await store.usage.usageTotals({ taskId: x.id })).responses).toBe(1);
    // A turn with nothing buffered is a step commit with its usage.
    expect(await store.usage.commitTurns([turn(x, [], "model:b")])).toEqual([{ streams: [], step: "ok" }]);
    expect((await store.usage.usageTotals({ taskId: x.id })).responses).toBe(2);
  });

  it("§18.10 a stale holder's turn writes neither its chunks nor its step; each turn of a group is fenced on its own", async ({
    store,
    expect,
  }) => {
    const a = await claimed(store);
    const b = await claimed(store);
    expect((await store.settle([{ kind: "complete", fence: b.fence, result: "null" }]))[0]).toBe("ok");
    const res = await store.usage.commitTurns([
      turn(a, [batch(a.fence, 0, ["a"])]),
      turn(b, [batch(b.fence, 0, ["b"])]),
    ]);
    expect(res).toEqual([
      { streams: ["ok"], step: "ok" },
      { streams: ["lease_lost"], step: "lease_lost" },
    ]);
    expect(await chunks(store, b.id)).toEqual([]);
    expect(await store.streamInfo(b.id, "answer")).toBeNull();
    expect((await store.loadSteps(b.id)).has("model:a")).toBe(false);
    expect((await store.usage.usageTotals({ taskId: b.id })).responses).toBe(0);
    expect(await chunks(store, a.id)).toEqual(["a"]);
  });

  it("§18.10 a refused batch keeps the turn's step unwritten; the batches before it commit, as a flush would", async ({
    store,
    expect,
  }) => {
    const x = await claimed(store);
    const closing = { ...batch(x.fence, 0, ["end"], "closed"), close: true };
    expect(await store.appendStreams([closing])).toEqual(["ok"]);
    const w = turn(x, [batch(x.fence, 0, ["a"]), batch(x.fence, 1, ["late"], "closed")]);
    expect(await store.usage.commitTurns([w])).toEqual([
      { streams: ["ok", "closed"], step: "stream_failed" },
    ]);
    expect(await chunks(store, x.id)).toEqual(["a"]);
    expect(await chunks(store, x.id, "closed")).toEqual(["end"]);
    expect((await store.loadSteps(x.id)).has("model:a")).toBe(false);
    expect((await store.usage.usageTotals({ taskId: x.id })).responses).toBe(0);
  });

  it("§18.10 the abort mark refuses a turn's step, not its chunks (spec §16.3)", async ({
    store,
    expect,
  }) => {
    const x = await claimed(store);
    await store.abort(x.id);
    const res = await store.usage.commitTurns([turn(x, [batch(x.fence, 0, ["partial"])])]);
    expect(res).toEqual([{ streams: ["ok"], step: "abort_marked" }]);
    expect(await chunks(store, x.id)).toEqual(["partial"]);
    expect((await store.loadSteps(x.id)).has("model:a")).toBe(false);
    expect((await store.usage.usageTotals({ taskId: x.id })).responses).toBe(0);
  });

  it("§18.10 a turn whose batch is under another fence, or with bad rows, is refused before anything is written", async ({
    store,
  }) => {
    const x = await claimed(store);
    const y = await claimed(store);
    await rejection(
      () => store.usage.commitTurns([turn(x, [batch(y.fence, 0, ["other's"])])]),
      "RATCHET_INVALID_INPUT",
    );
    const bad = { ...turn(x, [batch(x.fence, 0, ["a"])]), rows: [{ ...usage("k", x.id), input: -1 }] };
    await rejection(() => store.usage.commitTurns([bad]), "RATCHET_INVALID_INPUT");
    await rejection(
      () => store.usage.commitTurns([{ ...turn(x, []), streams: "no" as unknown as StreamAppend[] }]),
      "RATCHET_INVALID_INPUT",
    );
    for (const id of [x.id, y.id])
      if ((await store.streamInfo(id, "answer")) !== null) throw new Error("a refused turn wrote chunks");
  });
}
