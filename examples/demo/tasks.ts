/**
 * The demo's three task definitions: fetch-doc → summarize → report.
 *
 * Each step body records itself in the side ledger just before it returns,
 * so the ledger shows which bodies ran and whether any ran twice.
 */
import { z } from "zod";
import { defineTask, NonRetryableError, type Ratchet } from "../../src/index.js";
import type { Ledger } from "./ledger.js";
import { type Doc, download, ModelError, summarise, type TokenBucket } from "./sim.js";

export const JOB = "demo-report";

export interface DemoWorld {
  seed: number;
  ledger: Ledger;
  limiter: TokenBucket;
  /** Set once the engine is open; task code reads predecessor results through it. */
  ratchet?: Ratchet;
  /** Counted in this process: each thrown model error is one failed attempt, retried with backoff. */
  errors: { overloaded: number; rateLimited: number };
  /** Called when a task's code has finished (before its completion is committed). */
  onTaskFinished(): void;
}

export interface Summary {
  doc: number;
  summary: string;
}

/** Results of the task's predecessors (`needs`), in id order. They are all completed, or it would not run. */
async function inputsOf(w: DemoWorld, taskId: number): Promise<unknown[]> {
  const r = w.ratchet;
  if (!r) throw new NonRetryableError("the demo world has no engine");
  const ids = await r.store.needsOf(taskId);
  const tasks = await Promise.all(ids.map((id) => r.get(id)));
  return tasks.map((t, i) => {
    if (t?.outcome !== "completed") throw new NonRetryableError(`predecessor ${ids[i]} is not completed`);
    return t.result;
  });
}

const DocInput = z.object({ doc: z.number().int().min(1) });

export function demoTasks(w: DemoWorld) {
  const fetchDoc = defineTask({
    name: "fetch-doc",
    maxMs: 2_000,
    schema: DocInput,
    async run(ctx, input) {
      const doc = await ctx.step("download", async () => {
        const d = await download(w.seed, input.doc);
        w.ledger.record("download", ctx.taskId);
        return d;
      });
      w.onTaskFinished();
      return doc;
    },
  });

  const summarize = defineTask({
    name: "summarize",
    maxMs: 2_000,
    schema: DocInput,
    retry: { maxAttempts: 6, baseMs: 50, factor: 2, capMs: 1000, floorMs: 10 },
    async run(ctx, input): Promise<Summary> {
      const [doc] = (await inputsOf(w, ctx.taskId)) as Doc[];
      if (!doc) throw new NonRetryableError(`summarize ${ctx.taskId} has no fetch-doc predecessor`);
      const summary = await ctx.step("model", async () => {
        try {
          const s = await summarise(w.seed, doc, ctx.attempt, w.limiter);
          w.ledger.record("model", ctx.taskId);
          return s;
        } catch (e) {
          if (e instanceof ModelError) {
            if (e.kind === "rate_limited") w.errors.rateLimited++;
            else w.errors.overloaded++;
          }
          throw e;
        }
      });
      w.onTaskFinished();
      return { doc: input.doc, summary };
    },
  });

  const report = defineTask({
    name: "report",
    maxMs: 30_000,
    schema: z.object({ docs: z.number().int().min(1) }),
    async run(ctx, input) {
      const lines = await ctx.step("collect", async () => {
        const parts = (await inputsOf(w, ctx.taskId)) as Summary[];
        const sorted = parts.sort((a, b) => a.doc - b.doc).map((p) => `- ${p.summary}`);
        w.ledger.record("collect", ctx.taskId);
        return sorted;
      });
      await ctx.progress(0.5, `collected ${lines.length} summaries`);
      const text = await ctx.step("write", () => {
        const out = [`Report: ${lines.length} of ${input.docs} documents summarised`, ...lines].join("\n");
        w.ledger.record("write", ctx.taskId);
        return out;
      });
      await ctx.progress(1, "report written");
      w.onTaskFinished();
      return { documents: lines.length, report: text };
    },
  });

  return { fetchDoc, summarize, report };
}
