import { describe, expect, it } from "vitest";
import { z } from "zod";
import { CycleError, defineTask, NonRetryableError } from "../../src/index.js";
import type { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import {
  countTasks,
  drain,
  expectCode,
  FakeClock,
  forEachBackend,
  openRatchet,
  tickUntil,
} from "./helpers.js";

const noop = defineTask({ name: "noop", run: () => null });
const echo = defineTask({ name: "echo", run: (_ctx, input: unknown) => input });
const fails = defineTask({
  name: "fails",
  retry: { maxAttempts: 1 },
  run: () => {
    throw new NonRetryableError("nope");
  },
});
const typed = defineTask({
  name: "typed",
  schema: z.object({ n: z.number().int(), label: z.string().default("x") }),
  run: (_ctx, input: { n: number; label: string }) => input,
});

function sparseArray(): unknown[] {
  const a: unknown[] = [1, 2, 3];
  delete a[1];
  return a;
}

async function expectNothingWritten(
  r: Awaited<ReturnType<typeof openRatchet>>,
  fn: () => unknown,
  code: string,
) {
  const before = await countTasks(r);
  const err = await expectCode(fn, code);
  expect(await countTasks(r)).toBe(before);
  return err;
}

forEachBackend(() => {
  describe("enqueue (spec §2)", () => {
    it("§2.1 an unknown option key is refused with RATCHET_INVALID_INPUT and writes nothing", async () => {
      const r = await openRatchet([noop]);
      const bad = (x: unknown) => x as never;
      for (const opts of [{ name: "" }, { name: "x" }, { dealyMs: 5 }, { task: "noop" }, { key: "k" }]) {
        const err = await expectNothingWritten(
          r,
          () => r.enqueue(noop, null, bad(opts)),
          "RATCHET_INVALID_INPUT",
        );
        expect(err.message).toMatch(/unknown option/);
      }
      await expectNothingWritten(r, () => r.enqueue(noop, null, bad(7)), "RATCHET_INVALID_INPUT");
      await expectNothingWritten(
        r,
        () => r.enqueueMany([{ task: noop }, bad({ task: noop, priorty: 3 })]),
        "RATCHET_INVALID_INPUT",
      );
      await expectNothingWritten(
        r,
        () => r.enqueueJob("j", [bad({ task: noop, name: "" })]),
        "RATCHET_INVALID_INPUT",
      );
      // enqueueJob sets every entry's job: an entry naming another job is refused, not overwritten.
      await expectNothingWritten(
        r,
        () => r.enqueueJob("j", [{ task: noop, job: "other" }]),
        "RATCHET_INVALID_INPUT",
      );
      await expectNothingWritten(
        r,
        () => r.enqueue(noop, null, { throttle: bad({ key: "k", periodMs: 10, perodMs: 5 }) }),
        "RATCHET_INVALID_INPUT",
      );
      await expectNothingWritten(
        r,
        () => r.enqueue(noop, null, { debounce: bad({ key: "k", delayMs: 10, max: 5 }) }),
        "RATCHET_INVALID_INPUT",
      );
      // The known keys, undefined values included, are still accepted.
      await r.enqueue(noop, null, { queue: undefined, priority: 1 });
      await r.enqueueJob("j", [{ task: noop, job: "j", key: "a" }]);
      expect(await countTasks(r)).toBe(2);
    });

    it("§2.1 the other public option bags refuse unknown keys too", async () => {
      const r = await openRatchet([noop]);
      const bad = { limt: 5 } as never;
      await expectCode(() => r.tick({ budgetMs: 10_000, concurency: 2 } as never), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.start({ concurency: 2 } as never), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.waitFor(1, { timeout: 5 } as never), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.waitForIdle("s", { timeout: 5 } as never), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.inspect(bad), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.tree(1, bad), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.recentlyEnded(bad), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.abortScope("s", { backgrond: true } as never), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.setConcurrencyLimit("g", 1, { kee: "x" } as never), "RATCHET_INVALID_INPUT");
      expect(await countTasks(r)).toBe(0);
      expect(await r.store.seatLimits()).toEqual([]);
    });

    it("§1.4 enqueue returns positive integer ids drawn from one increasing sequence", async () => {
      const r = await openRatchet([noop, echo]);
      const a = await r.enqueue(noop);
      const b = await r.enqueue("echo", { x: 1 });
      const [c, d] = await r.enqueueMany([{ task: noop }, { task: echo, input: 2 }]);
      const [e] = await r.enqueueJob("j1", [{ task: noop, queue: "other" }]);
      const ids = [a, b, c!, d!, e!];
      for (const id of ids) expect(Number.isSafeInteger(id) && id > 0).toBe(true);
      expect([...ids].sort((x, y) => x - y)).toEqual(ids);
      expect(new Set(ids).size).toBe(5);
      expect((await r.get(b))!.input).toEqual({ x: 1 });
      expect((await r.get(e!))!.job).toBe("j1");
      expect((await r.get(e!))!.queue).toBe("other");
    });

    it("§2.2 / §2.8 a batch of alike and differing entries writes each with its own input and options, ids in the caller's order", async () => {
      // Runs of alike plain entries are written by one multi-row INSERT on SQLite; the entries
      // between them (a dedupe key, a delay, another queue or priority, needs) break the runs.
      const clock = new FakeClock();
      const r = await openRatchet([noop, echo], { clock });
      const held = await r.enqueue(noop, null, { dedupe: "d1" });
      const inputs: unknown[] = [
        { a: 1, s: 'é\u2028\ud800 "q" \\' },
        "text",
        12.5,
        1e21,
        null,
        [1, [2, { b: true }]],
        {},
      ];
      type Entry = {
        task: typeof echo | typeof noop;
        input: unknown;
        dedupe?: string;
        delayMs?: number;
        queue?: string;
        priority?: number;
        needs?: number[];
      };
      const entries: Entry[] = [
        ...inputs.map((input) => ({ task: echo, input })),
        { task: echo, input: "deduped", dedupe: "d1" },
        ...inputs.map((input) => ({ task: echo, input, delayMs: 1_000 })),
        { task: noop, input: null, queue: "other" },
        ...inputs.map((input) => ({ task: echo, input, priority: 5 })),
        { task: echo, input: "after", needs: [-1] },
      ];
      const ids = await r.enqueueMany(entries);
      expect(ids[inputs.length]).toBe(held);
      const fresh = ids.filter((id) => id !== held);
      expect([...fresh].sort((x, y) => x - y)).toEqual(fresh);
      expect(new Set(fresh).size).toBe(fresh.length);
      for (let i = 0; i < entries.length; i++) {
        if (ids[i] === held) continue;
        const t = (await r.get(ids[i]!))!;
        const e = entries[i]!;
        expect(t.input).toEqual(e.input);
        expect(t.name).toBe(e.task.name);
        expect(t.queue).toBe(e.queue ?? "default");
        expect(t.priority).toBe(e.priority ?? 0);
        const late = e.delayMs !== undefined || e.needs !== undefined;
        expect(t.status).toBe(late ? "waiting" : "pending");
        if (e.delayMs !== undefined) expect(t.runAfter).toBe(clock.now() + 1_000);
      }
      expect(await countTasks(r)).toBe(entries.length);
    });

    it("§2.1 / §2.2 a batch of bare { task, input } entries writes every input under its own id in order, or nothing", async () => {
      // Bare entries take a shorter path (their options checked once per definition), and on SQLite
      // runs of up to 1,000 are one INSERT each: 2,500 entries are three runs, split by a schema'd task.
      const r = await openRatchet([echo, typed]);
      const n = 2_500;
      const entries = Array.from({ length: n }, (_, i) =>
        i === 1_700
          ? { task: typed, input: { n: i } }
          : { task: i % 2 ? echo : "echo", input: { seq: i, at: i * 1.5 } },
      );
      const ids = await r.enqueueMany(entries);
      expect(ids).toHaveLength(n);
      expect([...ids].sort((x, y) => x - y)).toEqual(ids);
      // Every task, newest first in pages of 1,000: each id holds its own entry's input.
      const byId = new Map<number, unknown>();
      let older: number | undefined;
      for (;;) {
        const page = await r.list({ limit: 1_000, before: older });
        if (page.length === 0) break;
        for (const t of page) byId.set(t.id, t.input);
        older = page[page.length - 1]!.id;
      }
      expect(byId.size).toBe(n);
      ids.forEach((id, i) => {
        expect(byId.get(id)).toEqual(i === 1_700 ? { n: i, label: "x" } : { seq: i, at: i * 1.5 });
      });
      // A bad input anywhere (a getter, a Date, a schema's refusal, an unknown task) writes nothing.
      const before = await countTasks(r);
      const getter = Object.defineProperty({ seq: 1 }, "at", { get: () => 1, enumerable: true });
      for (const [bad, code] of [
        [{ task: echo, input: getter }, "RATCHET_INVALID_JSON"],
        [{ task: echo, input: { at: new Date(0) } }, "RATCHET_INVALID_JSON"],
        [{ task: typed, input: { n: 1.5 } }, "RATCHET_INVALID_INPUT"],
        [{ task: "nope", input: 1 }, "RATCHET_UNKNOWN_TASK"],
      ] as const) {
        const batch = Array.from({ length: 1_500 }, (_, i) => ({ task: echo, input: { seq: i } }));
        batch.splice(1_200, 0, bad as never);
        await expectCode(() => r.enqueueMany(batch), code);
      }
      expect(await countTasks(r)).toBe(before);
    });

    it("§1.4 an id is never reused, not even after the newest task is pruned", async () => {
      const clock = new FakeClock();
      const r = await openRatchet([noop], { clock });
      const a = await r.enqueue(noop);
      await drain(r);
      expect((await r.get(a))!.outcome).toBe("completed");
      clock.advance(1_000);
      expect(await r.store.prune(0, 100)).toBe(1);
      const b = await r.enqueue(noop);
      expect(b).toBeGreaterThan(a);
    });

    it("§1.5 / §2.8 enqueue writes pending (due, no needs), waiting (future or unfinished needs) or upstream_failed", async () => {
      const clock = new FakeClock();
      const r = await openRatchet([noop, fails], { clock });
      const due = await r.enqueue(noop);
      const future = await r.enqueue(noop, null, { delayMs: 1_000 });
      const futureAt = await r.enqueue(noop, null, { runAfter: new Date(clock.now() + 5_000) });
      const past = await r.enqueue(noop, null, { runAfter: clock.now() - 5_000 });
      const blocked = await r.enqueue(noop, null, { needs: [due] });
      expect((await r.get(due))!.status).toBe("pending");
      expect((await r.get(future))!.status).toBe("waiting");
      expect((await r.get(future))!.runAfter).toBe(clock.now() + 1_000);
      expect((await r.get(futureAt))!.status).toBe("waiting");
      expect((await r.get(past))!.status).toBe("pending");
      expect((await r.get(blocked))!.status).toBe("waiting");
      expect((await r.get(blocked))!.needsPending).toBe(1);

      const bad = await r.enqueue(fails);
      await drain(r);
      expect((await r.get(bad))!.outcome).toBe("failed");
      const doomed = await r.enqueue(noop, null, { needs: [bad] });
      const t = (await r.get(doomed))!;
      expect(t.status).toBe("terminal");
      expect(t.outcome).toBe("upstream_failed");
      expect(t.error!.message).toBe(`upstream task ${bad} failed`);
    });

    it("§2.1 an unknown task name throws RATCHET_UNKNOWN_TASK and writes nothing", async () => {
      const r = await openRatchet([noop]);
      await expectNothingWritten(r, () => r.enqueue("nope"), "RATCHET_UNKNOWN_TASK");
      await expectNothingWritten(
        r,
        () => r.enqueueMany([{ task: noop }, { task: "nope" }]),
        "RATCHET_UNKNOWN_TASK",
      );
      await expectNothingWritten(r, () => r.enqueueJob("j", [{ task: "nope" }]), "RATCHET_UNKNOWN_TASK");
    });

    it("§2.1 input failing the Standard Schema (zod) throws RATCHET_INVALID_INPUT and writes nothing; valid input is stored as the schema's output", async () => {
      const r = await openRatchet([typed]);
      const err = await expectNothingWritten(
        r,
        () => r.enqueue(typed, { n: "seven" }),
        "RATCHET_INVALID_INPUT",
      );
      expect(err.message).toContain("n");
      await expectNothingWritten(r, () => r.enqueue("typed", { n: 1.5 }), "RATCHET_INVALID_INPUT");
      await expectNothingWritten(
        r,
        () =>
          r.enqueueMany([
            { task: typed, input: { n: 1 } },
            { task: typed, input: {} },
          ]),
        "RATCHET_INVALID_INPUT",
      );
      await expectNothingWritten(
        r,
        () => r.enqueueJob("j", [{ task: typed, input: null }]),
        "RATCHET_INVALID_INPUT",
      );
      const id = await r.enqueue(typed, { n: 3 });
      expect((await r.get(id))!.input).toEqual({ n: 3, label: "x" });
    });

    it("§2.1 / §4.6 non-JSON input throws RATCHET_INVALID_JSON and writes nothing", async () => {
      const r = await openRatchet([echo]);
      for (const input of [
        { when: new Date() },
        Number.NaN,
        { a: undefined },
        new Map(),
        sparseArray(),
        1n,
      ]) {
        await expectNothingWritten(r, () => r.enqueue(echo, input), "RATCHET_INVALID_JSON");
      }
      await expectNothingWritten(
        r,
        () =>
          r.enqueueMany([
            { task: echo, input: 1 },
            { task: echo, input: { f: () => 1 } },
          ]),
        "RATCHET_INVALID_JSON",
      );
      // A top-level undefined is stored as null.
      const id = await r.enqueue(echo);
      expect((await r.get(id))!.input).toBeNull();
    });

    it("§2.1 oversize input throws RATCHET_PAYLOAD_TOO_LARGE (default 1 MiB, configurable) and writes nothing", async () => {
      const r = await openRatchet([echo]);
      await expectNothingWritten(
        r,
        () => r.enqueue(echo, "x".repeat(1024 * 1024)),
        "RATCHET_PAYLOAD_TOO_LARGE",
      );
      const id = await r.enqueue(echo, "x".repeat(1024 * 1024 - 2));
      expect(((await r.get(id))!.input as string).length).toBe(1024 * 1024 - 2);

      const small = await openRatchet([echo], { maxPayloadBytes: 100 });
      await expectNothingWritten(
        small,
        () => small.enqueue(echo, "y".repeat(99)),
        "RATCHET_PAYLOAD_TOO_LARGE",
      );
      await small.enqueue(echo, "y".repeat(98));
    });

    it("§2.1 priority must be an integer in [-1000, 1000]", async () => {
      const r = await openRatchet([noop]);
      for (const priority of [
        1001,
        -1001,
        1.5,
        Number.NaN,
        Number.POSITIVE_INFINITY,
        "1" as unknown as number,
      ]) {
        await expectNothingWritten(r, () => r.enqueue(noop, null, { priority }), "RATCHET_INVALID_INPUT");
      }
      const hi = await r.enqueue(noop, null, { priority: 1000 });
      const lo = await r.enqueue(noop, null, { priority: -1000 });
      expect((await r.get(hi))!.priority).toBe(1000);
      expect((await r.get(lo))!.priority).toBe(-1000);
    });

    it("§2.1 queue, dedupe and job must be 1–200 characters without control characters", async () => {
      const r = await openRatchet([noop]);
      const bad = ["", "x".repeat(201), "a\nb", "tab\there", "nul\u0000", 5 as unknown as string];
      for (const v of bad) {
        await expectNothingWritten(r, () => r.enqueue(noop, null, { queue: v }), "RATCHET_INVALID_INPUT");
        await expectNothingWritten(r, () => r.enqueue(noop, null, { dedupe: v }), "RATCHET_INVALID_INPUT");
        await expectNothingWritten(r, () => r.enqueue(noop, null, { job: v }), "RATCHET_INVALID_INPUT");
        await expectNothingWritten(r, () => r.enqueueJob(v, [{ task: noop }]), "RATCHET_INVALID_INPUT");
      }
      const id = await r.enqueue(noop, null, {
        queue: "q".repeat(200),
        dedupe: "d".repeat(200),
        job: "ü-job ✓",
      });
      expect((await r.get(id))!.queue).toBe("q".repeat(200));
    });

    it("§2.1 runAfter must be finite and delayMs a finite number ≥ 0", async () => {
      const r = await openRatchet([noop]);
      for (const runAfter of [
        Number.NaN,
        Number.POSITIVE_INFINITY,
        new Date(Number.NaN),
        "soon" as unknown as number,
      ]) {
        await expectNothingWritten(r, () => r.enqueue(noop, null, { runAfter }), "RATCHET_INVALID_INPUT");
      }
      for (const delayMs of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
        await expectNothingWritten(r, () => r.enqueue(noop, null, { delayMs }), "RATCHET_INVALID_INPUT");
      }
      await expectNothingWritten(
        r,
        () => r.enqueue(noop, null, { delayMs: 1, runAfter: Date.now() }),
        "RATCHET_INVALID_INPUT",
      );
    });

    it("§2.1 / §2.5 malformed needs are rejected and write nothing", async () => {
      const r = await openRatchet([noop]);
      for (const needs of [[0], [1.5], [Number.NaN], [{}], ["no-such-key"], [-1]] as unknown as number[][]) {
        await expectNothingWritten(r, () => r.enqueue(noop, null, { needs }), "RATCHET_INVALID_INPUT");
      }
      await expectNothingWritten(
        r,
        () => r.enqueue(noop, null, { needs: "x" as unknown as number[] }),
        "RATCHET_INVALID_INPUT",
      );
    });

    it("§2.5 a need on a task id that does not exist throws RATCHET_NOT_FOUND and writes nothing", async () => {
      const r = await openRatchet([noop]);
      await expectNothingWritten(r, () => r.enqueue(noop, null, { needs: [999] }), "RATCHET_NOT_FOUND");
      // Also when it is the last entry of a batch whose earlier entries were fine.
      await expectNothingWritten(
        r,
        () => r.enqueueMany([{ task: noop }, { task: noop, needs: [-1] }, { task: noop, needs: [12345] }]),
        "RATCHET_NOT_FOUND",
      );
    });

    it("§2.2 a batch with one bad entry writes none of its entries", async () => {
      const r = await openRatchet([noop, typed]);
      await expectNothingWritten(
        r,
        () =>
          r.enqueueJob("job", [
            { task: noop, key: "a" },
            { task: noop, needs: ["a"] },
            { task: typed, input: { n: "bad" } },
          ]),
        "RATCHET_INVALID_INPUT",
      );
      expect((await r.jobStatus("job")).total).toBe(0);
      await expectNothingWritten(r, () => r.enqueueMany([]), "RATCHET_INVALID_INPUT");
    });

    it("§2.6 a cycle through keys rejects the batch with RATCHET_CYCLE and its path, writing nothing", async () => {
      const r = await openRatchet([noop]);
      const err = await expectNothingWritten(
        r,
        () =>
          r.enqueueMany([
            { task: noop, key: "root" },
            { task: noop, key: "a", needs: ["root", "c"] },
            { task: noop, key: "b", needs: ["a"] },
            { task: noop, key: "c", needs: ["b"] },
          ]),
        "RATCHET_CYCLE",
      );
      expect(err).toBeInstanceOf(CycleError);
      const path = (err as CycleError).path;
      expect(path[0]).toBe(path[path.length - 1]);
      expect(new Set(path)).toEqual(new Set(["a", "b", "c"]));
      expect(err.message).toContain("->");
      // A self-need is a cycle too; so is a cycle by negative offsets combined with keys.
      await expectNothingWritten(
        r,
        () => r.enqueueMany([{ task: noop, key: "s", needs: ["s"] }]),
        "RATCHET_CYCLE",
      );
      await expectNothingWritten(
        r,
        () =>
          r.enqueueMany([
            { task: noop, key: "x", needs: ["y"] },
            { task: noop, key: "y", needs: [-1] },
          ]),
        "RATCHET_CYCLE",
      );
    });

    it("§2.5 needs by negative offset and by key resolve within the batch, in any entry order", async () => {
      const r = await openRatchet([noop]);
      const [a, b, c] = await r.enqueueMany([
        { task: noop, key: "c-needs", needs: ["later"] },
        { task: noop, key: "later" },
        { task: noop, needs: [-1, -2] },
      ]);
      expect(await r.store.needsOf(a!)).toEqual([b]);
      expect(await r.store.needsOf(c!)).toEqual([a!, b!].sort((x, y) => x - y));
      expect((await r.get(a!))!.status).toBe("waiting");
      expect((await r.get(b!))!.status).toBe("pending");
      await tickUntil(r, async () => (await r.get(c!))!.status === "terminal");
      expect((await r.get(c!))!.outcome).toBe("completed");
    });

    it("§2.5 a need can name a dedupe key in the same queue", async () => {
      const r = await openRatchet([noop]);
      const seed = await r.enqueue(noop, null, { dedupe: "seed-key" });
      const dep = await r.enqueue(noop, null, { needs: ["seed-key"] });
      expect(await r.store.needsOf(dep)).toEqual([seed]);
      expect((await r.get(dep))!.status).toBe("waiting");
    });

    it("§2.5 a need on a completed task is satisfied; on a live task it waits", async () => {
      const r = await openRatchet([noop]);
      const a = await r.enqueue(noop);
      await drain(r);
      const b = await r.enqueue(noop, null, { needs: [a] });
      expect((await r.get(b))!.status).toBe("pending");
      expect((await r.get(b))!.needsPending).toBe(0);
      const c = await r.enqueue(noop, null, { needs: [b, a] });
      expect((await r.get(c))!.status).toBe("waiting");
      expect((await r.get(c))!.needsPending).toBe(1);
    });

    it("§2.5 a need on an upstream_failed task makes the new task upstream_failed naming the root", async () => {
      const r = await openRatchet([noop, fails]);
      const [root, mid] = await r.enqueueMany([{ task: fails }, { task: noop, needs: [-1] }]);
      await drain(r);
      expect((await r.get(mid!))!.outcome).toBe("upstream_failed");
      const late = await r.enqueue(noop, null, { needs: [mid!] });
      const t = (await r.get(late))!;
      expect(t.outcome).toBe("upstream_failed");
      expect(t.error!.message).toBe(`upstream task ${root} failed`);
    });

    it("§2.7 a full queue throws RATCHET_QUEUE_FULL counting the whole batch, and writes nothing", async () => {
      const r = await openRatchet([noop], { maxDepth: 3 });
      await r.enqueueMany([{ task: noop }, { task: noop }]);
      const err = await expectNothingWritten(
        r,
        () => r.enqueueMany([{ task: noop }, { task: noop }]),
        "RATCHET_QUEUE_FULL",
      );
      expect(err.message).toContain("default");
      await r.enqueue(noop); // 3 live: exactly at the limit
      await expectNothingWritten(r, () => r.enqueue(noop), "RATCHET_QUEUE_FULL");
      // Other queues have their own counters.
      await r.enqueue(noop, null, { queue: "other" });
      // Finished tasks leave the live count.
      await drain(r);
      await r.enqueueMany([{ task: noop }, { task: noop }, { task: noop }]);
      await expectNothingWritten(r, () => r.enqueue(noop), "RATCHET_QUEUE_FULL");
    });

    it("§2.2, §2.7 a batch over two queues that fills one writes nothing to the other, nor its counter", async () => {
      // Queues are admitted in name order: "big" is counted before "small" is found full, in the same
      // transaction (on PostgreSQL one statement), which must roll the count back too.
      const r = await openRatchet([noop], { maxDepth: { small: 1, "*": 3 } });
      const entry = (queue: string) => ({ task: noop, queue });
      await expectNothingWritten(
        r,
        () => r.enqueueMany([entry("big"), entry("big"), entry("small"), entry("small")]),
        "RATCHET_QUEUE_FULL",
      );
      // "big" still has its whole depth: three fit, the fourth does not.
      await r.enqueueMany([entry("big"), entry("big"), entry("big")]);
      await expectCode(() => r.enqueue(noop, null, { queue: "big" }), "RATCHET_QUEUE_FULL");
    });

    it("§2.7 maxDepth can be set per queue with a '*' fallback", async () => {
      const r = await openRatchet([noop], { maxDepth: { small: 1, "*": 2 } });
      await r.enqueue(noop, null, { queue: "small" });
      await expectCode(() => r.enqueue(noop, null, { queue: "small" }), "RATCHET_QUEUE_FULL");
      await r.enqueueMany([{ task: noop }, { task: noop }]);
      await expectCode(() => r.enqueue(noop), "RATCHET_QUEUE_FULL");
    });

    it("§2.3 a repeat dedupe key returns the same id and writes nothing; the key is per queue", async () => {
      const r = await openRatchet([noop]);
      const a = await r.enqueue(noop, 1, { dedupe: "k" });
      const before = await countTasks(r);
      expect(await r.enqueue(noop, 2, { dedupe: "k" })).toBe(a);
      expect(await countTasks(r)).toBe(before);
      expect((await r.get(a))!.input).toBe(1);
      const other = await r.enqueue(noop, 3, { dedupe: "k", queue: "other" });
      expect(other).not.toBe(a);
      // Within one batch too.
      const [x, y] = await r.enqueueMany([
        { task: noop, dedupe: "batch" },
        { task: noop, dedupe: "batch" },
      ]);
      expect(x).toBe(y);
    });

    it("§2.3 a completed task keeps its key; failed, aborted and upstream_failed tasks release it", async () => {
      const r = await openRatchet([noop, fails]);
      const done = await r.enqueue(noop, null, { dedupe: "done" });
      const failed = await r.enqueue(fails, null, { dedupe: "failed" });
      const aborted = await r.enqueue(noop, null, { dedupe: "aborted", delayMs: 60_000 });
      const up = await r.enqueue(noop, null, { dedupe: "up", needs: [failed] });
      await r.abort(aborted);
      await drain(r);
      expect((await r.get(done))!.outcome).toBe("completed");
      expect((await r.get(failed))!.outcome).toBe("failed");
      expect((await r.get(up))!.outcome).toBe("upstream_failed");
      expect(await r.enqueue(noop, null, { dedupe: "done" })).toBe(done);
      for (const [key, old] of [
        ["failed", failed],
        ["aborted", aborted],
        ["up", up],
      ] as const) {
        const again = await r.enqueue(noop, null, { dedupe: key });
        expect(again).not.toBe(old);
        expect((await r.get(again))!.status).toBe("pending");
      }
    });

    it("§2.4 a deduplicated entry still acts as the predecessor of later entries in the batch", async () => {
      const r = await openRatchet([noop]);
      const existing = await r.enqueue(noop, null, { dedupe: "shared", delayMs: 60_000 });
      const [first, second, third] = await r.enqueueMany([
        { task: noop, dedupe: "shared" },
        { task: noop, needs: [-1] },
        { task: noop, key: "k", dedupe: "other" },
      ]);
      expect(first).toBe(existing);
      expect(await r.store.needsOf(second!)).toEqual([existing]);
      expect((await r.get(second!))!.status).toBe("waiting");
      expect(third).not.toBe(existing);
    });

    it("§2.4 a deduplicated entry named by key is the predecessor too", async () => {
      const r = await openRatchet([noop]);
      const existing = await r.enqueue(noop, null, { dedupe: "shared", delayMs: 60_000 });
      const [, dep] = await r.enqueueMany([
        { task: noop, needs: ["pred"] },
        { task: noop, key: "pred", dedupe: "shared" },
      ]);
      expect(dep).toBe(existing);
      const all = await r.list({});
      const waiting = all.find((t) => t.id !== existing)!;
      expect(await r.store.needsOf(waiting.id)).toEqual([existing]);
    });
  });
});

// SQLite white-box (reads ratchet_queues); the conformance suite checks the counter on every backend
// through admission alone ("§2.7 the live count follows …").
describe("queue depth counter (spec §2.7)", () => {
  it("§2.7 the maintained per-queue live counter matches the live tasks through enqueue, completion, cascade, abort and retry", async () => {
    const clock = new FakeClock();
    const fails2 = defineTask({
      name: "fails2",
      retry: { maxAttempts: 1 },
      run: () => {
        throw new Error("x");
      },
    });
    const r = await openRatchet([noop, fails2], { clock });
    const db = (r.store as SqliteStore).db;
    const check = () => {
      const counters = db.prepare("SELECT name, live FROM ratchet_queues ORDER BY name").all() as {
        name: string;
        live: number;
      }[];
      const actual = db
        .prepare(
          "SELECT queue AS name, count(*) AS live FROM ratchet_tasks WHERE status <> 'terminal' GROUP BY queue ORDER BY queue",
        )
        .all() as { name: string; live: number }[];
      expect(counters.filter((c) => c.live !== 0)).toEqual(actual);
    };
    const [f] = await r.enqueueMany([
      { task: fails2 },
      { task: noop, needs: [-1] },
      { task: noop, needs: [-1], queue: "q2" },
    ]);
    await r.enqueue(noop, null, { dedupe: "d" });
    await r.enqueue(noop, null, { dedupe: "d" });
    const waiting = await r.enqueue(noop, null, { delayMs: 10_000, queue: "q2" });
    check();
    await drain(r);
    check();
    await r.enqueue(noop, null, { needs: [f!] }); // inserted upstream_failed: not live
    check();
    await r.abort(waiting);
    check();
    await r.retry(f!);
    check();
    clock.advance(100_000);
    await drain(r);
    check();
  });
});
