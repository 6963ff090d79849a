/**
 * spec §10: a store URL that names no store, or a SQLite one without a path or with a bad
 * `synchronous`, fails at open() with RATCHET_CONFIG and creates nothing (openStore checks before it
 * loads any store's module).
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ConfigError, Ratchet, silentLogger } from "../../src/index.js";

describe("store URLs (spec §10)", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it("an unknown scheme, an empty sqlite path or a bad synchronous is a ConfigError, and nothing is created", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ratchet-url-"));
    dirs.push(dir);
    const cases: { store: string; synchronous?: "NORMAL" | "FULL"; message: RegExp }[] = [
      { store: "mysql://root@localhost/db", message: /unsupported store/ },
      { store: "sqlite:", message: /needs a path/ },
      { store: `sqlite:${join(dir, "x.db")}`, synchronous: "OFF" as "FULL", message: /synchronous must be/ },
    ];
    for (const c of cases) {
      const err = await Ratchet.open({
        store: c.store,
        synchronous: c.synchronous,
        logger: silentLogger,
      }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).code).toBe("RATCHET_CONFIG");
      expect((err as Error).message).toMatch(c.message);
    }
    expect(readdirSync(dir)).toEqual([]);
    expect(existsSync(join(dir, "x.db"))).toBe(false);
  });
});
