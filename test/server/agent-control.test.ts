/** spec §19.29: POST /api/conversations/:id/reset and /handoff, on SQLite and PostgreSQL. */
import { describe, expect, it } from "vitest";
import { defineAgent } from "../../src/agent/agent.js";
import { Conversations } from "../../src/agent/index.js";
import { fauxModel } from "../../src/models/faux.js";
import { drain, forEachBackend, openRatchet } from "../engine/helpers.js";
import { startServer, TOKEN } from "./kit.js";

forEachBackend(() => {
  describe("HTTP reset and handoff", () => {
    it("§19.29 POST reset starts a fresh context (201, then 200 for its requestId); a handoff without a note is 400 and writes nothing", async () => {
      const agent = defineAgent({
        name: "http.agent",
        model: fauxModel({ scripts: () => ({ text: "ok" }) }),
      });
      const r = await openRatchet([agent.task]);
      const c = new Conversations(r, { run: agent });
      const s = await startServer(r, { token: TOKEN });
      expect((await s.call("/api/conversations/nope/reset", { method: "POST", json: {} })).status).toBe(404);
      await c.create("h1");
      await c.submit("h1", { text: "hi" });
      await drain(r);
      const first = await s.call("/api/conversations/h1/reset", {
        method: "POST",
        json: { note: "start over", requestId: "x1" },
      });
      expect(first.status).toBe(201);
      const again = await s.call("/api/conversations/h1/reset", {
        method: "POST",
        json: { requestId: "x1" },
      });
      expect(again.status).toBe(200);
      await drain(r);
      expect((await c.entries("h1")).at(-1)).toMatchObject({ kind: "reset", data: { text: "start over" } });
      const before = (await c.entries("h1")).length;
      const bad = await s.call("/api/conversations/h1/handoff", { method: "POST", json: { note: "" } });
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("RATCHET_INVALID_INPUT");
      expect(await c.inbox("h1")).toEqual([]);
      expect((await c.entries("h1")).length).toBe(before);
    });
  });
});
