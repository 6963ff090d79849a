/**
 * spec §19.31 on SQLite and PostgreSQL, with real workers: a run's tenant seat bounds how many
 * runs of one tenant's conversations execute at once, leaves other tenants alone, and a successor
 * run still starts only after the run that created it.
 */
import { describe, expect, it } from "vitest";
import { defineAgent } from "../../src/agent/agent.js";
import { Conversations, defineRun, RUN_TENANT_GROUP } from "../../src/agent/index.js";
import { fauxModel } from "../../src/models/index.js";
import { forEachBackend, openRatchet, until } from "../engine/helpers.js";

/** A run that holds its worker until the test releases it, recording how many of its tenant run at once. */
function gatedRun(limit: number) {
  const release = new Map<number, () => void>();
  const running = new Map<string, Set<number>>();
  const peak = new Map<string, number>();
  const afterAnswer = new Map<number, Promise<void>>();
  const tenantOf = (id: string) => id.split("/")[0]!;
  const run = defineRun({
    name: "agent.tenanted",
    maxMs: 60_000,
    retry: { maxAttempts: 1 },
    tenant: { key: tenantOf, limit },
    async run(rc, ctx) {
      const t = tenantOf(rc.conversationId);
      const set = running.get(t) ?? new Set<number>();
      running.set(t, set);
      set.add(ctx.taskId);
      peak.set(t, Math.max(peak.get(t) ?? 0, set.size));
      await new Promise<void>((res) => release.set(ctx.taskId, res));
      const inputs = await rc.inputs();
      await rc.answer({ kind: "assistant", data: { text: (inputs[0]!.input as { text: string }).text } });
      // A test may hold the run after its final boundary, while its successor exists.
      await afterAnswer.get(ctx.taskId);
      set.delete(ctx.taskId);
    },
  });
  return { run, release, running, peak, afterAnswer, tenantOf };
}

forEachBackend(() => {
  describe("per-tenant seats on runs (spec §19.31)", () => {
    it("§19.31 at most `limit` runs of one tenant execute at once, across conversations; another tenant is not held back", async () => {
      const g = gatedRun(2);
      const r = await openRatchet([g.run.task]);
      const c = new Conversations(r, { run: g.run });
      const big = ["a/1", "a/2", "a/3", "a/4", "a/5"];
      const small = ["b/1", "b/2"];
      for (const id of [...big, ...small]) await c.create(id);
      const subs = [];
      for (const id of [...big, ...small]) subs.push(await c.submit(id, { text: id }));
      await r.start({ concurrency: 10 });
      // Tenant a: two run, three park on the seat (the claim refused them); tenant b runs both.
      await until(() => g.running.get("a")?.size === 2 && g.running.get("b")?.size === 2, "2 + 2 runs");
      const runIds = await Promise.all(big.map(async (id) => (await c.get(id))!.runTaskId!));
      await until(async () => {
        const why = await Promise.all(runIds.map((id) => r.explain(id)));
        return why.filter((w) => w.reason.kind === "seat").length === 3;
      }, "three of tenant a's runs to park on the seat");
      const parked = await r.explain(runIds.find((id) => !g.running.get("a")!.has(id))!);
      expect(parked.reason).toMatchObject({ kind: "seat", seat: `${RUN_TENANT_GROUP}:a`, limit: 2 });
      // Release one at a time: each frees a place for the next of its tenant.
      for (let done = 0; done < big.length + small.length; done++) {
        const id = await until(() => [...g.release.keys()][0], "a run to release");
        const go = g.release.get(id)!;
        g.release.delete(id);
        go();
      }
      for (const s of subs) expect((await s.wait({ timeoutMs: 20_000 })).status).toBe("done");
      expect(g.peak.get("a")).toBe(2);
      expect(g.peak.get("b")).toBe(2);
    });

    it("§19.31 a successor run created by a final boundary starts only after its predecessor ended, though its tenant has room", async () => {
      const g = gatedRun(3);
      const r = await openRatchet([g.run.task]);
      const c = new Conversations(r, { run: g.run });
      await c.create("t/1");
      const first = await c.submit("t/1", { text: "one" });
      await r.start({ concurrency: 4 });
      const pred = await until(() => [...g.release.keys()][0], "the first run");
      let holdPred!: () => void;
      g.afterAnswer.set(pred, new Promise<void>((res) => (holdPred = res)));
      const second = await c.submit("t/1", { text: "two" });
      expect(second.record.status).toBe("queued");
      g.release.get(pred)!();
      g.release.delete(pred);
      // The final boundary created the successor; the predecessor is still running after it.
      const succ = await until(async () => {
        const id = (await c.get("t/1"))!.runTaskId;
        return id !== null && id !== pred ? id : null;
      }, "the successor run");
      expect((await first.wait()).status).toBe("done");
      expect((await r.get(succ))!.input).toEqual({ conversationId: "t/1", after: pred });
      const waiting = await until(async () => {
        const e = await r.explain(succ);
        return e.reason.kind === "tasks" ? e : null;
      }, "the successor to wait for its predecessor");
      expect(waiting.reason).toEqual({ kind: "tasks", ids: [pred], policy: "allSettled" });
      expect(g.running.get("t")!.has(succ)).toBe(false);
      holdPred();
      const next = await until(() => (g.release.has(succ) ? succ : null), "the successor to run");
      expect((await r.get(pred))!.status).toBe("terminal");
      g.release.get(next)!();
      expect((await second.wait({ timeoutMs: 20_000 })).status).toBe("done");
      expect(g.peak.get("t")).toBe(1);
    });

    it("§19.31 a bad tenant seat is RATCHET_CONFIG at definition; defineAgent passes it to its run", async () => {
      const bad = (tenant: unknown) => () =>
        defineRun({ name: "agent.bad", tenant: tenant as never, run: () => null });
      expect(bad({ key: "x", limit: 1 })).toThrow(/key function/);
      expect(bad({ key: () => "t", limit: 0 })).toThrow(/limit/);
      expect(bad({ key: () => "t", limit: 1, group: "ratchet.conversation" })).toThrow(/group/);
      const agent = defineAgent({
        name: "agent.tenant-agent",
        model: fauxModel({ scripts: [] }),
        tenant: { key: (id) => id.slice(0, 1), limit: 3 },
      });
      expect(agent.task.gates?.seat).toMatchObject({ group: RUN_TENANT_GROUP, limit: 3 });
    });
  });
});
