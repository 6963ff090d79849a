/** spec §17.11: the conversation routes of the HTTP API, on SQLite and PostgreSQL. */
import { describe, expect, it } from "vitest";
import { makeRun, openConversations } from "../agent/fixtures.js";
import { drain, forEachBackend, openRatchet } from "../engine/helpers.js";
import { startServer, TOKEN } from "./kit.js";
import { openSse } from "./sse.js";

async function setup() {
  const run = makeRun();
  const r = await openRatchet([run.task]);
  const c = openConversations(r, run);
  const s = await startServer(r, { token: TOKEN });
  return { r, c, s };
}

forEachBackend(() => {
  describe("HTTP conversations", () => {
    it("§17.11 POST a submission starts a run; a repeated requestId answers 200 with the first; entries and events follow", async () => {
      const { r, s } = await setup();
      const first = await s.call("/api/conversations/c1/submissions", {
        method: "POST",
        json: { input: { text: "hi" }, requestId: "q1" },
      });
      expect(first.status).toBe(201);
      const { submission } = (await first.json()) as { submission: { id: number; status: string } };
      expect(submission.status).toBe("placed");
      const again = await s.call("/api/conversations/c1/submissions", {
        method: "POST",
        json: { input: { text: "hi" }, requestId: "q1" },
      });
      expect(again.status).toBe(200);
      expect(((await again.json()) as { submission: { id: number } }).submission.id).toBe(submission.id);
      const events = await openSse(`${s.url}/api/conversations/c1/events`, {
        authorization: `Bearer ${TOKEN}`,
      });
      expect(events.status).toBe(200);
      expect(await events.next((e) => e.event === "entry")).toMatchObject({
        id: "0",
        data: { kind: "user" },
      });
      await drain(r);
      const kinds: string[] = [];
      for (;;) {
        const e = await events.next();
        if (e.event === "idle") break;
        kinds.push((e.data as { kind: string }).kind);
      }
      expect(kinds).toEqual(["tool-call", "tool-result", "assistant"]);
      await events.close();
      const got = await s.call(`/api/submissions/${submission.id}`);
      expect(((await got.json()) as { submission: { status: string } }).submission.status).toBe("done");
      const page = (await (await s.call("/api/conversations/c1/entries?from=2&limit=1")).json()) as {
        entries: { seq: number }[];
      };
      expect(page.entries.map((e) => e.seq)).toEqual([2]);
      const resumed = await openSse(`${s.url}/api/conversations/c1/events?follow=false`, {
        authorization: `Bearer ${TOKEN}`,
        "last-event-id": "2",
      });
      expect(await resumed.next()).toMatchObject({ event: "entry", id: "3" });
      expect((await resumed.next()).event).toBe("idle");
      await resumed.close();
      const list = (await (await s.call("/api/conversations")).json()) as { conversations: { id: string }[] };
      expect(list.conversations.map((x) => x.id)).toEqual(["c1"]);
    });

    it("§17.11 reject on a busy conversation is 409; abort answers once idle; hostile input is 400", async () => {
      const { r, c, s } = await setup();
      await c.create("c1");
      await c.submit("c1", { text: "A", park: true });
      await drain(r);
      const busy = await s.call("/api/conversations/c1/submissions", {
        method: "POST",
        json: { input: "x", whenBusy: "reject" },
      });
      expect(busy.status).toBe(409);
      expect(((await busy.json()) as { error: { code: string } }).error.code).toBe(
        "RATCHET_CONVERSATION_BUSY",
      );
      await s.call("/api/conversations/c1/submissions", { method: "POST", json: { input: "queued" } });
      const detail = (await (await s.call("/api/conversations/c1")).json()) as { inbox: unknown[] };
      expect(detail.inbox).toHaveLength(1);
      const aborting = s.call("/api/conversations/c1/abort", { method: "POST", json: {} });
      const res = await aborting;
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ withdrawn: 1, marked: 1 });
      const closed = await s.call("/api/conversations/c1/close", { method: "POST", json: {} });
      expect(await closed.json()).toEqual({ closed: true });
      const late = await s.call("/api/conversations/c1/submissions", {
        method: "POST",
        json: { input: "late" },
      });
      expect(late.status).toBe(409);
      for (const [path, init] of [
        ["/api/conversations/bad%20id", {}],
        ["/api/conversations/c1/submissions", { method: "POST", json: { text: "no input field" } }],
        ["/api/conversations/c1/submissions", { method: "POST", json: { input: 1, whenBusy: "later" } }],
        ["/api/conversations?limit=0", {}],
      ] as const) {
        const bad = await s.call(path, init as RequestInit & { json?: unknown });
        expect(bad.status, path).toBe(400);
      }
    });
  });
});
