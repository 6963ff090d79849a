/** The cases of the dispatch store conformance group (see store-contract.ts). */
import type { RatchetError } from "../../errors.js";
import type { DispatchOps, StartSpec } from "../../store/dispatch/ops.js";
import type { DispatchEnv } from "./store-contract.js";

type Define = (title: string, fn: (env: DispatchEnv) => Promise<void>) => void;

const HOLDER = "runner-a";
const LEASE = 30_000;

function spec(itemId: string, over: Partial<StartSpec> = {}): StartSpec {
  return {
    itemId,
    phase: "build",
    worker: "w",
    mode: "agent",
    defaultSeats: null,
    holder: HOLDER,
    leaseMs: LEASE,
    spawnFor: (id) => JSON.stringify({ name: `ratchet-${id}` }),
    ...over,
  };
}

async function started(ops: DispatchOps, over: Partial<StartSpec> = {}) {
  const item = await ops.addItem("p", "build", '{"title":"t"}');
  const r = await ops.startAttempt(spec(item.id, over));
  if (r.kind !== "started") throw new Error(`not started: ${r.kind}`);
  return r;
}

async function rejects(env: DispatchEnv, p: Promise<unknown>, code: string) {
  try {
    await p;
  } catch (e) {
    env.expect((e as RatchetError).code).toBe(code);
    return;
  }
  throw new Error("expected a refusal");
}

export function registerDispatchStoreCases(define: Define): void {
  define(
    "§20.18 items are added open, read back, and listed by state and pipeline, in pages",
    async ({ ops, expect, clock }) => {
      const a = await ops.addItem("p", "build", '{"n":1}');
      const b = await ops.addItem("q", "build", '{"n":2}');
      expect(a).toMatchObject({
        pipeline: "p",
        step: "build",
        state: "open",
        input: '{"n":1}',
        taken: {},
        kept: null,
      });
      expect(a.createdAt).toBe(clock.now());
      expect(await ops.getItem(a.id)).toEqual(a);
      expect((await ops.listItems({ limit: 10 })).map((i) => i.id)).toEqual([a.id, b.id]);
      expect((await ops.listItems({ pipeline: "q", limit: 10 })).map((i) => i.id)).toEqual([b.id]);
      expect((await ops.listItems({ after: a.id, limit: 10 })).map((i) => i.id)).toEqual([b.id]);
      expect(await ops.listItems({ state: "done", limit: 10 })).toEqual([]);
      expect(await ops.getItem("999999")).toBeNull();
    },
  );

  define("§20.18 bad input is refused with a code and writes nothing", async (env) => {
    const { ops, expect } = env;
    await rejects(env, ops.getItem("abc"), "RATCHET_INVALID_INPUT");
    await rejects(env, ops.listItems({ limit: 0 }), "RATCHET_INVALID_INPUT");
    await rejects(env, ops.listItems({ limit: 1_001 }), "RATCHET_INVALID_INPUT");
    await rejects(env, ops.addItem("", "build", "{}"), "RATCHET_INVALID_INPUT");
    await rejects(env, ops.addItem("p", "build", "x".repeat(1024 * 1024 + 1)), "RATCHET_INVALID_INPUT");
    await rejects(env, ops.leaseAttempts(HOLDER, -1, 10), "RATCHET_INVALID_INPUT");
    expect(await ops.listItems({ limit: 10 })).toEqual([]);
  });

  define(
    "§20.19 an open item starts one attempt: the item runs, the attempt starts leased with its spawn",
    async ({ ops, expect, clock }) => {
      const r = await started(ops);
      expect(r.item.state).toBe("running");
      expect(r.attempt).toMatchObject({
        itemId: r.item.id,
        phase: "build",
        worker: "w",
        mode: "agent",
        state: "starting",
        claimedAt: clock.now(),
        session: null,
        holder: HOLDER,
        leaseUntil: clock.now() + LEASE,
        version: 0,
      });
      expect(JSON.parse(r.attempt.spawn)).toEqual({ name: `ratchet-${r.attempt.id}` });
      expect(await ops.startAttempt(spec(r.item.id))).toEqual({ kind: "stale" });
      const other = await ops.addItem("p", "build", "{}");
      expect(await ops.startAttempt(spec(other.id, { phase: "review" }))).toEqual({ kind: "stale" });
    },
  );

  define(
    "§20.3 a move applies only to the version it read, from the runner holding the attempt",
    async ({ ops, expect }) => {
      const { attempt: a } = await started(ops);
      const g = { id: a.id, version: a.version, holder: HOLDER };
      const m = await ops.moveAttempt(
        g,
        { state: "running", session: "s1", startedAt: 5 },
        { via: "reconcile" },
      );
      expect(m.kind).toBe("moved");
      if (m.kind !== "moved") return;
      expect(m.attempt).toMatchObject({ state: "running", session: "s1", startedAt: 5, version: 1 });
      expect(await ops.moveAttempt(g, { state: "closing" }, null)).toEqual({ kind: "stale" });
      expect(
        await ops.moveAttempt({ ...g, version: 1, holder: "runner-b" }, { state: "closing" }, null),
      ).toEqual({
        kind: "stale",
      });
      expect((await ops.getAttempt(a.id))!.state).toBe("running");
    },
  );

  define(
    "§20.3 two moves computed from the same listing race: exactly one applies",
    async ({ ops, expect }) => {
      const { attempt: a } = await started(ops);
      const g = { id: a.id, version: a.version, holder: HOLDER };
      const results = await Promise.all([
        ops.moveAttempt(g, { state: "running" }, "first"),
        ops.moveAttempt(g, { state: "closing", closing: "stalled", closingAt: 1 }, "second"),
      ]);
      expect(results.filter((r) => r.kind === "moved")).toHaveLength(1);
      expect((await ops.getAttempt(a.id))!.version).toBe(1);
    },
  );

  define(
    "§20.20 a live attempt is leased to one runner at a time; a lapsed or released lease passes on",
    async ({ ops, expect, clock }) => {
      const { attempt: a } = await started(ops);
      expect((await ops.leaseAttempts("runner-b", LEASE, 10)).map((x) => x.id)).toEqual([]);
      expect((await ops.leaseAttempts(HOLDER, LEASE, 10)).map((x) => x.id)).toEqual([a.id]);
      clock.advance(LEASE);
      const taken = await ops.leaseAttempts("runner-b", LEASE, 10);
      expect(taken.map((x) => [x.id, x.holder])).toEqual([[a.id, "runner-b"]]);
      expect(
        await ops.moveAttempt({ id: a.id, version: a.version, holder: HOLDER }, { state: "running" }, null),
      ).toEqual({
        kind: "stale",
      });
      expect(await ops.releaseAttempts("runner-b", [a.id])).toBe(1);
      expect((await ops.leaseAttempts(HOLDER, LEASE, 10)).map((x) => x.id)).toEqual([a.id]);
    },
  );

  define(
    "§20.11 a settlement routes its item and ends the attempt, in one transaction",
    async ({ ops, expect, clock }) => {
      const { attempt: a, item } = await started(ops);
      const g = { id: a.id, version: a.version, holder: HOLDER };
      const s = {
        state: "failed" as const,
        forced: "stalled" as const,
        sessionStopped: true,
        closeout: null,
      };
      const route = { step: "build", state: "open" as const, taken: { "build:failed": 1 }, resumeNext: true };
      const r = await ops.settleAttempt(g, s, route, null, { rule: "settle-closing" });
      expect(r.kind).toBe("moved");
      expect(await ops.getAttempt(a.id)).toMatchObject({
        state: "failed",
        forced: "stalled",
        endedAt: clock.now(),
        holder: null,
      });
      expect(await ops.getItem(item.id)).toMatchObject({
        state: "open",
        step: "build",
        taken: { "build:failed": 1 },
        resumeNext: true,
      });
      expect(await ops.settleAttempt(g, s, route, null, null)).toEqual({ kind: "stale" });
      expect(await ops.leaseAttempts(HOLDER, LEASE, 10)).toEqual([]);
    },
  );

  define(
    "§20.13 the kept slot is written by compare-and-set against the value read",
    async ({ ops, expect, clock }) => {
      const { attempt: a, item } = await started(ops);
      const kept = { session: "s1", worker: "w", attempt: a.id, keptAt: clock.now() };
      const g = { id: a.id, version: a.version, holder: HOLDER };
      const s = {
        state: "succeeded" as const,
        forced: null,
        sessionStopped: true,
        closeout: '{"outcome":"succeeded"}',
      };
      const r = await ops.settleAttempt(g, s, null, { expect: null, value: kept }, null);
      expect(r).toMatchObject({ kind: "moved", kept: true });
      expect((await ops.getItem(item.id))!.kept).toEqual(kept);
      expect(await ops.casKept(item.id, null, { ...kept, session: "s2" })).toBe(false);
      expect(await ops.casKept(item.id, kept, null)).toBe(true);
      expect((await ops.getItem(item.id))!.kept).toBeNull();
    },
  );

  define(
    "§20.19 closing an item moves its live attempts to closing (item-closed); older guards go stale",
    async ({ ops, expect }) => {
      const { attempt: a, item } = await started(ops);
      const closed = await ops.closeItem(item.id);
      expect(closed!.item.state).toBe("closed");
      expect(closed!.closing).toEqual([a.id]);
      expect(await ops.getAttempt(a.id)).toMatchObject({
        state: "closing",
        closing: "item-closed",
        version: 1,
      });
      expect(
        await ops.moveAttempt({ id: a.id, version: 0, holder: HOLDER }, { state: "running" }, null),
      ).toEqual({ kind: "stale" });
      const s = {
        state: "failed" as const,
        forced: "item-closed" as const,
        sessionStopped: true,
        closeout: null,
      };
      const route = { step: "build", state: "open" as const, taken: {}, resumeNext: false };
      await ops.settleAttempt({ id: a.id, version: 1, holder: HOLDER }, s, route, null, null);
      expect((await ops.getItem(item.id))!.state).toBe("closed");
      expect(await ops.closeItem(item.id)).toBeNull();
    },
  );

  define(
    "§20.18 the timeline keeps claims, moves, notes and settlements in order",
    async ({ ops, expect }) => {
      const { attempt: a } = await started(ops);
      await ops.noteEvent(a.id, "reading", { kind: "absent" });
      await ops.moveAttempt(
        { id: a.id, version: 0, holder: HOLDER },
        { state: "running" },
        { rule: "move-to-running" },
      );
      const ev = await ops.events(a.id, 0, 100);
      expect(ev.map((e) => e.kind)).toEqual(["claimed", "reading", "move"]);
      expect(ev[2]!.detail).toEqual({ rule: "move-to-running" });
      expect((await ops.events(a.id, ev[0]!.id, 1)).map((e) => e.kind)).toEqual(["reading"]);
    },
  );

  define(
    "§20.6 seats: a kind at its limit starts nothing; a sleeping attempt frees its seat",
    async ({ ops, expect }) => {
      const { attempt: a } = await started(ops, { defaultSeats: 1 });
      const next = await ops.addItem("p", "build", "{}");
      expect(await ops.startAttempt(spec(next.id, { defaultSeats: 1 }))).toEqual({
        kind: "seat_full",
        held: 1,
        limit: 1,
      });
      await ops.setSeatLimit("w", 2);
      expect((await ops.startAttempt(spec(next.id, { defaultSeats: 1 }))).kind).toBe("started");
      await ops.setSeatLimit("w", 1);
      await ops.moveAttempt({ id: a.id, version: 0, holder: HOLDER }, { state: "sleeping" }, null);
      expect(await ops.seats()).toEqual([
        { worker: "w", limit: 1, held: 1, refusals: 0, backoffUntil: null },
      ]);
      const g = { id: a.id, version: 1, holder: HOLDER };
      expect(await ops.wakeAttempt(g, null, false)).toEqual({ kind: "seat_full" });
      const woken = await ops.wakeAttempt(g, null, true);
      expect(woken.kind).toBe("woken");
      expect((await ops.seats())[0]!.held).toBe(2);
    },
  );

  define(
    "§20.6 a capacity refusal backs the kind off until its delay passed; a start clears the count",
    async ({ ops, expect, clock }) => {
      const item = await ops.addItem("p", "build", "{}");
      const until = await ops.noteCapacityRefusal("w", (n) => n * 1_000);
      expect(until).toBe(clock.now() + 1_000);
      expect(await ops.noteCapacityRefusal("w", (n) => n * 1_000)).toBe(clock.now() + 2_000);
      expect(await ops.startAttempt(spec(item.id))).toEqual({ kind: "backoff", until: clock.now() + 2_000 });
      clock.advance(2_000);
      expect((await ops.startAttempt(spec(item.id))).kind).toBe("started");
      await ops.clearCapacityRefusals("w");
      expect((await ops.seats())[0]).toMatchObject({ refusals: 0, backoffUntil: null });
    },
  );

  define(
    "§20.14 forgetting: due sessions exclude kept and recent ones; a confirmed forget marks once and clears the slot",
    async ({ ops, expect, clock }) => {
      const one = await started(ops);
      const two = await started(ops);
      const s = { state: "succeeded" as const, forced: null, sessionStopped: true, closeout: null };
      const kept = { session: "s1", worker: "w", attempt: one.attempt.id, keptAt: clock.now() };
      await ops.moveAttempt({ id: one.attempt.id, version: 0, holder: HOLDER }, { session: "s1" }, null);
      await ops.settleAttempt(
        { id: one.attempt.id, version: 1, holder: HOLDER },
        s,
        null,
        { expect: null, value: kept },
        null,
      );
      await ops.settleAttempt({ id: two.attempt.id, version: 0, holder: HOLDER }, s, null, null, null);
      expect((await ops.sessionsToForget(clock.now() - 1, 10)).map((a) => a.id)).toEqual([]);
      expect((await ops.sessionsToForget(clock.now(), 10)).map((a) => a.id)).toEqual([two.attempt.id]);
      const ks = await ops.keptSessions(10);
      expect(ks.map((k) => [k.item.id, k.latest?.id])).toEqual([[one.item.id, one.attempt.id]]);
      expect(await ops.markForgotten(two.attempt.id, null)).toBe(true);
      expect(await ops.markForgotten(two.attempt.id, null)).toBe(false);
      expect(await ops.markForgotten(one.attempt.id, { itemId: one.item.id, session: kept })).toBe(true);
      expect((await ops.getItem(one.item.id))!.kept).toBeNull();
      expect(await ops.sessionsToForget(clock.now(), 10)).toEqual([]);
    },
  );

  define(
    "§20.14 a settled attempt's session that a live attempt carries again is not due to be forgotten",
    async ({ ops, expect, clock }) => {
      const one = await started(ops);
      const s = { state: "succeeded" as const, forced: null, sessionStopped: true, closeout: null };
      await ops.moveAttempt({ id: one.attempt.id, version: 0, holder: HOLDER }, { session: "shared" }, null);
      await ops.settleAttempt({ id: one.attempt.id, version: 1, holder: HOLDER }, s, null, null, null);
      const two = await started(ops);
      await ops.moveAttempt({ id: two.attempt.id, version: 0, holder: HOLDER }, { session: "shared" }, null);
      expect(await ops.sessionsToForget(clock.now(), 10)).toEqual([]);
      await ops.settleAttempt({ id: two.attempt.id, version: 1, holder: HOLDER }, s, null, null, null);
      expect((await ops.sessionsToForget(clock.now(), 10)).map((a) => a.id)).toEqual([
        one.attempt.id,
        two.attempt.id,
      ]);
    },
  );

  define(
    "§20.24 a close-out recorded for a live attempt closes it (closed-out); for a settled one it changes nothing",
    async ({ ops, expect, clock }) => {
      const { attempt: a } = await started(ops);
      const c = '{"outcome":"succeeded","summary":"done"}';
      const r = await ops.recordCloseout(a.id, c);
      expect(r).toMatchObject({
        state: "closing",
        closing: "closed-out",
        closingAt: clock.now(),
        closeout: c,
        version: 1,
      });
      const s = { state: "succeeded" as const, forced: null, sessionStopped: true, closeout: c };
      await ops.settleAttempt({ id: a.id, version: 1, holder: HOLDER }, s, null, null, null);
      expect(await ops.recordCloseout(a.id, '{"outcome":"failed"}')).toBeNull();
      expect((await ops.getAttempt(a.id))!.closeout).toBe(c);
      expect(await ops.recordCloseout("424242", c)).toBeNull();
    },
  );

  define(
    "§20.18 an attempt's timeline keeps at most 1,000 events, and always its settlement",
    async ({ ops, expect }) => {
      const { attempt: a } = await started(ops);
      for (let i = 0; i < 1_000; i++) await ops.noteEvent(a.id, "reading", { i });
      const s = { state: "failed" as const, forced: null, sessionStopped: true, closeout: null };
      await ops.settleAttempt({ id: a.id, version: 0, holder: HOLDER }, s, null, null, null);
      const first = await ops.events(a.id, 0, 1_000);
      expect(first).toHaveLength(1_000); // the claim and 999 of the readings
      const rest = await ops.events(a.id, first.at(-1)!.id, 1_000);
      expect(rest.map((e) => e.kind)).toEqual(["settled"]);
    },
  );

  define("§20.19 a done or closed item can be archived; an open one cannot", async ({ ops, expect }) => {
    const open = await ops.addItem("p", "build", "{}");
    expect(await ops.archiveItem(open.id)).toBeNull();
    await ops.closeItem(open.id);
    expect((await ops.archiveItem(open.id))!.state).toBe("archived");
    expect(await ops.archiveItem(open.id)).toBeNull();
  });

  define(
    "§20.20 leases go to the least recently leased attempts first, so a small batch reaches every attempt",
    async ({ ops, expect, clock }) => {
      const ids = [
        (await started(ops)).attempt.id,
        (await started(ops)).attempt.id,
        (await started(ops)).attempt.id,
      ];
      clock.advance(1);
      expect((await ops.leaseAttempts(HOLDER, LEASE, 2)).map((a) => a.id)).toEqual([ids[0], ids[1]]);
      await ops.releaseAttempts(HOLDER, ids);
      expect((await ops.leaseAttempts("runner-b", LEASE, 2)).map((a) => a.id)).toEqual([ids[0], ids[2]]);
    },
  );
}
