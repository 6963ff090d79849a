/**
 * Dispatch store conformance, the outbox part (spec §21.2, §21.4, §21.16):
 * every state change of an attempt or an item writes its fact in the same
 * transaction, a stale move writes none, and the notices the runner derives
 * ride with the move that carries them out.
 */
import { decisionNotices } from "../../core/dispatch/facts.js";
import type { DispatchEnv } from "./store-contract.js";
import { HOLDER, started } from "./store-kit.js";

type Define = (title: string, fn: (env: DispatchEnv) => Promise<void>) => void;

async function factsOf(env: DispatchEnv) {
  return (await env.store.outbox.facts("0", 1_000)).map((f) => ({
    type: f.type,
    subject: f.subject,
    data: f.data,
  }));
}

export function registerDispatchOutboxCases(define: Define): void {
  define(
    "§21.4 adding an item, starting, moving and settling an attempt each write their facts with the change",
    async (env) => {
      const { ops, expect } = env;
      const { attempt: a, item } = await started(ops);
      const g = { id: a.id, version: a.version, holder: HOLDER };
      const m = await ops.moveAttempt(g, { state: "running", startedAt: 1 }, null);
      if (m.kind !== "moved") throw new Error("not moved");
      // A move that changes no state reports nothing.
      const marked = await ops.moveAttempt(
        { ...g, version: m.attempt.version },
        { suspendRequestedAt: 5 },
        null,
      );
      if (marked.kind !== "moved") throw new Error("not moved");
      const route = { step: "review", state: "open" as const, taken: {}, resumeNext: false, notBefore: null };
      const s = { state: "succeeded" as const, forced: null, sessionStopped: true, closeout: null };
      expect(
        (await ops.settleAttempt({ ...g, version: marked.attempt.version }, s, route, null, null)).kind,
      ).toBe("moved");
      const facts = await factsOf(env);
      expect(facts.map((f) => `${f.type} ${f.subject}`)).toEqual([
        `item.moved item:${item.id}`,
        `attempt.moved attempt:${a.id}`,
        `item.moved item:${item.id}`,
        `attempt.moved attempt:${a.id}`,
        `attempt.moved attempt:${a.id}`,
        `item.moved item:${item.id}`,
      ]);
      expect(facts.map((f) => (f.data as { from: unknown }).from)).toEqual([
        null,
        null,
        { step: "build", state: "open" },
        "starting",
        "running",
        { step: "build", state: "running" },
      ]);
      expect(facts[4]!.data).toMatchObject({ attempt: a.id, item: item.id, to: "succeeded", pipeline: "p" });
      expect(facts[5]!.data).toMatchObject({ to: { step: "review", state: "open" } });
    },
  );

  define("§21.2 a stale move or settlement writes no fact, not even the notices it carried", async (env) => {
    const { ops, expect } = env;
    const { attempt: a } = await started(ops);
    const before = (await factsOf(env)).length;
    const d = { action: { kind: "close", cause: "stalled" } as const, rule: "bound:stall" as const };
    const notices = decisionNotices(a, d);
    expect(notices.map((n) => n.type)).toEqual(["notice.stalled"]);
    const stale = { id: a.id, version: a.version + 7, holder: HOLDER };
    expect(await ops.moveAttempt(stale, { state: "closing", closing: "stalled" }, null, notices)).toEqual({
      kind: "stale",
    });
    const s = { state: "failed" as const, forced: "stalled" as const, sessionStopped: true, closeout: null };
    expect(await ops.settleAttempt(stale, s, null, null, null, notices)).toEqual({ kind: "stale" });
    expect((await factsOf(env)).length).toBe(before);
    const g = { id: a.id, version: a.version, holder: HOLDER };
    expect(
      (await ops.moveAttempt(g, { state: "closing", closing: "stalled", closingAt: 1 }, null, notices)).kind,
    ).toBe("moved");
    const after = (await factsOf(env)).slice(before);
    expect(after.map((f) => f.type)).toEqual(["attempt.moved", "notice.stalled"]);
    expect(after[1]!.data).toMatchObject({ attempt: a.id, rule: "bound:stall" });
  });

  define("§21.4 closing an item, a close-out and a wake write their moves", async (env) => {
    const { ops, expect } = env;
    const { attempt: a, item } = await started(ops);
    const other = await started(ops);
    const before = (await factsOf(env)).length;
    const g = { id: a.id, version: a.version, holder: HOLDER };
    const slept = await ops.moveAttempt(g, { state: "sleeping" }, null);
    if (slept.kind !== "moved") throw new Error("not moved");
    const w = await ops.wakeAttempt({ ...g, version: slept.attempt.version }, null, false);
    expect(w.kind).toBe("woken");
    await ops.closeItem(item.id);
    await ops.recordCloseout(other.attempt.id, JSON.stringify({ outcome: "succeeded" }));
    const after = (await factsOf(env)).slice(before).map((f) => [f.type, (f.data as { from: unknown }).from]);
    expect(after).toEqual([
      ["attempt.moved", "starting"],
      ["attempt.moved", "sleeping"],
      ["item.moved", { step: "build", state: "running" }],
      ["attempt.moved", "waking"],
      ["attempt.moved", "starting"],
    ]);
    // An item that is already closed closes nothing and reports nothing.
    expect(await ops.closeItem(item.id)).toBeNull();
    expect((await factsOf(env)).length).toBe(before + after.length);
  });
}
