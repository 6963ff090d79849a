/**
 * Models over HTTP (spec §18.9):
 * - GET /api/usage?conversation=&task=&provider=&model=&since= — the usage ledger's totals and
 *   totals per provider and model (since: epoch ms);
 * - GET /api/providers — the circuit breakers per provider+model with their states.
 * Bounded reads: at most 1,000 breakers and 1,000 provider/model rows.
 */
import type { Hono } from "hono";
import type { Ratchet } from "../../engine/ratchet.js";
import type { UsageFilter } from "../../store/usage/ops.js";
import { onlyKeys, parseIntParam, parseTaskId } from "../params.js";

export function registerModelRoutes(app: Hono, ratchet: Ratchet): void {
  app.get("/api/usage", async (c) => {
    const q = c.req.query();
    onlyKeys(q, ["conversation", "task", "provider", "model", "since"], "query");
    const f: UsageFilter = {};
    if (q.conversation !== undefined) f.conversationId = q.conversation;
    if (q.task !== undefined) f.taskId = parseTaskId(q.task);
    if (q.provider !== undefined) f.provider = q.provider;
    if (q.model !== undefined) f.model = q.model;
    const since = parseIntParam(q.since, "since", 0, Number.MAX_SAFE_INTEGER);
    if (since !== undefined) f.since = since;
    const [totals, byModel] = await Promise.all([
      ratchet.store.usage.usageTotals(f),
      ratchet.store.usage.usageByModel(f),
    ]);
    return c.json({ totals, byModel });
  });

  app.get("/api/providers", async (c) => {
    onlyKeys(c.req.query(), [], "query");
    return c.json({ breakers: await ratchet.store.breakers.listBreakers() });
  });
}
