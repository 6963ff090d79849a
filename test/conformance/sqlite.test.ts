/** The Store conformance suite on SQLite: in memory, and on a file per test. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { registerStoreConformance } from "../../src/testing/index.js";

const runner = { describe, it, expect, afterEach, beforeAll, afterAll };

registerStoreConformance({
  name: "SqliteStore :memory:",
  open: async (clock) => new SqliteStore({ path: ":memory:", clock }),
  runner,
});

let dir: string | undefined;
let n = 0;
registerStoreConformance({
  name: "SqliteStore file",
  open: async (clock) => {
    dir ??= mkdtempSync(join(tmpdir(), "ratchet-conformance-"));
    return new SqliteStore({ path: join(dir, `${++n}.db`), clock });
  },
  cleanup: async () => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  },
  runner,
});
