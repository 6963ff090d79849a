/**
 * Who may call, and what any caller may send: bearer tokens, loopback-only
 * without a token, Host checks, JSON-only writes, the body limit, and error
 * bodies that never carry driver text. HTTP-layer rules: SQLite is enough,
 * except for the driver-error test, which runs on both backends.
 */
import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { StoreError } from "../../src/errors.js";
import { createServer } from "../../src/server/server.js";
import { countTasks, forEachBackend, openRatchet } from "../engine/helpers.js";
import { errorOf, startServer, TASKS, TOKEN } from "./kit.js";

/** Sends raw bytes (fetch cannot send an absolute-form target) and returns the whole response. */
function rawRequest(host: string, port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port }, () => socket.end(bytes));
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (d) => {
      text += d;
    });
    socket.on("end", () => resolve(text));
    socket.on("error", reject);
  });
}

describe("auth", () => {
  it("HTTP API: with a token every /api/* and /metrics call needs `Authorization: Bearer <token>` (401 otherwise)", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r, { token: TOKEN });
    for (const path of ["/api/stats", "/api/tasks", "/metrics", "/api/stream"]) {
      for (const token of [null, "wrong-token-0123456789abcdef", `${TOKEN}x`, TOKEN.slice(0, -1)]) {
        const res = await s.call(path, { token });
        expect({ path, token, status: res.status }).toEqual({ path, token, status: 401 });
        expect((await errorOf(res)).code).toBe("RATCHET_UNAUTHORIZED");
      }
    }
    const basic = await s.call("/api/stats", { token: null, headers: { authorization: `Basic ${TOKEN}` } });
    expect(basic.status).toBe(401);
    expect((await s.call("/api/stats")).status).toBe(200);
    expect((await s.call("/metrics")).status).toBe(200);
    // Refused before the body is read: nothing written.
    const res = await s.call("/api/tasks", { token: null, json: { task: "greet", input: { name: "x" } } });
    expect(res.status).toBe(401);
    expect(await countTasks(r)).toBe(0);
    // The API description is public.
    expect((await s.call("/openapi.json", { token: null })).status).toBe(200);
  });

  it("HTTP API: with a token the server may listen beyond loopback; the token is still required", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r, { token: TOKEN, host: "0.0.0.0" });
    const port = new URL(s.url).port;
    expect((await fetch(`http://127.0.0.1:${port}/api/stats`)).status).toBe(401);
    expect(
      (await fetch(`http://127.0.0.1:${port}/api/stats`, { headers: { authorization: `Bearer ${TOKEN}` } }))
        .status,
    ).toBe(200);
  });

  it("HTTP API: without a token the server refuses to listen beyond loopback, and refuses short tokens", async () => {
    const r = await openRatchet(TASKS);
    for (const host of ["0.0.0.0", "::", "192.168.1.10", "example.com"])
      expect(() => createServer(r, { host, port: 0 })).toThrow(/without a token/);
    expect(() => createServer(r, { port: 0, token: "short" })).toThrow(/at least 16/);
    for (const port of [-1, 70_000, 1.5]) expect(() => createServer(r, { port })).toThrow(/port/);
    const warned: string[] = [];
    const logger = { info() {}, error() {}, warn: (m: string) => warned.push(m) };
    const s = await startServer(r, { host: "localhost", logger });
    expect(warned.join("\n")).toMatch(/unauthenticated, on loopback only/);
    expect((await s.call("/api/stats")).status).toBe(200);
  });

  it("HTTP API: without a token only loopback Host headers are answered (DNS rebinding)", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    for (const host of ["evil.example", "evil.example:80", "127.0.0.1.evil.example"]) {
      const res = await s.server.app.request("/api/stats", { headers: { host } });
      expect({ host, status: res.status }).toEqual({ host, status: 403 });
      expect((await errorOf(res)).code).toBe("RATCHET_FORBIDDEN_HOST");
    }
    for (const host of ["127.0.0.1:4680", "localhost", "[::1]:9"])
      expect((await s.server.app.request("/api/stats", { headers: { host } })).status).toBe(200);
  });

  it("HTTP API: without a token an absolute-form request's authority must be loopback too (RFC 9112 §3.2.2)", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const { hostname, port } = new URL(s.url);
    const cases: [string, number][] = [
      ["http://evil.example.com/api/stats", 403],
      ["http://evil.example.com:80/api/stats", 403],
      ["http://127.0.0.1.evil.example/", 403],
      ["https://[::2]/api/stats", 403],
      ["http://127.0.0.1/api/stats", 200],
      [`http://localhost:${port}/api/stats`, 200],
      ["/api/stats", 200],
    ];
    for (const [target, status] of cases) {
      const head = await rawRequest(
        hostname,
        Number(port),
        `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
      );
      expect({ target, head: head.split("\r\n")[0] }).toEqual({
        target,
        head: `HTTP/1.1 ${status} ${status === 200 ? "OK" : "Forbidden"}`,
      });
      if (status === 403) expect(head).toContain("RATCHET_FORBIDDEN_HOST");
    }
  });

  it("HTTP API: every route that changes something requires Content-Type: application/json (415, nothing written)", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r);
    const id = await r.enqueue("greet", { name: "x" }, { delayMs: 3_600_000 });
    const writes = s.server.app.routes.filter((rt) => rt.method !== "GET" && rt.method !== "ALL");
    expect(writes.length).toBeGreaterThanOrEqual(7);
    for (const rt of writes) {
      const path = rt.path.replace(":id", String(id)).replace(/:[a-z]+/g, "x");
      for (const type of [
        undefined,
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data",
      ]) {
        const res = await s.call(path, {
          method: rt.method,
          body: '{"task":"greet","input":{"name":"y"}}',
          headers: type ? { "content-type": type } : {},
        });
        expect({ path, type, status: res.status }).toEqual({ path, type, status: 415 });
      }
    }
    expect(await countTasks(r)).toBe(1);
    expect((await r.get(id))?.status).toBe("waiting");
  });

  it("HTTP API: request bodies are bounded (413 beyond maxBodyBytes, with or without Content-Length)", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r, { maxBodyBytes: 4096 });
    const big = JSON.stringify({ task: "greet", input: { name: "x".repeat(5000) } });
    const res = await s.call("/api/tasks", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: big,
    });
    expect(await errorOf(res)).toMatchObject({ status: 413, code: "RATCHET_PAYLOAD_TOO_LARGE" });
    const chunks = new ReadableStream({
      start(c) {
        for (let i = 0; i < 5; i++) c.enqueue(new TextEncoder().encode(big.slice(i * 1100, (i + 1) * 1100)));
        c.close();
      },
    });
    const streamed = await s.call("/api/tasks", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: chunks,
      duplex: "half",
    } as RequestInit);
    expect(streamed.status).toBe(413);
    expect(await countTasks(r)).toBe(0);
    const small = await s.call("/api/tasks", { json: { task: "greet", input: { name: "x" } } });
    expect(small.status).toBe(201);
  });
});

forEachBackend(() => {
  it("HTTP API: a storage failure is a 503 RATCHET_STORE without the driver's text; anything else a 500 RATCHET_INTERNAL", async () => {
    const r = await openRatchet(TASKS);
    const logged: unknown[] = [];
    const logger = { info() {}, warn() {}, error: (_m: string, e: unknown) => logged.push(e) };
    const s = await startServer(r, { logger });
    const original = r.store.stats.bind(r.store);
    const secret = "relation ratchet_tasks at postgres://admin:hunter2@db/prod";
    (r.store as { stats: unknown }).stats = async () => {
      throw new StoreError(`cannot read: ${secret}`, { cause: new Error(secret) });
    };
    const res = await s.call("/api/stats");
    const text = await res.text();
    expect(res.status).toBe(503);
    expect(JSON.parse(text).error.code).toBe("RATCHET_STORE");
    expect(text).not.toContain("hunter2");
    expect(text).not.toContain("ratchet_tasks");
    (r.store as { stats: unknown }).stats = async () => {
      throw new TypeError(`driver blew up: ${secret}`);
    };
    const raw = await s.call("/api/stats");
    const rawText = await raw.text();
    expect(raw.status).toBe(500);
    expect(JSON.parse(rawText).error.code).toBe("RATCHET_INTERNAL");
    expect(rawText).not.toContain("hunter2");
    expect(logged).toHaveLength(2); // the operator still sees what happened
    (r.store as { stats: unknown }).stats = original;
    expect((await s.call("/api/stats")).status).toBe(200);
  });
});
