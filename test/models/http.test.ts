/** GET /api/usage, GET /api/providers and the breaker gauge in /metrics (spec §18.9), on both backends. */
import { describe, expect, it } from "vitest";
import type { UsageRow } from "../../src/store/usage/ops.js";
import { forEachBackend, openRatchet } from "../engine/helpers.js";
import { errorOf, startServer, TASKS } from "../server/kit.js";

const CFG = { failures: 1, windowMs: 1000, coolDownMs: 60_000, probeMs: 1000 };

const row = (key: string, conversationId: string | null): UsageRow => ({
  key,
  status: "committed",
  conversationId,
  taskId: null,
  provider: "faux",
  model: "faux-1",
  route: "faux/faux-1",
  input: 3,
  output: 2,
  cached: 0,
  reasoning: 0,
  cost: 0.25,
});

forEachBackend(() => {
  describe("models over HTTP (spec §18.9)", () => {
    it("§18.9 /api/usage totals with filters; /api/providers and /metrics show breaker states", async () => {
      const r = await openRatchet(TASKS);
      const s = await startServer(r);
      await r.store.usage.recordUsage([row("a", "c1"), row("b", "c2")], null);
      await r.store.breakers.reportBreaker("openai/gpt-4o", false, false, CFG);
      const all = (await (await s.call("/api/usage")).json()) as {
        totals: { responses: number; cost: number };
      };
      expect(all.totals).toMatchObject({ responses: 2, cost: 0.5 });
      const one = (await (await s.call("/api/usage?conversation=c1")).json()) as {
        totals: { responses: number };
      };
      expect(one.totals.responses).toBe(1);
      const later = (await (await s.call(`/api/usage?since=${Date.now() + 3_600_000}`)).json()) as {
        totals: { responses: number };
      };
      expect(later.totals.responses).toBe(0);
      expect(await errorOf(await s.call("/api/usage?since=soon"))).toMatchObject({ status: 400 });
      expect(await errorOf(await s.call("/api/usage?nope=1"))).toMatchObject({ status: 400 });
      const p = (await (await s.call("/api/providers")).json()) as {
        breakers: { key: string; state: string }[];
      };
      expect(p.breakers).toMatchObject([{ key: "openai/gpt-4o", state: "open" }]);
      const metrics = await (await s.call("/metrics")).text();
      expect(metrics).toContain('ratchet_breaker_state{key="openai/gpt-4o"} 2');
    });
  });
});
