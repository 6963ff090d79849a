/** /openapi.json describes exactly the routes the server serves. */
import { expect, it } from "vitest";
import type { OPENAPI } from "../../src/server/openapi.js";
import { openRatchet } from "../engine/helpers.js";
import { startServer, TASKS, TOKEN } from "./kit.js";

it("HTTP API: /openapi.json is OpenAPI 3.1 and documents every route, and only those", async () => {
  const r = await openRatchet(TASKS);
  const s = await startServer(r, { token: TOKEN });
  const res = await s.call("/openapi.json", { token: null });
  expect(res.status).toBe(200);
  const doc = (await res.json()) as typeof OPENAPI;
  expect(doc.openapi).toBe("3.1.0");
  const served = new Set(
    s.server.app.routes
      .filter((rt) => rt.method !== "ALL")
      .map((rt) => `${rt.method.toLowerCase()} ${rt.path.replace(/:(\w+)(\{[^}]*\})?/g, "{$1}")}`),
  );
  const documented = new Set(
    Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`)),
  );
  expect([...served].sort()).toEqual([...documented].sort());
  // Path parameters are declared; every $ref resolves.
  for (const [path, ops] of Object.entries(doc.paths))
    for (const op of Object.values(ops) as { parameters?: { name: string; in: string }[] }[]) {
      const declared = (op.parameters ?? []).filter((p) => p.in === "path").map((p) => p.name);
      expect(declared.sort()).toEqual([...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort());
    }
  const text = JSON.stringify(doc);
  for (const [, kind, name] of text.matchAll(/"#\/components\/(\w+)\/(\w+)"/g))
    expect(
      (doc.components as Record<string, Record<string, unknown>>)[kind!]?.[name!],
      `${kind}/${name}`,
    ).toBeDefined();
});
