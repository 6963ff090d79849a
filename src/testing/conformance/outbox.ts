/** Conformance: the outbox's facts and destinations (spec part 21), through the Store interface only. */
import { appendFacts, appendFactsOfChanges } from "../../store/outbox/facts.js";
import { one } from "../../store/tree/program.js";
import type { Define } from "./kit.js";
import { claimReq, fenceOf, ids, newTask, rejection } from "./kit.js";

const fact = (n: number, type = "test.fact") => ({ type, subject: `thing:${n}`, data: { n } });

export function registerOutboxTests(it: Define): void {
  it("§21.2 facts appended by a program commit with it, in order, stamped with the store's clock; a throw after the insert emits nothing", async ({
    store,
    clock,
    expect,
  }) => {
    await store.outbox.append([fact(1), fact(2)]);
    const boom = new Error("after the insert");
    let caught: unknown;
    try {
      await store.outbox.run(function* () {
        yield* appendFacts([fact(3)]);
        throw boom;
      });
    } catch (e) {
      caught = e;
    }
    // A store wraps what a program throws (StoreError with the cause); either way nothing committed.
    expect(caught === boom || (caught as { cause?: unknown }).cause === boom).toBe(true);
    await store.outbox.run(function* () {
      yield* appendFacts([]);
      yield* appendFacts([fact(4, "other.fact")]);
    });
    const facts = await store.outbox.facts("0", 10);
    expect(facts.map((f) => f.data)).toEqual([{ n: 1 }, { n: 2 }, { n: 4 }]);
    expect(facts.map((f) => f.type)).toEqual(["test.fact", "test.fact", "other.fact"]);
    expect(facts.every((f) => f.at === clock.now() && f.id === `fact_${f.seq}`)).toBe(true);
    expect(Number(facts[0]!.seq)).toBeLessThan(Number(facts[1]!.seq));
    expect(await store.outbox.facts(facts[0]!.seq, 1)).toEqual([facts[1]]);
  });

  it("§21.17 a batch of changes appends its facts in the changes' order across statements; one bad change writes nothing", async ({
    store,
    expect,
  }) => {
    // 450 facts in 150 changes of three: more rows than one INSERT takes.
    const changes = Array.from({ length: 150 }, (_, c) => [fact(3 * c), fact(3 * c + 1), fact(3 * c + 2)]);
    await store.outbox.run(function* () {
      yield* appendFactsOfChanges([]);
      yield* appendFactsOfChanges(changes);
    });
    const facts = await store.outbox.facts("0", 1_000);
    expect(facts.map((f) => (f.data as { n: number }).n)).toEqual(Array.from({ length: 450 }, (_, i) => i));
    const seqs = facts.map((f) => Number(f.seq));
    expect(seqs.every((q, i) => i === 0 || q > seqs[i - 1]!)).toBe(true);
    // Each change is held to its own bound (spec §21.1): 101 facts in one change is refused, whole.
    const tooMany = Array.from({ length: 101 }, (_, i) => fact(i));
    await rejection(
      () => store.outbox.run(() => appendFactsOfChanges([[fact(1000)], tooMany])),
      "RATCHET_INVALID_INPUT",
    );
    expect(await store.outbox.facts(facts[449]!.seq, 10)).toEqual([]);
  });

  it("§21.17 in one settle batch, completions with facts that apply write theirs and a refused one writes none", async ({
    store,
    expect,
  }) => {
    await ids(store, [newTask(), newTask(), newTask()]);
    const [a, b, c] = await store.claim(claimReq({ limit: 3 }));
    const done = (t: typeof a, n: number) => ({
      kind: "complete" as const,
      fence: fenceOf(t!),
      result: "null",
      facts: [fact(n, "task.completed")],
    });
    const stale = { ...done(b, 2), fence: { ...fenceOf(b!), token: b!.epoch + 1 } };
    // A plain completion rides the same batch: the batch is not the one-statement path.
    const plain = { kind: "complete" as const, fence: fenceOf(c!), result: "null" };
    expect(await store.settle([done(a, 1), stale, plain])).toEqual(["ok", "lease_lost", "ok"]);
    expect((await store.outbox.facts("0", 10)).map((f) => f.data)).toEqual([{ n: 1 }]);
  });

  it("§21.2 a guarded write that loses yields no facts, so a lost race emits nothing", async ({
    store,
    expect,
  }) => {
    await store.outbox.append([fact(1)]);
    // The program's guard (a row that does not exist) loses; it returns before appending.
    const moved = await store.outbox.run(function* () {
      const r = yield* one("SELECT seq FROM {s}.ratchet_outbox WHERE seq = -1");
      if (!r) return false;
      yield* appendFacts([fact(2)]);
      return true;
    });
    expect(moved).toBe(false);
    expect((await store.outbox.facts("0", 10)).map((f) => f.data)).toEqual([{ n: 1 }]);
  });

  it("§21.1 bad facts are refused with typed errors and write nothing", async ({ store, expect }) => {
    await rejection(
      () => store.outbox.append([{ type: "NoDots", subject: "s", data: 1 }]),
      "RATCHET_INVALID_INPUT",
    );
    await rejection(
      () => store.outbox.append([{ type: "a.b", subject: "", data: 1 }]),
      "RATCHET_INVALID_INPUT",
    );
    await rejection(
      () => store.outbox.append([fact(1), { type: "a.b", subject: "s", data: "x".repeat(70_000) }]),
      "RATCHET_PAYLOAD_TOO_LARGE",
    );
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    await rejection(
      () => store.outbox.append([{ type: "a.b", subject: "s", data: cyclic }]),
      "RATCHET_INVALID_JSON",
    );
    await rejection(
      () => store.outbox.append(Array.from({ length: 101 }, (_, i) => fact(i))),
      "RATCHET_INVALID_INPUT",
    );
    await rejection(() => store.outbox.facts("-1", 10), "RATCHET_INVALID_INPUT");
    await rejection(() => store.outbox.ensureDestination("../etc", "start"), "RATCHET_INVALID_INPUT");
    expect(await store.outbox.facts("0", 10)).toEqual([]);
    expect(await store.outbox.destinations()).toEqual([]);
  });

  it("§21.8 §21.10 bad destination writes are refused with typed errors and change nothing", async ({
    store,
    expect,
  }) => {
    await store.outbox.append([fact(1), fact(2)]);
    const [f1, f2] = await store.outbox.facts("0", 2);
    await store.outbox.ensureDestination("d", "start");
    await store.outbox.lease("d", "s", 1_000);
    await store.outbox.advance("d", "s", "0", f2!.seq, 2);
    const before = await store.outbox.destinations();
    await rejection(() => store.outbox.advance("d", "s", f2!.seq, f1!.seq, 0), "RATCHET_INVALID_INPUT"); // backwards
    await rejection(() => store.outbox.advance("d", "s", "x", f2!.seq, 0), "RATCHET_INVALID_INPUT");
    await rejection(() => store.outbox.advance("d", "", f2!.seq, f2!.seq, 0), "RATCHET_INVALID_INPUT");
    await rejection(() => store.outbox.lease("d", "s", -1), "RATCHET_INVALID_INPUT");
    await rejection(
      () =>
        store.outbox.fail("d", "s", f2!.seq, { next: { kind: "retry", delayMs: Number.NaN }, error: "e" }),
      "RATCHET_INVALID_INPUT",
    );
    await rejection(() => store.outbox.prune(1_000, 0), "RATCHET_INVALID_INPUT");
    await rejection(() => store.outbox.prune(1_000, 10_001), "RATCHET_INVALID_INPUT");
    await rejection(() => store.outbox.ensureDestination("d", "middle" as "start"), "RATCHET_INVALID_INPUT");
    await rejection(() => store.outbox.retry("x".repeat(101)), "RATCHET_INVALID_INPUT");
    expect(await store.outbox.destinations()).toEqual(before);
    // A long error text is kept bounded.
    await store.outbox.fail("d", "s", f2!.seq, {
      next: { kind: "retry", delayMs: 5 },
      error: "e".repeat(5_000),
    });
    expect((await store.outbox.destinations())[0]!.lastError).toHaveLength(1_000);
  });

  it("§21.7 a destination is leased by one sender at a time; a lapsed lease passes to another; §21.8 the cursor moves only under the lease, from where it was read", async ({
    store,
    clock,
    expect,
  }) => {
    await store.outbox.append([fact(1), fact(2), fact(3)]);
    const d = await store.outbox.ensureDestination("hook", "start");
    expect(d).toMatchObject({ name: "hook", cursor: "0", state: "ok", failures: 0, holder: null });
    const seqs = (await store.outbox.facts("0", 10)).map((f) => f.seq);
    const a = await store.outbox.lease("hook", "a", 1_000);
    expect(a?.row.holder).toBe("a");
    expect(a?.now).toBe(clock.now());
    expect(await store.outbox.lease("hook", "b", 1_000)).toBeNull();
    expect(await store.outbox.advance("hook", "b", "0", seqs[1]!, 2)).toBe(false);
    expect(await store.outbox.advance("hook", "a", "0", seqs[1]!, 2)).toBe(true);
    // A second advance from the old cursor (a duplicate sender's write) is refused.
    expect(await store.outbox.advance("hook", "a", "0", seqs[2]!, 3)).toBe(false);
    clock.advance(1_000);
    const b = await store.outbox.lease("hook", "b", 1_000);
    expect(b?.row).toMatchObject({ holder: "b", cursor: seqs[1], delivered: 2, batches: 1 });
    expect(await store.outbox.advance("hook", "a", seqs[1]!, seqs[2]!, 1)).toBe(false);
    await store.outbox.release("hook", "b");
    expect((await store.outbox.lease("hook", "a", 1_000))?.row.cursor).toBe(seqs[1]);
    // An existing destination keeps its cursor; a new one may start at the end.
    expect((await store.outbox.ensureDestination("hook", "end")).cursor).toBe(seqs[1]);
    expect((await store.outbox.ensureDestination("late", "end")).cursor).toBe(seqs[2]);
  });

  it("§21.10 failures are recorded under the lease: retrying since the first with the last error, then dead; §21.11 retry clears dead", async ({
    store,
    clock,
    expect,
  }) => {
    await store.outbox.append([fact(1)]);
    await store.outbox.ensureDestination("hook", "start");
    await store.outbox.lease("hook", "a", 60_000);
    const t0 = clock.now();
    expect(
      await store.outbox.fail("hook", "b", "0", { next: { kind: "retry", delayMs: 500 }, error: "x" }),
    ).toBe(false);
    expect(
      await store.outbox.fail("hook", "a", "0", { next: { kind: "retry", delayMs: 500 }, error: "503" }),
    ).toBe(true);
    clock.advance(700);
    expect(
      await store.outbox.fail("hook", "a", "0", { next: { kind: "retry", delayMs: 900 }, error: "504" }),
    ).toBe(true);
    let [d] = await store.outbox.destinations();
    expect(d).toMatchObject({
      state: "retrying",
      failures: 2,
      since: t0,
      nextAt: t0 + 700 + 900,
      lastError: "504",
      failed: 2,
    });
    expect(
      await store.outbox.fail("hook", "a", "0", { next: { kind: "dead", batch: "hook:1-1" }, error: "410" }),
    ).toBe(true);
    [d] = await store.outbox.destinations();
    expect(d).toMatchObject({
      state: "dead",
      failures: 3,
      since: t0,
      nextAt: null,
      deadBatch: "hook:1-1",
      cursor: "0",
    });
    expect(await store.outbox.retry("nope")).toBeNull();
    expect(await store.outbox.retry("hook")).toMatchObject({
      state: "retrying",
      failures: 0,
      nextAt: null,
      deadBatch: null,
    });
    const [f] = await store.outbox.facts("0", 1);
    expect(await store.outbox.advance("hook", "a", "0", f!.seq, 1)).toBe(true);
    [d] = await store.outbox.destinations();
    expect(d).toMatchObject({
      state: "ok",
      failures: 0,
      since: null,
      lastError: null,
      lastOkAt: clock.now(),
    });
  });

  it("§21.13 the prune deletes, in bounded batches, only facts every destination passed and older than the retention", async ({
    store,
    clock,
    expect,
  }) => {
    await store.outbox.append([fact(1), fact(2), fact(3), fact(4)]);
    const seqs = (await store.outbox.facts("0", 10)).map((f) => f.seq);
    await store.outbox.ensureDestination("a", "start");
    await store.outbox.ensureDestination("b", "start");
    await store.outbox.lease("a", "s", 1_000);
    await store.outbox.lease("b", "s", 1_000);
    await store.outbox.advance("a", "s", "0", seqs[3]!, 4);
    await store.outbox.advance("b", "s", "0", seqs[2]!, 3);
    expect(await store.outbox.prune(1_000, 10)).toBe(0); // too young
    expect(await store.outbox.backlog("0")).toEqual({ facts: 4, oldestAt: clock.now() });
    clock.advance(1_001);
    expect(await store.outbox.prune(1_000, 2)).toBe(2);
    expect(await store.outbox.prune(1_000, 2)).toBe(1); // b has not passed the fourth
    expect((await store.outbox.facts("0", 10)).map((f) => f.seq)).toEqual([seqs[3]]);
    expect(await store.outbox.removeDestination("b")).toBe(true);
    expect(await store.outbox.prune(1_000, 2)).toBe(1);
    expect(await store.outbox.backlog(seqs[3]!)).toEqual({ facts: 0, oldestAt: null });
  });
}
