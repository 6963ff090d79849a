/** The dispatch store conformance cases of items, attempts, moves and settlements (see store-contract.ts). */
import { type Define, HOLDER, LEASE, rejects, spec, started } from "./store-kit.js";

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
    "§20.30 an open item moves only from the step it was read at; a stale, started or closed item and bad input change nothing",
    async (env) => {
      const { ops, expect, clock } = env;
      const it = await ops.addItem("p", "gone", "{}");
      clock.advance(1_000);
      expect(await ops.moveItem(it.id, "other", "build")).toBeNull();
      await rejects(env, ops.moveItem(it.id, "gone", ""), "RATCHET_INVALID_INPUT");
      await rejects(env, ops.moveItem("x", "gone", "build"), "RATCHET_INVALID_INPUT");
      expect(await ops.getItem(it.id)).toEqual(it);
      const moved = await ops.moveItem(it.id, "gone", "build");
      expect(moved).toMatchObject({ id: it.id, step: "build", state: "open", updatedAt: clock.now() });
      // A second move decided from the first read is stale now.
      expect(await ops.moveItem(it.id, "gone", "review")).toBeNull();
      expect((await ops.startAttempt(spec(it.id))).kind).toBe("started");
      expect(await ops.moveItem(it.id, "build", "review")).toBeNull();
      const closed = await ops.addItem("p", "gone", "{}");
      await ops.closeItem(closed.id);
      expect(await ops.moveItem(closed.id, "gone", "build")).toBeNull();
      expect((await ops.getItem(closed.id))!.step).toBe("gone");
    },
  );

  define(
    "§20.1 an unbound starting attempt is adopted as reconciling only at the version it was read at; a closed item's adoption changes nothing",
    async ({ ops, expect }) => {
      const r = await started(ops);
      const g = { id: r.attempt.id, version: r.attempt.version, holder: HOLDER };
      const m = await ops.moveAttempt(g, { state: "reconciling" }, { to: "reconciling" });
      expect(m).toMatchObject({
        kind: "moved",
        attempt: { state: "reconciling", session: null, version: 1 },
      });
      expect(await ops.moveAttempt(g, { state: "reconciling" }, null)).toEqual({ kind: "stale" });
      const bound = await ops.moveAttempt({ ...g, version: 1 }, { session: "s1" }, null);
      expect(bound).toMatchObject({ kind: "moved", attempt: { state: "reconciling", session: "s1" } });
      const other = await started(ops);
      const listed = { id: other.attempt.id, version: other.attempt.version, holder: HOLDER };
      await ops.closeItem(other.item.id);
      expect(await ops.moveAttempt(listed, { state: "reconciling" }, null)).toEqual({ kind: "stale" });
      expect((await ops.getAttempt(other.attempt.id))!.state).toBe("closing");
    },
  );

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
      const route = {
        step: "build",
        state: "open" as const,
        taken: { "build:failed": 1 },
        resumeNext: true,
        notBefore: null,
      };
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
      const route = { step: "build", state: "open" as const, taken: {}, resumeNext: false, notBefore: null };
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
}
