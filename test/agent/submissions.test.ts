/**
 * spec §17.5–§17.8 on SQLite and PostgreSQL: submissions, the inbox, runs and abort, driven by
 * ticks (no worker in the background), so every interleaving here is chosen by the test.
 */
import { describe, expect, it } from "vitest";
import type { Conversations } from "../../src/agent/index.js";
import type { Ratchet } from "../../src/engine/ratchet.js";
import { drain, expectCode, forEachBackend, openRatchet, until } from "../engine/helpers.js";
import { makeRun, openConversations } from "./fixtures.js";

async function setup(opts: { steeringMode?: "one" | "all"; followUpMode?: "one" | "all" } = {}) {
  const run = makeRun();
  const r = await openRatchet([run.task]);
  const c = openConversations(r, run, opts);
  await c.create("c1", { title: "first" });
  return { r, c };
}

/** Entries as [kind, data] pairs, for compact comparisons. */
async function transcript(c: Conversations, id: string) {
  return (await c.entries(id)).map((e) => [e.kind, e.data]);
}

/** Runs ticks until the conversation's run is parked on its signal, and returns that run. */
async function parkedRun(r: Ratchet, c: Conversations, id: string): Promise<number> {
  await drain(r);
  const run = (await c.get(id))!.runTaskId!;
  await until(async () => (await r.get(run))?.status === "waiting", "the run parked");
  return run;
}

forEachBackend(() => {
  describe("submissions", () => {
    it("§17.5 an idle conversation places the input and starts a run; wait() gives the answer", async () => {
      const { r, c } = await setup();
      const s = await c.submit("c1", { text: "hi" });
      expect(s.record.status).toBe("placed");
      expect(s.record.entrySeq).toBe(0);
      await drain(r);
      const settled = await s.wait({ timeoutMs: 10_000 });
      expect(settled).toMatchObject({ status: "done", answerSeq: 3 });
      expect(await transcript(c, "c1")).toEqual([
        ["user", { text: "hi" }],
        ["tool-call", { for: "hi" }],
        ["tool-result", { n: 0 }],
        ["assistant", { answered: ["hi"] }],
      ]);
      expect((await c.get("c1"))!.runTaskId).toBeNull();
    });

    it("§17.5 a repeated requestId returns the first submission and writes nothing", async () => {
      const { r, c } = await setup();
      const a = await c.submit("c1", { text: "once" }, { requestId: "req-1" });
      const b = await c.submit("c1", { text: "twice?" }, { requestId: "req-1" });
      expect(b.id).toBe(a.id);
      expect(b.created).toBe(false);
      expect(await c.entries("c1")).toHaveLength(1);
      await drain(r);
      expect((await b.wait()).status).toBe("done");
      expect(await r.list({ limit: 100 })).toHaveLength(1);
    });

    it("§17.6 a steer joins the running run at its next turn boundary, after its tool round", async () => {
      const { r, c } = await setup();
      const a = await c.submit("c1", { text: "A", park: true });
      const run = await parkedRun(r, c, "c1");
      const s = await c.submit("c1", { text: "S" }, { whenBusy: "steer" });
      expect(s.record.status).toBe("queued");
      await r.signal(`go:${run}`);
      await drain(r);
      const [ra, rs] = [await a.wait(), await s.wait()];
      expect(ra).toMatchObject({ status: "done", answerSeq: 4 });
      expect(rs).toMatchObject({ status: "done", answerSeq: 4 });
      expect(await transcript(c, "c1")).toEqual([
        ["user", { text: "A", park: true }],
        ["tool-call", { for: "A" }],
        ["user", { text: "S" }],
        ["tool-result", { n: 1 }],
        ["assistant", { answered: ["A", "S"] }],
      ]);
    });

    it("§17.6 follow-ups wait for the run's answer and start new runs, one at a time, in order", async () => {
      const { r, c } = await setup();
      const a = await c.submit("c1", { text: "A", park: true });
      const run = await parkedRun(r, c, "c1");
      const f1 = await c.submit("c1", { text: "F1" });
      const f2 = await c.submit("c1", { text: "F2" });
      expect((await c.inbox("c1")).map((s) => s.id)).toEqual([f1.id, f2.id]);
      await r.signal(`go:${run}`);
      await drain(r);
      for (const s of [a, f1, f2]) expect((await s.wait()).status).toBe("done");
      const answers = (await c.entries("c1")).filter((e) => e.kind === "assistant").map((e) => e.data);
      expect(answers).toEqual([{ answered: ["A"] }, { answered: ["F1"] }, { answered: ["F2"] }]);
      const runs = (await f2.wait()).submission.runTaskId;
      expect(runs).not.toBe((await f1.wait()).submission.runTaskId);
    });

    it("§17.6 followUpMode all places every queued follow-up in one run", async () => {
      const { r, c } = await setup({ followUpMode: "all" });
      await c.submit("c1", { text: "A", park: true });
      const run = await parkedRun(r, c, "c1");
      const f1 = await c.submit("c1", { text: "F1" });
      const f2 = await c.submit("c1", { text: "F2" });
      await r.signal(`go:${run}`);
      await drain(r);
      const [s1, s2] = [await f1.wait(), await f2.wait()];
      expect(s1.submission.runTaskId).toBe(s2.submission.runTaskId);
      const answers = (await c.entries("c1")).filter((e) => e.kind === "assistant").map((e) => e.data);
      expect(answers).toEqual([{ answered: ["A"] }, { answered: ["F1", "F2"] }]);
    });

    it("§17.5 reject on a busy conversation throws ConversationBusy and writes nothing", async () => {
      const { r, c } = await setup();
      await c.submit("c1", { text: "A", park: true });
      await parkedRun(r, c, "c1");
      const before = [await c.entries("c1"), await c.inbox("c1"), await c.get("c1")];
      await expectCode(
        () => c.submit("c1", { text: "no" }, { whenBusy: "reject", requestId: "r1" }),
        "RATCHET_CONVERSATION_BUSY",
      );
      expect([await c.entries("c1"), await c.inbox("c1"), await c.get("c1")]).toEqual(before);
      // The requestId was not taken by the refused submission.
      const later = await c.submit("c1", { text: "yes" }, { requestId: "r1" });
      expect(later.created).toBe(true);
    });

    it("§17.8 abort withdraws queued inputs, aborts the run's tree and keeps the entries written", async () => {
      const { r, c } = await setup();
      const a = await c.submit("c1", { text: "A", park: true });
      const run = await parkedRun(r, c, "c1");
      const f = await c.submit("c1", { text: "F" });
      const aborting = c.abort("c1", { timeoutMs: 20_000 });
      await until(async () => (await r.get(run))?.abortRequested, "the run marked");
      await drain(r);
      expect(await aborting).toMatchObject({ withdrawn: 1, marked: 1 });
      expect(await f.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
      expect(await a.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
      expect((await r.get(run))!.outcome).toBe("aborted");
      expect(await transcript(c, "c1")).toEqual([
        ["user", { text: "A", park: true }],
        ["tool-call", { for: "A" }],
      ]);
      expect((await c.get("c1"))!.runTaskId).toBeNull();
      expect(await c.inbox("c1")).toEqual([]);
    });

    it("§17.8 queued items survive a failed run; the next submission places them first", async () => {
      const { r, c } = await setup();
      const a = await c.submit("c1", { text: "A", fail: true });
      const f = await c.submit("c1", { text: "F" });
      await drain(r);
      expect(await a.wait()).toMatchObject({ status: "unanswered", reason: "run_failed" });
      expect((await c.inbox("c1")).map((s) => s.id)).toEqual([f.id]);
      const g = await c.submit("c1", { text: "G" });
      expect(g.record.status).toBe("queued");
      await drain(r);
      expect((await f.wait()).status).toBe("done");
      expect((await g.wait()).status).toBe("done");
      const answers = (await c.entries("c1")).filter((e) => e.kind === "assistant").map((e) => e.data);
      expect(answers).toEqual([{ answered: ["F"] }, { answered: ["G"] }]);
    });

    it("§17.1 a conversation id of the longest length can be submitted to, aborted and awaited", async () => {
      const { r, c } = await setup();
      const id = "x".repeat(180);
      await c.create(id);
      const s = await c.submit(id, { text: "A", park: true });
      await drain(r);
      const aborting = c.abort(id, { timeoutMs: 20_000 });
      await drain(r);
      expect((await aborting).marked).toBe(1);
      expect(await s.wait()).toMatchObject({ status: "unanswered", reason: "aborted" });
      await expectCode(() => c.create(`${id}y`), "RATCHET_INVALID_INPUT");
    });

    it("§17.10 hostile ids and payloads are refused before any write", async () => {
      const { c } = await setup();
      for (const id of ["", " padded", "a\nb", "x".repeat(201), "nul\u0000"])
        await expectCode(() => c.submit(id, { text: "x" }), "RATCHET_INVALID_INPUT");
      await expectCode(() => c.submit("c1", { text: "x" }, { requestId: "bad id" }), "RATCHET_INVALID_INPUT");
      await expectCode(
        () => c.submit("c1", { text: "x" }, { whenBusy: "later" as never }),
        "RATCHET_INVALID_INPUT",
      );
      await expectCode(() => c.submit("c1", "x".repeat(1024 * 1024 + 1)), "RATCHET_PAYLOAD_TOO_LARGE");
      await expectCode(() => c.submit("missing", { text: "x" }), "RATCHET_NOT_FOUND");
      expect(await c.entries("c1")).toEqual([]);
      expect(await c.inbox("c1")).toEqual([]);
      expect((await c.get("c1"))!.runTaskId).toBeNull();
    });
  });
});
