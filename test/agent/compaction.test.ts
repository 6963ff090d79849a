/** Context compaction in the agent loop (spec §19.18–§19.20), over a faux model, both stores. */
import { describe, expect, it } from "vitest";
import { defineAgent } from "../../src/agent/agent.js";
import { splitPoint } from "../../src/agent/compaction.js";
import { Conversations } from "../../src/agent/index.js";
import { type FauxScript, fauxModel } from "../../src/models/faux.js";
import type { ModelPrompt } from "../../src/models/stream.js";
import type { EntryRecord } from "../../src/store/conversations/types.js";
import { drain, forEachBackend, openRatchet } from "../engine/helpers.js";

const isSummary = (p: ModelPrompt) => p[0]?.role === "system" && String(p[0].content).startsWith("Summarize");
const texts = (p: ModelPrompt) => JSON.stringify(p);

async function settle(r: Awaited<ReturnType<typeof openRatchet>>, c: Conversations, id: string) {
  for (let i = 0; i < 20 && (await c.get(id))!.runTaskId !== null; i++) await drain(r);
}

function setup(script: (n: number, p: ModelPrompt) => FauxScript, compaction = {}) {
  const model = fauxModel({ scripts: (n, call) => script(n, call.prompt) });
  const agent = defineAgent({ name: "agent.compact", model, compaction });
  return { model, agent };
}

forEachBackend(() => {
  describe("compaction (spec §19.18–§19.20)", () => {
    it("§19.18 §19.19 near the window the older entries are summarised and recent ones kept verbatim; the next prompts carry the summary", async () => {
      const { model, agent } = setup(
        (_n, p) => (isSummary(p) ? { text: "SUMMARY of the early talk" } : { text: "noted. ".repeat(5) }),
        // backgroundTokens 0: the inline path alone (spec §19.28 has its own tests).
        { contextWindow: 400, reserveTokens: 100, keepRecentTokens: 60, backgroundTokens: 0 },
      );
      const r = await openRatchet([agent.task]);
      const c = new Conversations(r, { run: agent });
      await c.create("k1");
      for (let i = 0; i < 8; i++) {
        await c.submit("k1", { text: `message number ${i} ${"x".repeat(80)}` });
        await settle(r, c, "k1");
      }
      const entries = await c.entries("k1", { limit: 1_000 });
      const comps = entries.filter((e) => e.kind === "compaction");
      expect(comps.length).toBeGreaterThan(0);
      const first = comps[0]!.data as { text: string; keptFrom: number; summarized: [number, number] };
      expect(first.text).toBe("SUMMARY of the early talk");
      expect(entries.find((e) => e.seq === first.keptFrom)!.kind).toBe("user");
      expect(first.summarized[1]).toBe(first.keptFrom - 1);
      // The last request: the summary, then only recent messages, never the first one.
      const last = model.prompts[model.prompts.length - 1]!;
      expect(isSummary(last)).toBe(false);
      expect(texts(last)).toContain("[summary of the conversation so far]");
      expect(texts(last)).not.toContain("message number 0 ");
      expect(texts(last)).toContain("message number 7 ");
      expect(entries.filter((e) => e.kind === "assistant")).toHaveLength(8);
    });

    it("§19.18 a context-overflow error compacts and retries the turn once", async () => {
      let overflowed = 0;
      const { model, agent } = setup((_n, p) => {
        if (isSummary(p)) return { text: "SHORT SUMMARY" };
        if (!texts(p).includes("SHORT SUMMARY") && overflowed++ === 0)
          return { error: { status: 400, message: "This model's maximum context length is 8192 tokens" } };
        return { text: "answered after compaction" };
      });
      const r = await openRatchet([agent.task]);
      const c = new Conversations(r, { run: agent });
      await c.create("o1");
      await c.commit("o1", {
        entries: [
          { kind: "user", data: { text: "old question" } },
          { kind: "assistant", data: { text: "old answer" } },
        ],
      });
      const s = await c.submit("o1", { text: "new question" });
      await settle(r, c, "o1");
      expect((await s.wait({ timeoutMs: 10_000 })).status).toBe("done");
      const kinds = (await c.entries("o1")).map((e) => e.kind);
      expect(kinds).toEqual(["user", "assistant", "user", "compaction", "assistant"]);
      expect(model.calls).toBe(3); // the overflowing turn, the summary, the retry
    });

    it("§19.20 a summary whose context moved (a reset committed meanwhile) is discarded, not applied", async () => {
      let c!: Conversations;
      let reset: Promise<unknown> | undefined;
      const { agent } = setup(
        (_n, p) => {
          if (isSummary(p)) {
            reset ??= c.commit("s1", { entries: [{ kind: "reset", data: { text: "start over" } }] });
            return { text: "STALE SUMMARY", latencyMs: 300 };
          }
          return { text: "fine" };
        },
        { contextWindow: 60, reserveTokens: 10, keepRecentTokens: 5 },
      );
      const r = await openRatchet([agent.task]);
      c = new Conversations(r, { run: agent });
      await c.create("s1");
      await c.commit("s1", {
        entries: [
          { kind: "user", data: { text: "a long old question ".repeat(10) } },
          { kind: "assistant", data: { text: "a long old answer ".repeat(10) } },
        ],
      });
      await c.submit("s1", { text: "go on" });
      await settle(r, c, "s1");
      await reset;
      const entries = await c.entries("s1");
      expect(entries.some((e) => e.kind === "compaction")).toBe(false);
      expect(entries.some((e) => e.kind === "reset")).toBe(true);
      expect(entries.at(-1)!.kind).toBe("assistant");
    });

    it("§19.20 an input { type: 'compact' } compacts now and answers with a custom 'compacted' entry", async () => {
      const { model, agent } = setup((_n, p) => (isSummary(p) ? { text: "ASKED SUMMARY" } : { text: "hi" }), {
        keepRecentTokens: 1,
      });
      const r = await openRatchet([agent.task]);
      const c = new Conversations(r, { run: agent });
      await c.create("m1");
      for (const t of ["one", "two"]) {
        await c.submit("m1", { text: t });
        await settle(r, c, "m1");
      }
      await c.submit("m1", { type: "compact" });
      await settle(r, c, "m1");
      const last = (await c.entries("m1")).at(-1)!;
      expect([last.kind, last.name, (last.data as { applied: boolean }).applied]).toEqual([
        "custom",
        "compacted",
        true,
      ]);
      await c.submit("m1", { text: "three" });
      await settle(r, c, "m1");
      expect(texts(model.prompts.at(-1)!)).toContain("ASKED SUMMARY");
    });
  });
});

describe("the verbatim tail (spec §19.19)", () => {
  const e = (seq: number, kind: EntryRecord["kind"], n: number): EntryRecord => ({
    conversationId: "c",
    seq,
    kind,
    name: null,
    data: { text: "y".repeat(n * 4 - 11) },
    taskId: null,
    submissionId: null,
    createdAt: 0,
  });
  it("§19.19 the tail starts at a user entry, never between a call and its result", () => {
    const entries = [
      e(0, "user", 10),
      e(1, "assistant", 10),
      e(2, "tool-result", 10),
      e(3, "user", 10),
      e(4, "assistant", 10),
    ];
    expect(splitPoint(entries, 25)).toBe(3);
    expect(splitPoint(entries, 15)).toBe(5);
    expect(splitPoint(entries, 1_000)).toBe(0);
  });
});
