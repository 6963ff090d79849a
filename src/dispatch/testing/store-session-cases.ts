/** The dispatch store conformance cases of seats, backoff, forgetting, close-outs and bounds (see store-contract.ts). */
import { type Define, HOLDER, LEASE, spec, started } from "./store-kit.js";

export function registerDispatchSessionCases(define: Define): void {
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

  define(
    "§20.29 an item routed with notBefore starts no attempt before that instant",
    async ({ ops, expect, clock }) => {
      const { attempt: a, item } = await started(ops);
      const s = {
        state: "failed" as const,
        forced: "usage-limit" as const,
        sessionStopped: true,
        closeout: null,
      };
      const route = {
        step: "build",
        state: "open" as const,
        taken: {},
        resumeNext: false,
        notBefore: clock.now() + 5_000,
      };
      await ops.settleAttempt({ id: a.id, version: 0, holder: HOLDER }, s, route, null, null);
      expect((await ops.getItem(item.id))!.notBefore).toBe(clock.now() + 5_000);
      expect(await ops.startAttempt(spec(item.id))).toEqual({
        kind: "not_before",
        until: clock.now() + 5_000,
      });
      clock.advance(5_000);
      expect((await ops.startAttempt(spec(item.id))).kind).toBe("started");
    },
  );
}
