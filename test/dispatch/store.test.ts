/** The dispatch store conformance group (spec §20.18–§20.21) on SQLite memory, SQLite file and PostgreSQL. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { registerDispatchStoreContract } from "../../src/dispatch/testing/store-contract.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { dropSchemas, newSchemaName, PG_URL, pgGate } from "../pg-available.js";

const runner = { describe, it, expect, afterAll };

registerDispatchStoreContract({
  name: "SqliteStore :memory:",
  open: async (clock) => new SqliteStore({ path: ":memory:", clock }),
  runner,
});

const dir = mkdtempSync(join(tmpdir(), "ratchet-dispatch-store-"));
let n = 0;
registerDispatchStoreContract({
  name: "SqliteStore file",
  open: async (clock) => new SqliteStore({ path: join(dir, `${++n}.db`), clock }),
  cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  runner,
});

describe("PostgreSQL", () => {
  if (!pgGate(it)) return;
  const schemas: string[] = [];
  registerDispatchStoreContract({
    name: "PostgresStore",
    open: async (clock) => {
      const schema = newSchemaName();
      schemas.push(schema);
      return new PostgresStore({ connectionString: PG_URL, schema, clock });
    },
    cleanup: () => dropSchemas(schemas),
    runner,
  });
});
