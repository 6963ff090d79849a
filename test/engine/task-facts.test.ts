/** spec §21.17: a task's opt-in outcome facts, written with its settlement, on SQLite and PostgreSQL. */
import { describe, expect, it } from "vitest";
import { defineTask, NonRetryableError } from "../../src/index.js";
import { drain, expectCode, FakeClock, forEachBackend, openRatchet } from "./helpers.js";

forEachBackend(() => {
  describe("task facts (spec §21.17)", () => {
    it("§21.17 an opted-in outcome writes task.<outcome> with its settlement; other outcomes, retries and tasks that did not opt in write none", async () => {
      let tries = 0;
      const reported = defineTask({
        name: "reported",
        facts: ["completed", "failed"],
        run: (_c, n: number) => n,
      });
      const failing = defineTask({
        name: "failing",
        facts: ["failed"],
        retry: { maxAttempts: 2, baseMs: 0, floorMs: 0 },
        run() {
          tries++;
          throw new Error("nope");
        },
      });
      const onlyFailed = defineTask({ name: "only-failed", facts: ["failed"], run: () => 1 });
      const plain = defineTask({ name: "plain", run: () => 1 });
      const aborting = defineTask({
        name: "aborting",
        facts: ["aborted"],
        run: () => {
          throw new NonRetryableError("x");
        },
      });
      const clock = new FakeClock();
      const r = await openRatchet([reported, failing, onlyFailed, plain, aborting], { clock });
      const a = await r.enqueue(reported, 1);
      const b = await r.enqueue(failing, null);
      await r.enqueue(onlyFailed, null);
      await r.enqueue(plain, null);
      const e = await r.enqueue(aborting, null);
      await drain(r);
      expect(tries).toBe(2);
      const facts = await r.store.outbox.facts("0", 100);
      expect(facts.map((f) => [f.type, f.subject]).sort()).toEqual(
        [
          ["task.completed", `task:${a}`],
          ["task.failed", `task:${b}`],
        ].sort(),
      );
      expect(facts.find((f) => f.type === "task.completed")!.data).toEqual({
        task: a,
        name: "reported",
        queue: "default",
        outcome: "completed",
      });
      expect((await r.get(e))!.outcome).toBe("failed"); // it opted into "aborted" only
    });

    it("§21.17 a drain of many opted-in tasks writes one fact per task, with dependents and plain tasks in the same batches", async () => {
      const reported = defineTask({ name: "many", facts: ["completed"], run: (_c, n: number) => n });
      const plain = defineTask({ name: "plain-many", run: (_c, n: number) => n });
      const r = await openRatchet([reported, plain], { clock: new FakeClock() });
      const ids = await r.enqueueMany(
        Array.from({ length: 300 }, (_, i) => ({ task: i % 3 === 0 ? plain : reported, input: i })),
      );
      // Tasks that others need: their completions release dependents in the same transaction.
      const after = await r.enqueueMany(
        ids.slice(0, 20).map((id, i) => ({ task: reported, input: 1_000 + i, needs: [id] })),
      );
      await r.start({ concurrency: 16 });
      for (const id of [...ids, ...after]) await r.waitFor(id, { timeoutMs: 60_000 });
      await r.stop();
      const facts = await r.store.outbox.facts("0", 1_000);
      const subjects = facts.map((f) => f.subject);
      const expected = [...ids.filter((_, i) => i % 3 !== 0), ...after].map((id) => `task:${id}`);
      expect(new Set(subjects).size).toBe(subjects.length);
      expect([...subjects].sort()).toEqual([...expected].sort());
      expect(facts.every((f) => f.type === "task.completed")).toBe(true);
    });

    it("§21.17 an unknown outcome in facts is RATCHET_CONFIG at definition", async () => {
      await expectCode(
        () => defineTask({ name: "bad", facts: ["done" as "completed"], run: () => 1 }),
        "RATCHET_CONFIG",
      );
    });
  });
});
