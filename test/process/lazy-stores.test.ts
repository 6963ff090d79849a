/**
 * A store's driver is loaded only when a store URL names it (engine/options.ts openStore): a fresh
 * process that opens a SQLite store never loads pg (31–44 ms of a process's start on Node 20), and one
 * that opens PostgreSQL never loads better-sqlite3. Checked in a new process, where the module cache
 * starts empty.
 */
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { newSchemaName, PG_URL, pgGate } from "../pg-available.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const INDEX = pathToFileURL(join(ROOT, "src", "index.ts")).href;

/** Opens `store` in a new process, enqueues and reads back one task, and says which drivers it loaded. */
function loadedDrivers(store: string, schema?: string): { pg: boolean; sqlite: boolean; status: string } {
  const script = `
    import { createRequire } from "node:module";
    const { defineTask, Ratchet, silentLogger } = await import(${JSON.stringify(INDEX)});
    const t = defineTask({ name: "t", run: () => null });
    const r = await Ratchet.open({ store: ${JSON.stringify(store)}, postgres: { schema: ${JSON.stringify(schema ?? "ratchet")} }, tasks: [t], logger: silentLogger });
    const id = await r.enqueue(t, null);
    const status = (await r.get(id)).status;
    await r.close();
    const loaded = Object.keys(createRequire(import.meta.url).cache);
    process.stdout.write(JSON.stringify({
      pg: loaded.some((k) => /[\\\\/]node_modules[\\\\/]pg[\\\\/]/.test(k)),
      sqlite: loaded.some((k) => /[\\\\/]node_modules[\\\\/]better-sqlite3[\\\\/]/.test(k)),
      status,
    }));
  `;
  const res = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 60_000,
  });
  if (res.status !== 0) throw new Error(`child failed (${res.status}): ${res.stderr}`);
  return JSON.parse(res.stdout);
}

describe("store drivers load on demand", () => {
  it("a SQLite store loads better-sqlite3 and never pg", () => {
    expect(loadedDrivers("sqlite::memory:")).toEqual({ pg: false, sqlite: true, status: "pending" });
  });
});

describe("store drivers load on demand (PostgreSQL)", () => {
  if (!pgGate(it)) return;
  it("a PostgreSQL store loads pg and never better-sqlite3", async () => {
    const schema = newSchemaName();
    try {
      expect(loadedDrivers(PG_URL, schema)).toEqual({ pg: true, sqlite: false, status: "pending" });
    } finally {
      const { dropSchemas } = await import("../pg-available.js");
      await dropSchemas([schema]);
    }
  });
});
