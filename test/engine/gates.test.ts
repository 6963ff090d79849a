/** Seats, rate limits and fairness inside the claim (spec §14.9–§14.12), on both backends. */
import { describe, expect, it } from "vitest";
import { defineTask, RateLimitedError } from "../../src/index.js";
import {
  drain,
  expectCode,
  FakeClock,
  forEachBackend,
  openRatchet,
  sharedStoreOptions,
  until,
} from "./helpers.js";

const T0 = 1_000_000;

/** Counts handler entries per key, concurrently. */
function tracker() {
  const now = new Map<string, number>();
  const max = new Map<string, number>();
  return {
    enter(k: string) {
      const n = (now.get(k) ?? 0) + 1;
      now.set(k, n);
      max.set(k, Math.max(max.get(k) ?? 0, n));
    },
    leave(k: string) {
      now.set(k, now.get(k)! - 1);
    },
    max,
  };
}

const tick = () => new Promise((r) => setTimeout(r, 2));

forEachBackend(() => {
  describe("seats (spec §14.9)", () => {
    it("§14.9 a key never runs more than its limit at once; a task over it parks without holding a worker slot", async () => {
      const tr = tracker();
      const t = defineTask({
        name: "call",
        concurrency: { key: (i: { tenant: string }) => i.tenant, limit: 2 },
        run: async (_c, i: { tenant: string; n: number }) => {
          tr.enter(i.tenant);
          await tick();
          tr.leave(i.tenant);
          return i.n;
        },
      });
      const r = await openRatchet([t]);
      const ids = await r.enqueueMany([
        ...Array.from({ length: 8 }, (_, n) => ({ task: t, input: { tenant: "a", n } })),
        ...Array.from({ length: 3 }, (_, n) => ({ task: t, input: { tenant: "b", n } })),
      ]);
      // One claim with 10 free slots takes 2 of a and 2 of b; the rest of a and b park on their seats.
      const claimed = await r.store.claim({
        workerId: "w",
        queues: ["default"],
        names: ["call"],
        limit: 10,
        leaseGraceMs: 1000,
        limits: { seats: { call: 2 }, rates: {} },
      });
      expect(claimed.map((c) => (c.input as { tenant: string }).tenant).sort()).toEqual(["a", "a", "b", "b"]);
      const parked = (await Promise.all(ids.map((id) => r.get(id)))).filter((x) => x!.waitOn === "seat");
      expect(parked.length).toBe(7);
      // Parked as if never claimed: no attempt used, no start or claim time (PostgreSQL claims, then parks back).
      expect(parked.map((x) => [x!.attempts, x!.startedAt, x!.claimedAt])).toEqual(
        Array.from({ length: 7 }, () => [0, null, null]),
      );
      const why = await r.explain(parked[0]!.id);
      expect(why.reason).toMatchObject({ kind: "seat", limit: 2 });
      expect(why.text).toMatch(/waiting for a seat of "call:[ab]" \(limit 2\), held by tasks: \d+, \d+/);
      // Their settlement frees the seats (the release trigger wakes the next in line); all finish.
      await r.store.settle(
        claimed.map((c) => ({
          kind: "release" as const,
          fence: { taskId: c.id, token: c.epoch, claimedAt: c.claimedAt },
        })),
      );
      await r.start({ concurrency: 10 });
      await until(
        async () => (await Promise.all(ids.map((id) => r.get(id)))).every((x) => x!.status === "terminal"),
        "all terminal",
        20_000,
      );
      await r.stop();
      expect(tr.max.get("a")).toBe(2);
      expect(tr.max.get("b")).toBe(2);
    });

    it("§14.9 a claim of many (PostgreSQL's large-claim statement) parks the rows over a seat as never claimed", async () => {
      const t = defineTask({
        name: "bulk",
        concurrency: { key: () => "k", limit: 3 },
        run: () => null,
      });
      const r = await openRatchet([t]);
      const ids = await r.enqueueMany(Array.from({ length: 60 }, () => ({ task: t, input: {} })));
      const claimed = await r.store.claim({
        workerId: "w",
        queues: ["default"],
        names: ["bulk"],
        limit: 60,
        leaseGraceMs: 1000,
        limits: { seats: { bulk: 3 }, rates: {} },
      });
      expect(claimed.map((c) => c.id)).toEqual(ids.slice(0, 3));
      for (const c of claimed)
        expect([c.attempts, c.startedAt, c.claimedAt !== null]).toEqual([1, c.claimedAt, true]);
      const parked = await Promise.all(ids.slice(3).map((id) => r.get(id)));
      expect(parked.map((x) => [x!.waitOn, x!.attempts, x!.startedAt, x!.claimedAt])).toEqual(
        Array.from({ length: 57 }, () => ["seat", 0, null, null]),
      );
    });

    it("§14.9 a seat is freed by every way out of running: failure with retry, sleep, waitFor, abort", async () => {
      const log: string[] = [];
      let failed = false;
      const child = defineTask({ name: "child", run: () => "c" });
      const t = defineTask({
        name: "g",
        concurrency: { limit: 1 },
        retry: { baseMs: 0, floorMs: 0, maxAttempts: 3 },
        run: async (ctx, i: string) => {
          log.push(`start ${i}`);
          if (i === "fails" && !failed) {
            failed = true;
            throw new Error("once");
          }
          if (i === "sleeps") await ctx.sleep("nap", 10);
          if (i === "waits") await ctx.waitFor([await ctx.spawn("c", child)]);
          return i;
        },
      });
      const r = await openRatchet([t, child]);
      const ids: number[] = [];
      for (const i of ["fails", "sleeps", "waits", "plain"]) ids.push(await r.enqueue(t, i));
      await r.start({ concurrency: 4 });
      await until(
        async () => (await Promise.all(ids.map((id) => r.get(id)))).every((x) => x!.status === "terminal"),
        "all terminal",
        20_000,
      );
      await r.stop();
      for (const id of ids) expect((await r.get(id))!.outcome).toBe("completed");
      // Every task started while another was between attempts, asleep or waiting: no seat was kept.
      expect(log.filter((l) => l === "start plain").length).toBe(1);
    });

    it("§14.9 an abort of a task parked on a seat ends it; an aborted runner frees its seat", async () => {
      const clock = new FakeClock(T0);
      const t = defineTask({ name: "g", concurrency: { limit: 1 }, run: (_c, i: number) => i });
      const r = await openRatchet([t], { clock });
      const a = await r.enqueue(t, 1);
      const b = await r.enqueue(t, 2);
      const c = await r.enqueue(t, 3);
      const req = {
        workerId: "w",
        queues: ["default"],
        names: ["g"],
        limit: 5,
        leaseGraceMs: 1000,
        limits: { seats: { g: 1 }, rates: {} },
      };
      const [held] = await r.store.claim(req);
      expect(held!.id).toBe(a);
      expect((await r.get(b))!.waitOn).toBe("seat");
      await r.abort(b);
      expect((await r.get(b))!.outcome).toBe("aborted");
      await r.abort(a);
      await r.store.settle([
        {
          kind: "aborted",
          fence: { taskId: a, token: held!.epoch, claimedAt: held!.claimedAt },
          error: { name: "Aborted", message: "x" },
        },
      ]);
      expect((await r.get(c))!.status).toBe("pending");
      await drain(r);
      expect((await r.get(c))!.outcome).toBe("completed");
    });

    it("§14.9 a dead holder keeps its seat until its task is reclaimed; maintenance wakes parked tasks of seats with room", async () => {
      const clock = new FakeClock(T0);
      const t = defineTask({ name: "g", maxMs: 1_000, concurrency: { limit: 1 }, run: (_c, i: number) => i });
      const r = await openRatchet([t], { clock });
      const a = await r.enqueue(t, 1);
      const b = await r.enqueue(t, 2);
      const req = {
        workerId: "dies",
        queues: ["default"],
        names: ["g"],
        limit: 5,
        leaseGraceMs: 1_000,
        limits: { seats: { g: 1 }, rates: {} },
      };
      expect((await r.store.claim(req)).map((x) => x.id)).toEqual([a]);
      expect((await r.get(b))!.waitOn).toBe("seat");
      // The holder vanished; until the lease ends its code may still run, so b stays parked.
      clock.advance(1_500);
      expect(await r.store.claim({ ...req, workerId: "other" })).toEqual([]);
      clock.advance(1_000);
      const again = await r.store.claim({ ...req, workerId: "other" });
      expect(again.map((x) => [x.id, x.reclaimed])).toEqual([[a, true]]);
      expect((await r.get(b))!.waitOn).toBe("seat");
      // With two places (a limit in newer code), the sweep wakes b without any release.
      expect(await r.store.maintainGates({ seats: { g: 2 }, rates: {} })).toBe(1);
      expect((await r.get(b))!.status).toBe("pending");
    });

    it("§14.9 a spawned child takes a seat too; an owner waiting on it frees its own seat of the same group", async () => {
      const order: string[] = [];
      const child = defineTask({
        name: "child",
        concurrencyGroup: "llm",
        run: (_c, i: number) => {
          order.push(`child ${i}`);
          return i;
        },
      });
      const parent = defineTask({
        name: "parent",
        concurrencyGroup: "llm",
        concurrency: { limit: 1 },
        run: async (ctx) => {
          order.push("parent");
          const ids = [await ctx.spawn("a", child, 1), await ctx.spawn("b", child, 2)];
          const out = await ctx.waitFor(ids);
          return out.map((o) => o.result);
        },
      });
      const r = await openRatchet([parent, child]);
      const id = await r.enqueue(parent);
      await r.start({ concurrency: 4 });
      const done = await until(async () => {
        const t = await r.get(id);
        return t!.status === "terminal" ? t : null;
      });
      await r.stop();
      expect(done).toMatchObject({ outcome: "completed", result: [1, 2] });
      const kids = await r.store.children(id);
      expect(kids.map((k) => k.seat)).toEqual(["llm", "llm"]);
      // Limit 1 for the whole group: the children ran one at a time, while the parent was parked.
      expect(order.filter((o) => o.startsWith("child")).length).toBe(2);
    });

    it("§14.9 a group is shared by several definitions; its limit can change at run time for every worker", async () => {
      const running: string[] = [];
      let gate: () => void = () => {};
      const hold = new Promise<void>((res) => {
        gate = res;
      });
      const mk = (name: string) =>
        defineTask({
          name,
          concurrencyGroup: "openai",
          concurrency: { limit: 1 },
          run: async () => {
            running.push(name);
            await hold;
          },
        });
      const x = mk("x");
      const y = mk("y");
      const r = await openRatchet([x, y]);
      const ids = await r.enqueueMany([{ task: x }, { task: y }, { task: x }, { task: y }]);
      await r.start({ concurrency: 8 });
      await until(() => running.length === 1);
      expect(await r.setConcurrencyLimit("openai", 3)).toBeGreaterThan(0);
      await until(() => running.length === 3);
      expect((await r.concurrencyLimits()).overrides).toEqual([{ seat: "openai", limit: 3 }]);
      // A per-key limit and removing the override back to the code's limit.
      await r.setConcurrencyLimit("openai", null);
      expect((await r.concurrencyLimits()).overrides).toEqual([]);
      gate();
      await until(async () =>
        (await Promise.all(ids.map((id) => r.get(id)))).every((t) => t!.status === "terminal"),
      );
      await r.stop();
      expect(running.length).toBe(4);
    });

    it("§14.9 definitions that disagree on a group's limit, or bad specs, fail at registration with RATCHET_CONFIG", async () => {
      const r = await openRatchet([
        defineTask({ name: "p", concurrencyGroup: "g", concurrency: { limit: 2 }, run: () => 1 }),
      ]);
      await expectCode(
        () =>
          r.register(
            defineTask({ name: "q", concurrencyGroup: "g", concurrency: { limit: 3 }, run: () => 1 }),
          ),
        "RATCHET_CONFIG",
      );
      await expectCode(
        () => defineTask({ name: "z", concurrency: { limit: 0 }, run: () => 1 }),
        "RATCHET_CONFIG",
      );
      await expectCode(() => defineTask({ name: "z", concurrency: {}, run: () => 1 }), "RATCHET_CONFIG");
      await expectCode(
        () => defineTask({ name: "z", concurrencyGroup: "bad group", run: () => 1 }),
        "RATCHET_CONFIG",
      );
      await expectCode(() => r.setConcurrencyLimit("g", -1), "RATCHET_INVALID_INPUT");
    });

    it("§14.9 a key function that throws or returns a bad key rejects the enqueue with RATCHET_INVALID_INPUT; nothing is written", async () => {
      const t = defineTask({
        name: "k",
        concurrency: { limit: 1, key: (i: { k: unknown }) => i.k as string },
        run: () => 1,
      });
      const r = await openRatchet([t]);
      await expectCode(() => r.enqueue(t, { k: "" }), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.enqueue(t, { k: 42 }), "RATCHET_INVALID_INPUT");
      await expectCode(
        () =>
          r.enqueueMany([
            { task: t, input: { k: "ok" } },
            { task: t, input: null as never },
          ]),
        "RATCHET_INVALID_INPUT",
      );
      expect(await r.store.list({ limit: 10 })).toEqual([]);
    });
  });

  describe("rate limits (spec §14.10–§14.11)", () => {
    it("§14.10 starts never exceed burst + limit·w/period in any window w; the rest park until the bucket refills", async () => {
      const clock = new FakeClock(T0);
      const starts: number[] = [];
      const t = defineTask({
        name: "api",
        rateLimit: { limit: 4, periodMs: 1_000, burst: 2 },
        run: () => {
          starts.push(clock.now());
        },
      });
      const r = await openRatchet([t], { clock });
      const ids = await r.enqueueMany(Array.from({ length: 12 }, () => ({ task: t })));
      await drain(r);
      expect(starts.length).toBe(2);
      const parked = (await Promise.all(ids.map((id) => r.get(id)))).filter((x) => x!.waitOn === "rate");
      expect(parked.length).toBe(10);
      const why = await r.explain(parked[0]!.id);
      expect(why.reason).toMatchObject({ kind: "rate", buckets: ["api"], paused: false });
      expect(why.text).toMatch(/rate limit api refills for it at /);
      for (let step = 0; step < 200 && starts.length < 12; step++) {
        clock.advance(50);
        await drain(r);
      }
      expect(starts.length).toBe(12);
      // The bound over every window between two starts.
      for (let i = 0; i < starts.length; i++)
        for (let j = i; j < starts.length; j++) {
          const w = starts[j]! - starts[i]!;
          expect(j - i + 1).toBeLessThanOrEqual(2 + (4 * w) / 1_000 + 1e-9);
        }
      // Parked tasks wake one at a time in line, not all at each refill.
      const attempts = await Promise.all(ids.map(async (id) => (await r.get(id))!.attempts));
      expect(attempts.every((a) => a === 1)).toBe(true);
    });

    it("§14.10 cost from the input is charged at start and ctx.reportUsage corrects it to the actual usage", async () => {
      const clock = new FakeClock(T0);
      const t = defineTask({
        name: "llm",
        rateLimit: {
          name: "tpm",
          limit: 1_000,
          periodMs: 60_000,
          cost: (i: { est: number }) => i.est,
          unit: "tokens",
        },
        run: async (ctx, i: { est: number; actual: number }) => {
          await ctx.reportUsage({ tokens: i.actual });
        },
      });
      const r = await openRatchet([t], { clock });
      const a = await r.enqueue(t, { est: 600, actual: 100 });
      await drain(r);
      // a was charged 600 and corrected to 100: 900 left, enough for b's estimate.
      const b = await r.enqueue(t, { est: 600, actual: 600 });
      await drain(r);
      expect((await r.get(a))!.outcome).toBe("completed");
      expect((await r.get(b))!.outcome).toBe("completed");
      const c = await r.enqueue(t, { est: 600, actual: 600 });
      await drain(r);
      // 1000 - 100 - 600 = 300 < 600: c waits for 300 tokens at 1000/min = 18 s.
      const rc = (await r.get(c))!;
      expect(rc.waitOn).toBe("rate");
      expect(rc.wakeAt).toBe(T0 + 18_000);
      await expectCode(() => r.enqueue(t, { est: -1, actual: 0 }), "RATCHET_INVALID_INPUT");
    });

    it("§14.11 a RateLimitedError pauses the key for every task until retryAfter, without using an attempt", async () => {
      const clock = new FakeClock(T0);
      const starts: [string, number][] = [];
      let first = true;
      const t = defineTask({
        name: "api",
        retry: { maxAttempts: 1 },
        rateLimit: { key: (i: { acct: string }) => i.acct, limit: 100, periodMs: 1_000 },
        run: (_c, i: { acct: string; n: number }) => {
          starts.push([`${i.acct}${i.n}`, clock.now()]);
          if (first) {
            first = false;
            throw new RateLimitedError({ retryAfterMs: 5_000 });
          }
        },
      });
      const r = await openRatchet([t], { clock });
      const a1 = await r.enqueue(t, { acct: "a", n: 1 });
      await drain(r);
      const rest = await r.enqueueMany([
        { task: t, input: { acct: "a", n: 2 } },
        { task: t, input: { acct: "b", n: 1 } },
      ]);
      await drain(r);
      // b is another key: it runs; a2 waits for the pause like a1.
      expect(starts.map((s) => s[0])).toEqual(["a1", "b1"]);
      const why = await r.explain(rest[0]!);
      expect(why.reason).toMatchObject({ kind: "rate", paused: true });
      clock.advance(5_000);
      for (let i = 0; i < 10 && starts.length < 4; i++) {
        await drain(r);
        clock.advance(20);
      }
      expect(starts.slice(2).every(([, at]) => at >= T0 + 5_000)).toBe(true);
      expect((await r.get(a1))!).toMatchObject({ outcome: "completed", attempts: 1 });
    });
  });

  describe("rate limits across instances (spec §14.11)", () => {
    it("§14.11 a 429 seen by one Ratchet instance pauses the key for another instance on the same store", async () => {
      const clock = new FakeClock(T0);
      const starts: [string, string, number][] = [];
      const mk = (who: string) =>
        defineTask({
          name: "api",
          rateLimit: { name: "provider", limit: 100, periodMs: 1_000 },
          run: (_c, i: { n: number; fail?: boolean }) => {
            starts.push([who, `t${i.n}`, clock.now()]);
            if (i.fail) throw new RateLimitedError({ retryAfterMs: 3_000 });
          },
        });
      const loc = sharedStoreOptions();
      const a = await openRatchet([mk("a")], { ...loc, clock });
      const b = await openRatchet([mk("b")], { ...loc, clock });
      await a.enqueue("api", { n: 1, fail: true });
      await drain(a);
      expect(starts).toEqual([["a", "t1", T0]]);
      await a.enqueue("api", { n: 2 });
      await drain(b);
      await drain(a);
      expect(starts.length).toBe(1); // neither instance starts anything of the paused bucket
      clock.advance(3_000);
      for (let i = 0; i < 10 && starts.length < 3; i++) {
        await drain(b);
        clock.advance(20);
      }
      expect(starts.slice(1).map((s) => s[0])).toEqual(["b", "b"]);
      expect(starts.slice(1).every((s) => s[2] >= T0 + 3_000)).toBe(true);
    });
  });

  describe("fairness (spec §14.12)", () => {
    it("§14.12 keys share a queue by weight: a burst of one key does not starve another", async () => {
      const order: string[] = [];
      const t = defineTask({
        name: "job",
        fairness: {
          key: (i: { tenant: string }) => i.tenant,
          weight: (i: { tenant: string }) => (i.tenant === "big" ? 3 : 1),
        },
        run: (_c, i: { tenant: string }) => {
          order.push(i.tenant);
        },
      });
      const clock = new FakeClock(T0);
      const r = await openRatchet([t], { clock });
      // The big tenant enqueues 60 first; two small tenants 20 each right after.
      await r.enqueueMany(Array.from({ length: 60 }, () => ({ task: t, input: { tenant: "big" } })));
      await r.enqueueMany(Array.from({ length: 20 }, () => ({ task: t, input: { tenant: "s1" } })));
      await r.enqueueMany(Array.from({ length: 20 }, () => ({ task: t, input: { tenant: "s2" } })));
      for (let i = 0; i < 20; i++) await r.tick({ budgetMs: 3_600_000, concurrency: 1, max: 5 });
      // Weights 3:1:1 while all three have backlogs (the first 80 claims): every prefix holds each
      // tenant within K = 3 tasks of its weight share.
      const weight: Record<string, number> = { big: 3 / 5, s1: 1 / 5, s2: 1 / 5 };
      for (let len = 1; len <= 80; len++) {
        const prefix = order.slice(0, len);
        for (const k of Object.keys(weight))
          expect(Math.abs(prefix.filter((x) => x === k).length - len * weight[k]!)).toBeLessThanOrEqual(3);
      }
      // Without fairness the two small tenants would wait for all 60 of the big one.
      expect(order.indexOf("s1")).toBeLessThan(5);
    });
  });
});
