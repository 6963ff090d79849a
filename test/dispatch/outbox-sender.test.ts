/**
 * The outbox sender on SQLite and PostgreSQL with the fake clock (spec §21.5–§21.13):
 * order and bounds per destination, backoff and dead-letter, leases between senders.
 */
import { expect, it } from "vitest";
import { DEFAULT_DELIVERY_POLICY, ENVELOPE_BYTES } from "../../src/core/outbox.js";
import { type Destination, factWireBytes, OutboxSender } from "../../src/dispatch/outbox/sender.js";
import { type Batch, DeliveryError, type Sink } from "../../src/dispatch/outbox/types.js";
import type { DestinationRow, FactInput } from "../../src/store/outbox/ops.js";
import { FakeClock, seededRandom } from "../../src/testing/fake-clock.js";
import { forEachStore } from "./stores.js";

/** A sink that records every batch it was handed, and fails while `fail` says so. */
class MemorySink implements Sink {
  readonly kind = "memory";
  readonly batches: Batch[] = [];
  calls = 0;
  fail: (() => Error) | null = null;
  async deliver(batch: Batch): Promise<void> {
    this.calls++;
    if (this.fail) throw this.fail();
    this.batches.push(batch);
  }
  get seqs(): string[] {
    return this.batches.flatMap((b) => b.facts.map((f) => f.seq));
  }
}

const facts = (n: number, type = "a.b", pad = 0): FactInput[] =>
  Array.from({ length: n }, (_, i) => ({ type, subject: `s:${i}`, data: { i, pad: "x".repeat(pad) } }));

async function dest(store: { outbox: { destinations(): Promise<DestinationRow[]> } }, name: string) {
  return (await store.outbox.destinations()).find((d) => d.name === name);
}

const policy = (over: Partial<typeof DEFAULT_DELIVERY_POLICY> = {}) => ({
  ...DEFAULT_DELIVERY_POLICY,
  ...over,
});

forEachStore((open) => {
  async function setup(dests: Omit<Destination, "sink">[], o: { holder?: string } = {}) {
    const clock = new FakeClock();
    const store = await open(clock);
    const sinks = dests.map(() => new MemorySink());
    const mk = (holder: string) =>
      new OutboxSender({
        store,
        destinations: dests.map((d, i) => ({ ...d, sink: sinks[i]! })),
        holder,
        random: seededRandom(7),
        clock,
        leaseMs: 30_000,
        retentionMs: 0,
      });
    return { clock, store, sinks, sender: mk(o.holder ?? "s1"), mk };
  }

  it("§21.5 §21.9 each destination gets its facts in seq order, in batches bounded by count and wire bytes; a fact over the bound goes alone; others are passed over", async () => {
    const { store, sinks, sender } = await setup([
      { name: "all", types: ["*"], batch: { maxFacts: 7, maxBytes: 4_096 } },
      { name: "x-only", types: ["x.*"] },
    ]);
    await store.outbox.append(facts(10));
    await store.outbox.append([...facts(3, "x.y"), ...facts(1, "a.b", 6_000), ...facts(9, "a.b", 200)]);
    let rounds = 0;
    while ((await sender.runOnce()).batches > 0) if (++rounds > 50) throw new Error("no end");
    const all = await store.outbox.facts("0", 100);
    expect(sinks[0]!.seqs).toEqual(all.map((f) => f.seq));
    expect(sinks[1]!.seqs).toEqual(all.filter((f) => f.type === "x.y").map((f) => f.seq));
    for (const b of sinks[0]!.batches) {
      expect(b.facts.length).toBeLessThanOrEqual(7);
      const wire = ENVELOPE_BYTES + b.facts.reduce((n, f) => n + factWireBytes(f), 0);
      if (b.facts.length > 1) expect(wire).toBeLessThanOrEqual(4_096);
      expect(b.id).toBe(`all:${b.facts[0]!.seq}-${b.facts.at(-1)!.seq}`);
    }
    const big = sinks[0]!.batches.find((b) =>
      b.facts.some((f) => (f.data as { pad: string }).pad.length === 6_000),
    );
    expect(big?.facts).toHaveLength(1);
    const [d] = await store.outbox.destinations();
    expect(d).toMatchObject({ name: "all", state: "ok", delivered: all.length, cursor: all.at(-1)!.seq });
    expect((await store.outbox.destinations())[1]).toMatchObject({ delivered: 3, cursor: all.at(-1)!.seq });
  });

  it("§21.9 §21.10 failures back off with full jitter on the store's clock, then dead-letter; a dead destination blocks while others go on; §21.11 retry delivers in order", async () => {
    const { clock, store, sinks, sender } = await setup([
      { name: "flaky", types: ["*"], policy: policy({ maxAttempts: 3 }) },
      { name: "fine", types: ["*"] },
    ]);
    await store.outbox.append(facts(3));
    sinks[0]!.fail = () => new Error("connection refused");
    const t0 = clock.now();
    let r = await sender.runOnce();
    expect(r).toMatchObject({ failures: 1, batches: 1 });
    let d = await dest(store, "flaky");
    expect(d).toMatchObject({
      state: "retrying",
      failures: 1,
      since: t0,
      lastError: "memory: connection refused",
    });
    const delay = d!.nextAt! - t0;
    expect(delay).toBeGreaterThanOrEqual(250);
    expect(delay).toBeLessThan(1_000);
    // Not due yet: no try.
    clock.advance(delay - 1);
    r = await sender.runOnce();
    expect(sinks[0]!.calls).toBe(1);
    expect(r.nextAt).toBe(d!.nextAt);
    clock.advance(1);
    await sender.runOnce();
    expect(sinks[0]!.calls).toBe(2);
    d = await dest(store, "flaky");
    expect(d).toMatchObject({ state: "retrying", failures: 2 });
    expect(d!.nextAt! - clock.now()).toBeLessThan(2_000);
    clock.set(d!.nextAt!);
    r = await sender.runOnce();
    expect(r.dead).toEqual(["flaky"]);
    d = await dest(store, "flaky");
    expect(d).toMatchObject({ state: "dead", failures: 3, cursor: "0", since: t0 });
    expect(d!.lastError).toContain("dead-lettered: attempts");
    expect(d!.deadBatch).toMatch(/^flaky:\d+-\d+$/);
    // Blocked: later facts do not go to it, even with a working sink; the other destination goes on.
    sinks[0]!.fail = null;
    await store.outbox.append(facts(2));
    clock.advance(3_600_000);
    r = await sender.runOnce();
    expect(r.dead).toEqual(["flaky"]);
    expect(sinks[0]!.batches).toEqual([]);
    expect(sinks[1]!.seqs).toHaveLength(5);
    expect(await store.outbox.retry("flaky")).toMatchObject({ state: "retrying", failures: 0 });
    await sender.runOnce();
    expect(sinks[0]!.seqs).toEqual(sinks[1]!.seqs);
    expect(await dest(store, "flaky")).toMatchObject({ state: "ok", lastError: null });
  });

  it("§21.9 a sink's Retry-After is honoured; §21.10 a refusal that will not pass dead-letters at once", async () => {
    const { clock, store, sinks, sender } = await setup([
      { name: "slow", types: ["*"] },
      { name: "gone", types: ["*"] },
    ]);
    await store.outbox.append(facts(1));
    sinks[0]!.fail = () => new DeliveryError("HTTP 429", { retryable: true, retryAfterMs: 42_000 });
    sinks[1]!.fail = () => new DeliveryError("HTTP 410", { retryable: false });
    await sender.runOnce();
    expect(await dest(store, "gone")).toMatchObject({ state: "dead", failures: 1 });
    expect(await dest(store, "slow")).toMatchObject({ state: "retrying", nextAt: clock.now() + 42_000 });
  });

  it("§21.10 dead-letter by age: a destination retrying longer than maxAgeMs", async () => {
    const { clock, store, sinks, sender } = await setup([
      { name: "old", types: ["*"], policy: policy({ maxAttempts: 1_000, maxAgeMs: 60_000 }) },
    ]);
    await store.outbox.append(facts(1));
    sinks[0]!.fail = () => new Error("503");
    for (let i = 0; i < 200; i++) {
      const [d] = await store.outbox.destinations();
      if (d?.state === "dead") break;
      if (d?.nextAt) clock.set(d.nextAt);
      await sender.runOnce();
    }
    const [d] = await store.outbox.destinations();
    expect(d).toMatchObject({ state: "dead" });
    expect(d!.lastError).toContain("dead-lettered: age");
    expect(clock.now() - d!.since!).toBeGreaterThanOrEqual(60_000);
  });

  it("§21.7 a destination another sender holds is skipped; after its lease lapses the other takes over from the cursor; §21.8 a sender that lost the lease moves nothing", async () => {
    const { clock, store, sinks, mk } = await setup([{ name: "d", types: ["*"], batch: { maxFacts: 2 } }]);
    const a = mk("a");
    const b = mk("b");
    await store.outbox.append(facts(4));
    let overtaken = false;
    const slow = new OutboxSender({
      store,
      destinations: [{ name: "d", types: ["*"], batch: { maxFacts: 2 }, sink: sinks[0]! }],
      holder: "a",
      clock,
      leaseMs: 30_000,
      retentionMs: 0,
      maxBatchesPerPass: 1,
      afterDeliver: async () => {
        if (overtaken) return;
        overtaken = true;
        // While "a" holds its batch, its lease lapses and "b" delivers from the same cursor.
        expect((await b.runOnce()).held).toEqual(["d"]);
        clock.advance(30_000);
        expect((await b.runOnce()).facts).toBe(4);
      },
    });
    expect((await slow.runOnce()).batches).toBe(0); // its advance was refused: it moves nothing
    const seqs = (await store.outbox.facts("0", 10)).map((f) => f.seq);
    // At least once: the first batch twice, every fact in order after the duplicate.
    expect(sinks[0]!.seqs).toEqual([seqs[0], seqs[1], seqs[0], seqs[1], seqs[2], seqs[3]]);
    expect((await store.outbox.destinations())[0]).toMatchObject({ cursor: seqs[3], holder: "b" });
    await b.stop();
    expect((await store.outbox.destinations())[0]!.holder).toBeNull();
    expect((await a.runOnce()).held).toEqual([]);
  });

  it("§21.13 the sender prunes facts every destination delivered once they pass the retention", async () => {
    const clock = new FakeClock();
    const store = await open(clock);
    const sink = new MemorySink();
    const sender = new OutboxSender({
      store,
      destinations: [{ name: "d", types: ["*"], sink }],
      clock,
      retentionMs: 60_000,
      pruneEveryMs: 0,
    });
    await store.outbox.append(facts(5));
    await sender.runOnce();
    expect(await store.outbox.facts("0", 10)).toHaveLength(5);
    clock.advance(60_001);
    await sender.runOnce();
    expect(await store.outbox.facts("0", 10)).toEqual([]);
    expect(sink.seqs).toHaveLength(5);
  });

  it("§21.5 a bad destination is refused at construction with RATCHET_CONFIG or RATCHET_INVALID_INPUT", async () => {
    const clock = new FakeClock();
    const store = await open(clock);
    const sink = new MemorySink();
    const bad: Array<[Partial<Destination>, string]> = [
      [{ types: [] }, "RATCHET_CONFIG"],
      [{ types: ["A.B"] }, "RATCHET_CONFIG"],
      [{ batch: { maxFacts: 0 } }, "RATCHET_CONFIG"],
      [{ batch: { maxBytes: 10 } }, "RATCHET_CONFIG"],
      [{ timeoutMs: 60_000 }, "RATCHET_CONFIG"],
      [{ name: "no spaces" }, "RATCHET_INVALID_INPUT"],
    ];
    for (const [over, code] of bad) {
      let err: unknown;
      try {
        new OutboxSender({
          store,
          destinations: [{ name: "d", types: ["*"], sink, ...over }],
          leaseMs: 30_000,
        });
      } catch (e) {
        err = e;
      }
      expect((err as { code?: string })?.code).toBe(code);
    }
    expect(await store.outbox.destinations()).toEqual([]);
  });
});
