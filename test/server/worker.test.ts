/** The HTTP server inside a worker process: `start({ serve })` (issue 8). */
import { describe, expect, it } from "vitest";
import { forEachBackend, openRatchet, until } from "../engine/helpers.js";
import { greet, TASKS, TOKEN } from "./kit.js";

forEachBackend(() => {
  describe("HTTP API: served by a worker", () => {
    it("HTTP API: start({ serve }) serves the API beside the worker, which runs what it enqueues; stop() closes both", async () => {
      const r = await openRatchet(TASKS);
      await r.start({ concurrency: 2, serve: { port: 0, token: TOKEN } });
      const url = r.serving();
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const auth = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };
      expect((await fetch(`${url}/api/stats`)).status).toBe(401);
      const res = await fetch(`${url}/api/tasks`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ task: greet.name, input: { name: "ada" } }),
      });
      expect(res.status).toBe(201);
      const { id } = (await res.json()) as { id: number };
      const done = await until(async () => {
        const t = (await (await fetch(`${url}/api/tasks/${id}`, { headers: auth })).json()) as {
          task: { status: string; result: unknown };
        };
        return t.task.status === "terminal" ? t.task : null;
      });
      expect(done.result).toEqual({ hi: "ada" });
      // /metrics of a serving worker counts its own claims and ends exactly.
      const metrics = await (await fetch(`${url}/metrics`, { headers: auth })).text();
      expect(metrics).toMatch(/^ratchet_worker_claims_total 1$/m);
      expect(metrics).toMatch(/^ratchet_worker_invocations_total\{report="done"\} 1$/m);
      expect(r.workerCounters()).toEqual({ claims: 1, reclaims: 0, reports: { done: 1 } });
      await r.stop();
      expect(r.serving()).toBeUndefined();
      await expect(fetch(`${url}/api/stats`, { headers: auth })).rejects.toThrow();
    });

    it("HTTP API: start({ serve }) with a bad server option fails and leaves no worker running", async () => {
      const r = await openRatchet(TASKS);
      await expect(r.start({ serve: { host: "0.0.0.0", port: 0 } })).rejects.toMatchObject({
        code: "RATCHET_CONFIG",
      });
      expect(r.serving()).toBeUndefined();
      await r.start({ concurrency: 1 });
      await r.stop();
    });
  });
});
