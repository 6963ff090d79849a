/** generate(): one durable model turn inside a task, on SQLite and PostgreSQL (spec §18.7, §18.8). */
import { describe, expect, it } from "vitest";
import type { TaskContext } from "../../src/engine/context.js";
import { defineTask, type Ratchet } from "../../src/index.js";
import { ModelCatalog } from "../../src/models/catalog.js";
import { type FauxScript, fauxModel } from "../../src/models/faux.js";
import { generate, type TurnChunk, type TurnResult } from "../../src/models/generate.js";
import { createRouter } from "../../src/models/router.js";
import type { ModelPrompt } from "../../src/models/stream.js";
import type { StreamAppend } from "../../src/store/streams/ops.js";
import type { TurnWrite } from "../../src/store/usage/ops.js";
import { createStore, drain, forEachBackend, openRatchet, until } from "../engine/helpers.js";
import { overriding } from "../store-override.js";

const PROMPT: ModelPrompt = [{ role: "user", content: [{ type: "text", text: "say something" }] }];
const catalog = new ModelCatalog([
  { provider: "faux", model: "faux-1", contextWindow: 1000, maxOutput: 100, prices: { input: 1, output: 2 } },
]);

async function chunks(r: Ratchet, id: number, name = "answer"): Promise<TurnChunk[]> {
  const out: TurnChunk[] = [];
  for await (const c of r.readStream(id, name, { follow: false })) out.push(c.data as TurnChunk);
  return out;
}

function turnTask(
  scripts: FauxScript[],
  opts: { failAfter?: number; maxAttempts?: number; conversationId?: string } = {},
) {
  const model = fauxModel({ scripts });
  let runs = 0;
  const task = defineTask({
    name: "turn",
    retry: { maxAttempts: opts.maxAttempts ?? 3, baseMs: 0, capMs: 0 },
    async run(ctx: TaskContext) {
      runs++;
      const res = await generate(ctx, {
        name: "answer",
        model,
        prompt: PROMPT,
        catalog,
        conversationId: opts.conversationId ?? "conv-1",
      });
      // A failure after the turn committed: the rerun must not request (or count) it again.
      if (opts.failAfter !== undefined && runs <= opts.failAfter) throw new Error("after the turn");
      return res;
    },
  });
  return { model, task, runs: () => runs };
}

forEachBackend(() => {
  describe("generate (spec §18.7)", () => {
    it("§18.7 deltas stream into the turn's stream; the answer and its usage commit once; a rerun does not request again", async () => {
      const { model, task } = turnTask(
        [{ text: "hello world", chunkChars: 3, usage: { input: 10, output: 4 } }],
        {
          failAfter: 1,
        },
      );
      const r = await openRatchet([task]);
      const id = await r.enqueue(task);
      await until(async () => {
        await drain(r);
        return (await r.get(id))?.status === "terminal";
      }, "the task to finish");
      const t = (await r.get(id))!;
      expect(t.outcome).toBe("completed");
      const res = t.result as TurnResult;
      expect(res).toMatchObject({
        text: "hello world",
        finishReason: "stop",
        provider: "faux",
        route: "faux/faux-1",
      });
      expect(res.cost).toBeCloseTo((10 * 1 + 4 * 2) / 1e6);
      expect(model.calls).toBe(1);
      // spec §18.7: the conversation is the provider session identity (prompt caching).
      expect(model.sessions).toEqual(["conv-1"]);
      const got = await chunks(r, id);
      expect(got[0]).toEqual({ t: "attempt", attempt: 1 });
      expect(got.filter((c) => c.t === "text").map((c) => (c as { d: string }).d)).toEqual([
        "hel",
        "lo ",
        "wor",
        "ld",
      ]);
      expect(got.at(-1)).toMatchObject({ t: "finish", reason: "stop" });
      const totals = await r.store.usage.usageTotals({ taskId: id });
      expect(totals).toMatchObject({ responses: 1, failed: 0, input: 10, output: 4 });
      expect((await r.store.usage.usageTotals({ conversationId: "conv-1" })).responses).toBe(1);
    });

    it("§18.7 a request that failed mid-stream is re-requested on the rerun; its partial text stays before the new attempt marker", async () => {
      const { model, task } = turnTask([
        { text: "abcdef", chunkChars: 2, error: { status: 502, afterChunks: 2 } },
        { text: "second" },
      ]);
      const r = await openRatchet([task]);
      const id = await r.enqueue(task);
      await until(async () => {
        await drain(r);
        return (await r.get(id))?.status === "terminal";
      }, "the turn to finish");
      expect(((await r.get(id))!.result as TurnResult).text).toBe("second");
      expect(model.calls).toBe(2);
      const kinds = (await chunks(r, id)).map((c) => (c.t === "text" ? c.d : c.t));
      expect(kinds).toEqual(["attempt", "ab", "cd", "error", "attempt", "seco", "nd", "finish"]);
      expect((await r.store.usage.usageTotals({ taskId: id })).responses).toBe(1);
    });

    it("§18.7 a 400 fails the task at once; a 429 with retry-after defers it without using an attempt", async () => {
      const bad = turnTask([{ error: { status: 400, message: "bad request" } }]);
      const r = await openRatchet([bad.task]);
      const id = await r.enqueue(bad.task);
      await drain(r);
      expect((await r.get(id))!.outcome).toBe("failed");
      expect(bad.model.calls).toBe(1);

      const limited = turnTask([{ error: { status: 429, retryAfterSeconds: 3600 } }]);
      const r2 = await openRatchet([limited.task]);
      const id2 = await r2.enqueue(limited.task);
      await drain(r2);
      const t = (await r2.get(id2))!;
      expect(t.status).not.toBe("terminal");
      expect(t.attempts).toBe(0);
      expect(limited.model.calls).toBe(1);
    });

    it("§18.10 a turn's buffered chunks commit in its step's transaction: one transaction per fast turn, and a failed commit leaves neither", async () => {
      const inner = await createStore();
      let refuse = 1;
      let appends = 0;
      const carried: number[] = [];
      const store = overriding(inner, {
        appendStreams: async (items: StreamAppend[]) => {
          appends++;
          return inner.appendStreams(items);
        },
        usage: {
          ...inner.usage,
          commitTurns: async (w: TurnWrite[]) => {
            for (const x of w) carried.push(x.streams.reduce((n, a) => n + a.chunks.length, 0));
            if (refuse-- > 0) throw new Error("crash inside the turn's commit");
            return inner.usage.commitTurns(w);
          },
        },
      });
      const { model, task } = turnTask([
        { text: "lost once", chunkChars: 4, usage: { input: 7, output: 3 } },
      ]);
      // An interval no instant turn reaches, so no interval commit can come between its chunks.
      const r = await openRatchet([task], { store, streamIntervalMs: 60_000 });
      const id = await r.enqueue(task);
      await until(async () => {
        await drain(r);
        return (await r.get(id))?.status === "terminal";
      }, "the turn to finish");
      expect((await r.get(id))!.outcome).toBe("completed");
      expect(model.calls).toBe(2);
      // The whole turn (attempt, three text chunks, finish) rode in each commit; no append of its own.
      expect(carried).toEqual([5, 5]);
      expect(appends).toBe(0);
      // The failed commit wrote none of its chunks: the stream holds the second attempt alone.
      const kinds = (await chunks(r, id)).map((c) => (c.t === "attempt" ? `attempt ${c.attempt}` : c.t));
      expect(kinds).toEqual(["attempt 2", "text", "text", "text", "finish"]);
      // Its finish never committed, so its answer cannot be known (spec §18.8): counted once.
      expect(await inner.usage.usageTotals({ taskId: id })).toMatchObject({ responses: 1, failed: 0 });
    });

    it("§18.8 an answer whose finish committed but whose step did not is recorded once as a failed, billed row on the rerun", async () => {
      const inner = await createStore();
      let refuse = 1;
      const store = overriding(inner, {
        usage: {
          ...inner.usage,
          // The chunks land and the step does not: what a refused step leaves (spec §18.10).
          commitTurns: async (w: TurnWrite[]) => {
            if (refuse-- > 0) {
              await inner.appendStreams(w.flatMap((x) => x.streams));
              throw new Error("crash between the answer's chunks and its step");
            }
            return inner.usage.commitTurns(w);
          },
        },
      });
      const { model, task } = turnTask([{ text: "paid twice?", usage: { input: 7, output: 3 } }]);
      const r = await openRatchet([task], { store });
      const id = await r.enqueue(task);
      await until(async () => {
        await drain(r);
        return (await r.get(id))?.status === "terminal";
      }, "the turn to finish");
      expect(model.calls).toBe(2);
      const totals = await inner.usage.usageTotals({ taskId: id });
      expect(totals).toMatchObject({ responses: 2, failed: 1, input: 14, output: 6 });
    });

    it("§18.7 aborting the task mid-stream cancels the in-flight request", async () => {
      let signal: AbortSignal | undefined;
      const model = fauxModel({ scripts: [{ text: "partial", stall: true }] });
      const inner = model.doStream.bind(model);
      model.doStream = (call) => {
        signal = call.abortSignal;
        return inner(call);
      };
      const task = defineTask({
        name: "turn",
        async run(ctx: TaskContext) {
          return generate(ctx, { name: "answer", model, prompt: PROMPT });
        },
      });
      const r = await openRatchet([task]);
      const id = await r.enqueue(task);
      const ticking = drain(r);
      await until(async () => (await chunks(r, id)).some((c) => c.t === "text"), "partial text committed");
      await r.abort(id);
      await until(() => signal?.aborted === true, "the request to be cancelled");
      await ticking;
      expect((await r.get(id))!.outcome).toBe("aborted");
    });

    it("§18.7 with usageUnit, the answer's tokens correct the estimate the task's rate-limit buckets were charged", async () => {
      const inner = await createStore();
      const reports: unknown[] = [];
      const store = overriding(inner, {
        reportUsage: (id: number, usage: Record<string, number>) => {
          reports.push(usage);
          return inner.reportUsage(id, usage);
        },
      });
      const model = fauxModel({ scripts: [{ text: "ok", usage: { input: 30, output: 12 } }] });
      const task = defineTask({
        name: "turn",
        rateLimit: [{ name: "tpm", limit: 10_000, periodMs: 60_000, cost: 500, unit: "tokens" }],
        async run(ctx: TaskContext) {
          return generate(ctx, { name: "answer", model, prompt: PROMPT, usageUnit: "tokens" });
        },
      });
      const r = await openRatchet([task], { store });
      const id = await r.enqueue(task);
      await drain(r);
      expect((await r.get(id))!.outcome).toBe("completed");
      expect(reports).toEqual([{ tokens: 42 }]);
    });

    it("§18.7 a turn name used twice in one run is a DuplicateStepError", async () => {
      const model = fauxModel({ scripts: [{ text: "ok" }] });
      const task = defineTask({
        name: "turn",
        retry: { maxAttempts: 1 },
        async run(ctx: TaskContext) {
          await generate(ctx, { name: "answer", model, prompt: PROMPT });
          return generate(ctx, { name: "answer", model, prompt: PROMPT });
        },
      });
      const r = await openRatchet([task]);
      const id = await r.enqueue(task);
      await drain(r);
      const t = (await r.get(id))!;
      expect(t.outcome).toBe("failed");
      expect(t.error).toMatchObject({ code: "RATCHET_DUPLICATE_STEP" });
      expect(model.calls).toBe(1);
    });

    it("§18.5 a router is used like a model: the usage row names the route that answered", async () => {
      const a = fauxModel({ provider: "down", scripts: [{ error: { status: 503 } }] });
      const b = fauxModel({ provider: "faux", scripts: [{ text: "ok" }] });
      const task = defineTask({
        name: "turn",
        async run(ctx: TaskContext) {
          const router = createRouter({ routes: [{ model: a }, { model: b, name: "backup" }] });
          return generate(ctx, { name: "answer", model: router, prompt: PROMPT });
        },
      });
      const r = await openRatchet([task]);
      const id = await r.enqueue(task);
      await drain(r);
      expect((await r.get(id))!.result).toMatchObject({
        route: "backup",
        fallbacks: [{ route: "down/faux-1" }],
      });
      const [row] = await r.store.usage.listUsage({ taskId: id });
      expect(row).toMatchObject({ route: "backup", provider: "faux", model: "faux-1", status: "committed" });
    });
  });
});
