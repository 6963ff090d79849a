/** Background compaction ahead of the limit (spec §19.28), over a faux model, both stores. */
import { describe, expect, it } from "vitest";
import { defineAgent } from "../../src/agent/agent.js";
import { BACKGROUND_KEY } from "../../src/agent/background.js";
import { Conversations } from "../../src/agent/index.js";
import { reset } from "../../src/agent/reset.js";
import { fauxModel } from "../../src/models/faux.js";
import type { ModelPrompt } from "../../src/models/stream.js";
import { drain, forEachBackend, openRatchet } from "../engine/helpers.js";

const isSummary = (p: ModelPrompt) => p[0]?.role === "system" && String(p[0].content).startsWith("Summarize");
const texts = (p: ModelPrompt) => JSON.stringify(p);

/** Hard limit 900 tokens, soft 300: a few ~100-token messages pass the soft one long before the hard one. */
async function world(id: string) {
  let summaries = 0;
  // Each summary says which it was: the first is the background one.
  const model = fauxModel({
    scripts: (_n, call) => ({ text: isSummary(call.prompt) ? `SUMMARY ${++summaries}` : "ok" }),
  });
  const agent = defineAgent({
    name: "agent.bg",
    model,
    compaction: { contextWindow: 1_000, reserveTokens: 100, keepRecentTokens: 150, backgroundTokens: 600 },
  });
  const r = await openRatchet([agent.task]);
  const c = new Conversations(r, { run: agent });
  await c.create(id);
  const say = async (n: number) => {
    await c.submit(id, { text: `message ${n} ${"x".repeat(400)}` });
    for (let i = 0; i < 10 && (await c.get(id))!.runTaskId !== null; i++) await drain(r);
  };
  return { model, r, c, say };
}

forEachBackend(() => {
  describe("background compaction (spec §19.28)", () => {
    it("§19.28 past the soft threshold a compaction runs beside the conversation and is applied at the next turn's start", async () => {
      const { model, c, say } = await world("b1");
      for (let n = 0; n < 3; n++) await say(n);
      // The summary was made by the background task, and nothing was applied yet.
      expect(model.prompts.filter(isSummary)).toHaveLength(1);
      expect((await c.entries("b1")).some((e) => e.kind === "compaction")).toBe(false);
      expect((await c.state("b1"))[BACKGROUND_KEY]).toMatchObject({ taskId: expect.any(Number) });
      await say(3);
      const entries = await c.entries("b1", { limit: 1_000 });
      const comp = entries.find((e) => e.kind === "compaction")!;
      expect(comp.data).toMatchObject({ text: "SUMMARY 1", reason: "background" });
      expect(entries.find((e) => e.seq === (comp.data as { keptFrom: number }).keptFrom)!.kind).toBe("user");
      // The request after it carries the summary, not the oldest message; no inline compaction ran.
      const last = model.prompts.filter((p) => !isSummary(p)).at(-1)!;
      expect(texts(last)).toContain("SUMMARY 1");
      expect(texts(last)).not.toContain("message 0 ");
      expect(texts(last)).toContain("message 3 ");
      expect(model.prompts.filter(isSummary)).toHaveLength(1);
      expect((await c.state("b1"))[BACKGROUND_KEY]).toBeUndefined();
    });

    for (const moved of ["reset", "compaction"] as const)
      it(`§19.28 §19.20 a background summary made stale by a ${moved} is discarded, not applied`, async () => {
        const { model, c, r, say } = await world(`s-${moved}`);
        const id = `s-${moved}`;
        for (let n = 0; n < 3; n++) await say(n);
        expect((await c.state(id))[BACKGROUND_KEY]).toBeDefined();
        // The context's head moves after the summary was made.
        if (moved === "reset") await reset(c, id, { note: "start over" });
        else await c.submit(id, { type: "compact" });
        for (let i = 0; i < 10 && (await c.get(id))!.runTaskId !== null; i++) await drain(r);
        const headBefore = (await c.context(id))[0]!;
        await say(3);
        const entries = await c.entries(id, { limit: 1_000 });
        expect(
          entries.filter(
            (e) => e.kind === "compaction" && (e.data as { reason: string }).reason === "background",
          ),
        ).toEqual([]);
        expect((await c.context(id))[0]!.seq).toBe(headBefore.seq);
        expect((await c.state(id))[BACKGROUND_KEY]).toBeUndefined();
        expect(texts(model.prompts.filter((p) => !isSummary(p)).at(-1)!)).not.toContain("SUMMARY 1");
      });
  });
});
