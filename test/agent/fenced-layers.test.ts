/**
 * The agent and model layers write through the engine's fenced operations only (spec §4.8, §4.2),
 * on SQLite and PostgreSQL: after another worker took a run's or a turn's task over, the old
 * holder's conversation writes and turn commits change nothing, and its invocation ends.
 */
import { describe, expect, it } from "vitest";
import { Conversations, defineRun } from "../../src/agent/index.js";
import { RUN_SEAT_GROUP } from "../../src/agent/run.js";
import type { TaskContext } from "../../src/engine/context.js";
import { defineTask, type Ratchet, type RatchetError } from "../../src/index.js";
import { fauxModel } from "../../src/models/faux.js";
import { generate } from "../../src/models/generate.js";
import { claimReq, FakeClock, forEachBackend, openRatchet } from "../engine/helpers.js";

async function steal(r: Ratchet, clock: FakeClock, name: string): Promise<void> {
  clock.advance(1_000 + 10_000);
  // A run holds its conversation's seat (spec §17.5): the thief claims with the same limit.
  const limits = { seats: { [RUN_SEAT_GROUP]: 1 }, rates: {} };
  const stolen = await r.store.claim(claimReq({ workerId: "thief", names: [name], limits }));
  expect(stolen).toHaveLength(1);
}

async function code(f: () => Promise<unknown>): Promise<string | undefined> {
  try {
    await f();
  } catch (e) {
    return (e as RatchetError).code;
  }
  return undefined;
}

forEachBackend(() => {
  describe("the layers' writes are fenced by the engine (spec §4.8)", () => {
    it("§4.8 / §17.6 a run whose claim another worker took commits nothing: its commit, boundary and answer are refused", async () => {
      const clock = new FakeClock();
      let r!: Ratchet;
      const codes: (string | undefined)[] = [];
      let aborted: boolean | undefined;
      const run = defineRun({
        name: "agent.stale",
        maxMs: 1_000,
        // Two attempts: a reclaim past the last one would fail the task rather than take it over.
        retry: { maxAttempts: 2 },
        async run(rc, ctx) {
          await rc.commit("before", { entries: [{ kind: "tool-call", data: "mine" }] });
          await steal(r, clock, "agent.stale");
          codes.push(await code(() => rc.commit("late", { entries: [{ kind: "tool-call", data: "late" }] })));
          aborted = ctx.signal.aborted;
          // The invocation has ended: the later writes are refused before they reach the store.
          codes.push(await code(() => rc.boundary("late")));
          codes.push(await code(() => rc.answer({ kind: "assistant", data: "late" })));
        },
      });
      r = await openRatchet([run.task], { clock });
      const c = new Conversations(r, { run });
      await c.create("c1");
      await c.submit("c1", "go");
      await r.tick({ budgetMs: 3_600_000, concurrency: 1 });
      expect(codes).toEqual(["RATCHET_LEASE_LOST", "RATCHET_LEASE_LOST", "RATCHET_LEASE_LOST"]);
      expect(aborted).toBe(true);
      expect((await c.entries("c1")).map((e) => e.data)).toEqual(["go", "mine"]);
    });

    it("§4.8 / §18.8 a turn whose task another worker took over commits neither its answer nor its usage", async () => {
      const clock = new FakeClock();
      let r!: Ratchet;
      const model = fauxModel({ scripts: [{ text: "hello", usage: { input: 3, output: 2 } }] });
      let got: string | undefined;
      const t = defineTask({
        name: "turn.stale",
        maxMs: 1_000,
        async run(ctx: TaskContext) {
          await steal(r, clock, "turn.stale");
          got = await code(() =>
            generate(ctx, {
              name: "answer",
              model,
              prompt: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
            }),
          );
          return null;
        },
      });
      r = await openRatchet([t], { clock });
      const id = await r.enqueue(t);
      await r.tick({ budgetMs: 3_600_000, concurrency: 1 });
      expect(got).toBe("RATCHET_LEASE_LOST");
      expect(await r.store.steps(id)).toEqual([]);
      expect(await r.store.usage.listUsage({ taskId: id })).toEqual([]);
    });
  });
});
