/**
 * Schedules (spec §14.1–§14.4) on both backends, with a fake clock: one task
 * per tick across racing processes, the missed-tick policies, clock jumps,
 * crash repair of a won tick, and validation.
 */
import { describe, expect, it } from "vitest";
import { defineTask, type Ratchet } from "../../src/index.js";
import { drain, expectCode, FakeClock, forEachBackend, openRatchet, sharedStoreOptions } from "./helpers.js";

const MIN = 60_000;
const T0 = Date.UTC(2026, 0, 1, 0, 0, 30); // 00:00:30 UTC

const ping = defineTask({ name: "ping", run: (_c, n: number) => n });

async function runs(r: Ratchet): Promise<{ dedupe: string | null; input: unknown }[]> {
  const all = await r.store.list({ name: "ping", limit: 1000 });
  return all.reverse().map((t) => ({ dedupe: t.dedupe, input: t.input }));
}

forEachBackend(() => {
  describe("schedules (spec §14)", () => {
    it("§14.1 / §14.2 every tick enqueues exactly one task, at most one maintenance pass late", async () => {
      const clock = new FakeClock(T0);
      const r = await openRatchet([ping], { clock });
      const s = await r.schedule("every-5", "*/5 * * * *", ping, 7);
      expect(s).toMatchObject({
        name: "every-5",
        task: "ping",
        nextAt: Date.UTC(2026, 0, 1, 0, 5),
        missed: "once",
      });
      await drain(r);
      expect(await runs(r)).toEqual([]);
      clock.set(Date.UTC(2026, 0, 1, 0, 5));
      await drain(r);
      await drain(r);
      const tick1 = `schedule:every-5:${Date.UTC(2026, 0, 1, 0, 5)}`;
      expect(await runs(r)).toEqual([{ dedupe: tick1, input: 7 }]);
      clock.advance(5 * MIN);
      await drain(r);
      expect((await runs(r)).map((x) => x.dedupe)).toEqual([
        tick1,
        `schedule:every-5:${Date.UTC(2026, 0, 1, 0, 10)}`,
      ]);
      const [row] = await r.schedules();
      expect(row).toMatchObject({
        nextAt: Date.UTC(2026, 0, 1, 0, 15),
        lastAt: Date.UTC(2026, 0, 1, 0, 10),
        firingAt: null,
      });
    });

    it("§14.2 four processes racing on one store fire each tick once", async () => {
      const clock = new FakeClock(T0);
      const opts = { ...sharedStoreOptions(), clock };
      const rs = [await openRatchet([ping], opts)];
      for (let i = 0; i < 3; i++) rs.push(await openRatchet([ping], opts));
      await rs[0]!.schedule("race", "* * * * *", ping, 1);
      for (let minute = 1; minute <= 5; minute++) {
        clock.set(Date.UTC(2026, 0, 1, 0, minute));
        await Promise.all(rs.map((r) => drain(r)));
      }
      const keys = (await runs(rs[0]!)).map((x) => x.dedupe);
      expect(keys).toEqual([1, 2, 3, 4, 5].map((m) => `schedule:race:${Date.UTC(2026, 0, 1, 0, m)}`));
    });

    it("§14.3 after downtime, missed 'once' runs one task and moves on; 'skip' runs none older than graceMs", async () => {
      const clock = new FakeClock(T0);
      const r = await openRatchet([ping], { clock });
      await r.schedule("once", "*/5 * * * *", ping, 1);
      await r.schedule("skip", "*/5 * * * *", ping, 2, { missed: "skip", graceMs: 30_000 });
      clock.set(Date.UTC(2026, 0, 1, 1, 2)); // an hour and two minutes later: 12 ticks missed
      await drain(r);
      await drain(r);
      expect(await runs(r)).toEqual([{ dedupe: `schedule:once:${Date.UTC(2026, 0, 1, 0, 5)}`, input: 1 }]);
      for (const row of await r.schedules()) expect(row.nextAt).toBe(Date.UTC(2026, 0, 1, 1, 5));
      // Within graceMs a "skip" schedule still runs its tick.
      clock.set(Date.UTC(2026, 0, 1, 1, 5, 20));
      await drain(r);
      expect((await runs(r)).filter((x) => x.input === 2)).toHaveLength(1);
    });

    it("§14.3 a clock that jumps back fires nothing twice and does not loop", async () => {
      const clock = new FakeClock(T0);
      const r = await openRatchet([ping], { clock });
      await r.schedule("j", "*/5 * * * *", ping, 1);
      clock.set(Date.UTC(2026, 0, 1, 0, 5));
      await drain(r);
      clock.set(Date.UTC(2026, 0, 1, 0, 1)); // back four minutes
      for (let i = 0; i < 5; i++) await drain(r);
      expect(await runs(r)).toHaveLength(1);
      expect((await r.schedules())[0]!.nextAt).toBe(Date.UTC(2026, 0, 1, 0, 10));
      clock.set(Date.UTC(2026, 0, 1, 0, 10));
      await drain(r);
      expect(await runs(r)).toHaveLength(2);
    });

    it("§14.2 a tick won by a process that died before enqueueing is enqueued by the next pass, once", async () => {
      const clock = new FakeClock(T0);
      const r = await openRatchet([ping], { clock });
      await r.schedule("c", "*/5 * * * *", ping, 1);
      const due = Date.UTC(2026, 0, 1, 0, 5);
      clock.set(due);
      // The winner's claim lands, then the process dies before its enqueue.
      expect(await r.store.claimTick("c", due, Date.UTC(2026, 0, 1, 0, 10), due)).toBe(true);
      expect(await r.store.claimTick("c", due, Date.UTC(2026, 0, 1, 0, 10), due)).toBe(false);
      await drain(r);
      await drain(r);
      expect(await runs(r)).toEqual([{ dedupe: `schedule:c:${due}`, input: 1 }]);
      expect((await r.schedules())[0]).toMatchObject({ firingAt: null, lastAt: due });
    });

    it("§14.1 re-declaring a schedule keeps its pending tick; changing the cron starts over; timezones apply", async () => {
      const clock = new FakeClock(T0);
      const opts = { ...sharedStoreOptions(), clock };
      const decl = { name: "daily", cron: "0 9 * * *", task: ping, input: 1, timezone: "Europe/Paris" };
      const r1 = await openRatchet([ping], { ...opts, schedules: [decl] });
      // 09:00 in Paris is 08:00 UTC in winter.
      expect((await r1.schedules())[0]!.nextAt).toBe(Date.UTC(2026, 0, 1, 8));
      await r1.close();
      clock.set(Date.UTC(2026, 0, 1, 8, 0, 5)); // due, not yet fired
      const r2 = await openRatchet([ping], { ...opts, schedules: [decl] });
      expect((await r2.schedules())[0]!.nextAt).toBe(Date.UTC(2026, 0, 1, 8));
      await drain(r2);
      expect(await runs(r2)).toHaveLength(1);
      await r2.schedule("daily", "30 9 * * *", ping, 1, { timezone: "Europe/Paris" });
      expect((await r2.schedules())[0]!.nextAt).toBe(Date.UTC(2026, 0, 1, 8, 30));
      expect(await r2.unschedule("daily")).toBe(true);
      expect(await r2.unschedule("daily")).toBe(false);
      expect(await r2.schedules()).toEqual([]);
    });

    it("§14.1 bad schedules are refused with a code and change nothing", async () => {
      const r = await openRatchet([ping]);
      await expectCode(() => r.schedule("x", "not a cron", ping, 1), "RATCHET_INVALID_INPUT");
      await expectCode(
        () => r.schedule("x", "* * * * *", ping, 1, { timezone: "Mars/Olympus" }),
        "RATCHET_INVALID_INPUT",
      );
      await expectCode(() => r.schedule("x", "* * * * *", "nope", 1), "RATCHET_UNKNOWN_TASK");
      await expectCode(() => r.schedule("x", "* * * * *", ping, Number.NaN), "RATCHET_INVALID_JSON");
      await expectCode(
        () => r.schedule("x", "* * * * *", ping, 1, { missed: "twice" as never }),
        "RATCHET_INVALID_INPUT",
      );
      await expectCode(() => r.schedule("", "* * * * *", ping, 1), "RATCHET_INVALID_INPUT");
      expect(await r.schedules()).toEqual([]);
    });
  });
});
