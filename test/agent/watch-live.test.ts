/** watchConversation: entries and the running run's live stream output together (spec §17.11, §16.5). */
import { describe, expect, it } from "vitest";
import { Conversations, defineRun } from "../../src/agent/index.js";
import { type WatchEvent, watchConversation } from "../../src/agent/watch-live.js";
import { deferred, forEachBackend, onCleanup, openRatchet } from "../engine/helpers.js";

forEachBackend(() => {
  describe("watch with live streams (spec §17.11, §16.5)", () => {
    it("§16.5 §17.11 a watcher sees the run's stream chunks as they commit, its entries, and ends when the conversation is idle", async () => {
      const second = deferred();
      const firstSeen = deferred();
      const run = defineRun({
        name: "agent.streamer",
        async run(rc, ctx) {
          await rc.inputs();
          const out = await ctx.stream("answer");
          out.write("Hel");
          out.write("lo");
          await out.flush();
          await second.promise; // the watcher saw the first chunks live, before the answer exists
          out.write(", world");
          await out.close();
          await rc.answer({ kind: "assistant", data: { text: "Hello, world" } });
        },
      });
      const r = await openRatchet([run.task], { streamIntervalMs: 10 });
      const c = new Conversations(r, { run });
      await c.create("w1");
      await c.submit("w1", { text: "greet me" });
      await r.start({ concurrency: 2 });
      onCleanup(() => r.stop());
      const events: WatchEvent[] = [];
      for await (const e of watchConversation(r, "w1", { pollMs: 20, timeoutMs: 20_000 })) {
        events.push(e);
        if (e.kind === "chunk" && e.data === "lo") {
          expect(events.some((x) => x.kind === "entry" && x.entry.kind === "assistant")).toBe(false);
          firstSeen.resolve();
          second.resolve();
        }
      }
      await firstSeen.promise;
      const chunks = events.filter((e) => e.kind === "chunk");
      expect(chunks.map((e) => (e.kind === "chunk" ? [e.offset, e.data, e.stream] : null))).toEqual([
        [0, "Hel", "answer"],
        [1, "lo", "answer"],
        [2, ", world", "answer"],
      ]);
      const entries = events.flatMap((e) => (e.kind === "entry" ? [[e.entry.kind, e.entry.data]] : []));
      expect(entries).toEqual([
        ["user", { text: "greet me" }],
        ["assistant", { text: "Hello, world" }],
      ]);
    });
  });
});
