/**
 * The dashboard's files: `/` and `/assets/*` from a folder, with their
 * content types, without a token, and nothing outside the folder. HTTP-layer
 * rules: SQLite is enough. The browser tests (test/dashboard) use the real
 * build; these use a small folder made here.
 */

import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MAX_FILE_BYTES } from "../../src/server/dashboard.js";
import { onCleanup, openRatchet } from "../engine/helpers.js";
import { errorOf, startServer, TASKS, TOKEN } from "./kit.js";

/** A built-dashboard look-alike beside a secret file that must never be served. */
function fixture(): string {
  const top = mkdtempSync(join(tmpdir(), "ratchet-dash-"));
  onCleanup(() => rmSync(top, { recursive: true, force: true }));
  writeFileSync(join(top, "secret.json"), '{"secret":true}');
  const dir = join(top, "dashboard");
  mkdirSync(join(dir, "assets", "fonts"), { recursive: true });
  writeFileSync(join(dir, "index.html"), "<!doctype html><title>Ratchet</title>");
  writeFileSync(join(dir, "assets", "index-abc123.js"), "console.log(1)");
  writeFileSync(join(dir, "assets", "index-abc123.css"), "body{}");
  writeFileSync(join(dir, "assets", "logo.svg"), "<svg/>");
  writeFileSync(join(dir, "assets", "fonts", "a.woff2"), "w");
  writeFileSync(join(dir, "assets", "notes.exe"), "MZ");
  writeFileSync(join(dir, "assets", ".hidden.js"), "x");
  writeFileSync(join(dir, "assets", "huge.js"), Buffer.alloc(MAX_FILE_BYTES + 1, 32));
  symlinkSync(join(top, "secret.json"), join(dir, "assets", "link.json"));
  return dir;
}

/** GET with the path sent exactly as written (fetch would resolve "..", hiding what a raw client can send). */
function rawGet(base: string, path: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ hostname, port, path, method: "GET" }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("dashboard files", () => {
  it("HTTP API: / serves index.html and /assets/* the built files with their content types, without a token", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r, { token: TOKEN, dashboard: fixture() });
    const page = await s.call("/", { token: null });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(page.headers.get("x-content-type-options")).toBe("nosniff");
    expect(await page.text()).toContain("<title>Ratchet</title>");
    const types: [string, string][] = [
      ["/assets/index-abc123.js", "text/javascript; charset=utf-8"],
      ["/assets/index-abc123.css", "text/css; charset=utf-8"],
      ["/assets/logo.svg", "image/svg+xml"],
      ["/assets/fonts/a.woff2", "font/woff2"],
    ];
    for (const [path, type] of types) {
      const res = await s.call(path, { token: null });
      expect({ path, status: res.status, type: res.headers.get("content-type") }).toEqual({
        path,
        status: 200,
        type,
      });
      expect(res.headers.get("cache-control")).toContain("immutable");
    }
    // The data still needs the token.
    expect((await s.call("/api/stats", { token: null })).status).toBe(401);
  });

  it("HTTP API: /assets/* refuses traversal, hidden files, links out of the folder, unknown types and oversized files (404)", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r, { dashboard: fixture() });
    const refused = [
      "/assets/../secret.json",
      "/assets/%2e%2e/secret.json",
      "/assets/%2e%2e%2fsecret.json",
      "/assets/..%2f..%2fsecret.json",
      "/assets/fonts/..%5c..%5csecret.json",
      "/assets/%2fetc%2fpasswd",
      "/assets//etc/passwd",
      "/assets/.hidden.js",
      "/assets/link.json",
      "/assets/notes.exe",
      "/assets/huge.js",
      "/assets/missing.js",
      "/assets/fonts",
      `/assets/${"a".repeat(300)}.js`,
    ];
    for (const path of refused) {
      const { status, body } = await rawGet(s.url, path);
      expect({ path, status }).toEqual({ path, status: 404 });
      expect(body).not.toContain('"secret":true');
    }
  });

  it("HTTP API: without a built dashboard / says how to build it; without a token the Host check covers the files too", async () => {
    const r = await openRatchet(TASKS);
    const s = await startServer(r, { dashboard: join(tmpdir(), "ratchet-no-such-dashboard") });
    const res = await s.call("/");
    expect(await errorOf(res)).toMatchObject({
      status: 404,
      message: expect.stringContaining("npm run build"),
    });
    const t = await startServer(r, { dashboard: fixture() });
    for (const path of ["/", "/assets/logo.svg"]) {
      const rebound = await t.server.app.request(path, { headers: { host: "evil.example" } });
      expect({ path, status: rebound.status }).toEqual({ path, status: 403 });
    }
    const off = await startServer(r, { dashboard: false });
    expect((await off.call("/")).status).toBe(404);
  });
});
