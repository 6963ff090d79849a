/** Durable output streams through the engine (spec §16), on SQLite and PostgreSQL. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { TaskContext } from "../../src/engine/context.js";
import type { StreamWriter } from "../../src/engine/stream.js";
import type { StreamChunk } from "../../src/engine/stream-reader.js";
import { defineTask, type Ratchet, type RatchetError } from "../../src/index.js";
import type { StreamAppend } from "../../src/store/streams/ops.js";
import { overriding } from "../store-override.js";
import {
  claimReq,
  createStore,
  deferred,
  drain,
  expectCode,
  FakeClock,
  forEachBackend,
  openRatchet,
  until,
  untilStatus,
} from "./helpers.js";

/** Every chunk of a stream committed now (no following). */
async function committed(r: Ratchet, id: number, name = "out", from = 0): Promise<StreamChunk[]> {
  const out: StreamChunk[] = [];
  for await (const c of r.readStream(id, name, { from, follow: false })) out.push(c);
  return out;
}

/** A store whose appendStreams batches are recorded (each batch's chunk count). */
async function countingStore(): Promise<{
  store: Awaited<ReturnType<typeof createStore>>;
  batches: number[];
}> {
  const inner = await createStore();
  const batches: number[] = [];
  const store = overriding(inner, {
    appendStreams: (items: readonly StreamAppend[]) => {
      for (const i of items) batches.push(i.chunks.length);
      return inner.appendStreams(items);
    },
  });
  return { store, batches };
}

forEachBackend(() => {
  describe("durable output streams (spec §16)", () => {
    it("§16.2 chunks written within one interval commit as one batch; a step's chunks commit before the step", async () => {
      const { store, batches } = await countingStore();
      const gate = deferred();
      const t = defineTask({
        name: "writer",
        async run(ctx: TaskContext) {
          const out = await ctx.stream("out");
          for (let i = 0; i < 10; i++) out.write(`t${i}`);
          await ctx.step("after", () => gate.promise.then(() => 1));
          out.write({ done: true });
          return out.offset;
        },
      });
      // An interval far longer than the test: only boundaries commit.
      const r = await openRatchet([t], { store, streamIntervalMs: 60_000 });
      const id = await r.enqueue(t);
      const ticking = drain(r);
      await until(() => r.get(id).then((x) => x?.status === "running"), "the writer to run");
      expect(await committed(r, id)).toEqual([]);
      gate.resolve();
      await ticking;
      const all = await committed(r, id);
      expect(all.map((c) => c.data)).toEqual([
        ...Array.from({ length: 10 }, (_, i) => `t${i}`),
        { done: true },
      ]);
      expect(all.map((c) => c.offset)).toEqual(Array.from({ length: 11 }, (_, i) => i));
      // One batch before the step (10 chunks), one before the settlement (1).
      expect(batches).toEqual([10, 1]);
      expect((await r.get(id))!.result).toBe(11);
    });

    it("§16.2 without any boundary, buffered chunks commit within the interval", async () => {
      const gate = deferred();
      const t = defineTask({
        name: "live",
        async run(ctx: TaskContext) {
          const out = await ctx.stream("out");
          out.write("first");
          out.write("second");
          await gate.promise;
          return null;
        },
      });
      const r = await openRatchet([t], { streamIntervalMs: 20 });
      const id = await r.enqueue(t);
      const ticking = drain(r);
      await until(async () => (await committed(r, id)).length === 2, "the interval's commit");
      expect((await r.get(id))!.status).toBe("running");
      gate.resolve();
      await ticking;
    });

    it("§16.1 a rerun gets its stream back: offset is where it stopped, and it continues there", async () => {
      const offsets: number[] = [];
      const t = defineTask({
        name: "resume",
        retry: { maxAttempts: 2, baseMs: 0, capMs: 0 },
        async run(ctx: TaskContext) {
          const out = await ctx.stream("out");
          offsets.push(out.offset);
          const start = out.offset;
          for (let i = start; i < start + 3; i++) out.write(i);
          await out.flush();
          if (ctx.attempt === 1) throw new Error("crash after three chunks");
          await out.close();
          return out.committed;
        },
      });
      const r = await openRatchet([t]);
      const id = await r.enqueue(t);
      await until(async () => {
        await drain(r);
        return (await r.get(id))?.status === "terminal";
      }, "both attempts");
      expect(offsets).toEqual([0, 3]);
      expect((await committed(r, id)).map((c) => c.data)).toEqual([0, 1, 2, 3, 4, 5]);
      const [info] = await r.streams(id);
      expect(info).toMatchObject({ name: "out", length: 6, closed: true });
    });

    it("§16.5 a follower gets chunks as they commit and ends after the last chunk of a closed stream", async () => {
      const steps = [deferred(), deferred(), deferred()];
      const closedAndWaiting = deferred();
      const t = defineTask({
        name: "follow",
        async run(ctx: TaskContext) {
          const out = await ctx.stream("out");
          for (const [i, s] of steps.entries()) {
            await s.promise;
            out.write(`part ${i}`);
            await out.flush();
          }
          await out.close();
          await closedAndWaiting.promise;
          return null;
        },
      });
      const r = await openRatchet([t]);
      const id = await r.enqueue(t);
      const seen: StreamChunk[] = [];
      const reading = (async () => {
        for await (const c of r.readStream(id, "out")) {
          seen.push(c);
          steps[seen.length]?.resolve();
        }
      })();
      const ticking = drain(r);
      steps[0]!.resolve();
      await reading; // ends at the close, while the task still runs
      expect(seen).toEqual([0, 1, 2].map((i) => ({ offset: i, data: `part ${i}` })));
      expect((await r.get(id))!.status).toBe("running");
      closedAndWaiting.resolve();
      await ticking;
    });

    it("§16.5 a follower of a stream never closed ends when the task ends", async () => {
      const go = deferred();
      const t = defineTask({
        name: "unclosed",
        async run(ctx: TaskContext) {
          await go.promise;
          (await ctx.stream("out")).write("only");
          return null;
        },
      });
      const r = await openRatchet([t]);
      const id = await r.enqueue(t);
      const reading = (async () => {
        const got: unknown[] = [];
        for await (const c of r.readStream(id, "out", { pollMs: 5 })) got.push(c.data);
        return got;
      })();
      const ticking = drain(r);
      go.resolve();
      expect(await reading).toEqual(["only"]);
      await ticking;
    });

    it("§16.5 reading from any offset, and resuming after any chunk, gives exactly the rest", async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.constant(null)), { maxLength: 40 }),
          fc.array(fc.nat(40), { maxLength: 6 }),
          fc.nat(41),
          async (chunks, flushAt, cut) => {
            const t = defineTask({
              name: "prop",
              async run(ctx: TaskContext) {
                const out = await ctx.stream("out");
                for (const [i, c] of chunks.entries()) {
                  out.write(c);
                  if (flushAt.includes(i)) await out.flush();
                }
                await out.close();
                return null;
              },
            });
            const r = await openRatchet([t]);
            const id = await r.enqueue(t);
            await drain(r);
            const stored = chunks.map((c) => (c === undefined ? null : c));
            for (let from = 0; from <= chunks.length; from++)
              expect((await committed(r, id, "out", from)).map((c) => c.data)).toEqual(stored.slice(from));
            // A reader that stops after `cut` chunks and reconnects with the next offset.
            const first: StreamChunk[] = [];
            for await (const c of r.readStream(id, "out")) {
              if (first.length >= cut) break;
              first.push(c);
            }
            const next = first.length === 0 ? 0 : first[first.length - 1]!.offset + 1;
            const rest = await committed(r, id, "out", next);
            expect([...first, ...rest].map((c) => c.offset)).toEqual(stored.map((_, i) => i));
            await r.close();
          },
        ),
        { numRuns: 15, seed: 16_5 },
      );
    });

    it("§16.2 §16.6 a closed stream, a chunk past the chunk cap and a stream past its cap throw typed errors and write nothing", async () => {
      const errors: string[] = [];
      const t = defineTask({
        name: "caps",
        async run(ctx: TaskContext) {
          const out = await ctx.stream("out");
          const tryWrite = (w: StreamWriter, v: unknown) => {
            try {
              w.write(v);
            } catch (e) {
              errors.push((e as { code: string }).code);
            }
          };
          tryWrite(out, "x".repeat(100));
          out.write("12345");
          tryWrite(out, "1234567890123"); // 5+2 + 13+2 > 20
          tryWrite(out, () => 1);
          await out.close();
          tryWrite(out, "late");
          const bad = await ctx.stream("bad name\u0000").catch((e: { code: string }) => e.code);
          errors.push(String(bad));
          return null;
        },
      });
      const r = await openRatchet([t], { maxStreamChunkBytes: 64, maxStreamBytes: 20 });
      const id = await r.enqueue(t);
      await drain(r);
      expect(errors).toEqual([
        "RATCHET_PAYLOAD_TOO_LARGE",
        "RATCHET_STREAM_FULL",
        "RATCHET_INVALID_JSON",
        "RATCHET_STREAM_CLOSED",
        "RATCHET_INVALID_INPUT",
      ]);
      expect((await committed(r, id)).map((c) => c.data)).toEqual(["12345"]);
      expect((await r.get(id))!.outcome).toBe("completed");
    });

    it("§16.3 a writer kept past its invocation changes nothing", async () => {
      let kept: StreamWriter | undefined;
      const t = defineTask({
        name: "escape",
        async run(ctx: TaskContext) {
          kept = await ctx.stream("out");
          kept.write("in time");
          return null;
        },
      });
      const r = await openRatchet([t]);
      const id = await r.enqueue(t);
      await drain(r);
      await untilStatus(r, id, "terminal");
      await expectCode(() => kept!.write("too late"), "RATCHET_LEASE_LOST");
      expect((await committed(r, id)).map((c) => c.data)).toEqual(["in time"]);
    });

    it("§16.3 after another worker takes the task over, the old holder's buffered chunks change nothing and its writer fails", async () => {
      const clock = new FakeClock();
      let r!: Ratchet;
      const seen: { flush?: string; write?: string; aborted?: boolean } = {};
      const t = defineTask({
        name: "victim",
        maxMs: 1_000,
        async run(ctx: TaskContext) {
          const out = await ctx.stream("out");
          out.write("before");
          await out.flush();
          out.write("after the takeover");
          clock.advance(1_000 + 10_000);
          const [stolen] = await r.store.claim(claimReq({ workerId: "thief", names: ["victim"] }));
          await r.store.appendStreams([
            {
              fence: { taskId: stolen!.id, token: stolen!.epoch, claimedAt: stolen!.claimedAt },
              name: "out",
              expect: 1,
              chunks: ['"thief"'],
              bytes: 7,
              close: false,
              maxBytes: 1_000,
            },
          ]);
          await out.flush().catch((e: RatchetError) => (seen.flush = e.code));
          try {
            out.write("never");
          } catch (e) {
            seen.write = (e as RatchetError).code;
          }
          seen.aborted = ctx.signal.aborted;
          return null;
        },
      });
      r = await openRatchet([t], { clock, streamIntervalMs: 60_000 });
      const id = await r.enqueue(t);
      await r.tick({ budgetMs: 3_600_000, concurrency: 1 });
      expect(seen).toEqual({ flush: "RATCHET_LEASE_LOST", write: "RATCHET_LEASE_LOST", aborted: true });
      expect((await committed(r, id)).map((c) => c.data)).toEqual(["before", "thief"]);
    });

    it("§16.5 bad arguments are refused before anything is read; an unknown task is RATCHET_NOT_FOUND", async () => {
      const r = await openRatchet([]);
      await expectCode(() => r.readStream(0, "out"), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.readStream(1, ""), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.readStream(1, "out", { from: -1 }), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.readStream(1, "out", { from: 1.5 }), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.readStream(1, "out", { pollMs: 0 }), "RATCHET_INVALID_INPUT");
      await expectCode(() => r.readStream(1, "out", { bogus: 1 } as never), "RATCHET_INVALID_INPUT");
      await expectCode(() => committed(r, 424_242), "RATCHET_NOT_FOUND");
      await expectCode(() => r.streams(-3), "RATCHET_INVALID_INPUT");
    });

    it("§16.5 a follower stops when its signal aborts", async () => {
      const gate = deferred();
      const t = defineTask({
        name: "forever",
        async run(ctx: TaskContext) {
          (await ctx.stream("out")).write("a");
          await gate.promise;
          return null;
        },
      });
      const r = await openRatchet([t]);
      const id = await r.enqueue(t);
      const ticking = drain(r);
      const ac = new AbortController();
      const got: unknown[] = [];
      for await (const c of r.readStream(id, "out", { signal: ac.signal })) {
        got.push(c.data);
        ac.abort();
      }
      expect(got).toEqual(["a"]);
      gate.resolve();
      await ticking;
    });
  });
});
