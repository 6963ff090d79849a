/** The Store conformance suite on PostgreSQL: each test gets its own schema, dropped after the file. */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { registerStoreConformance } from "../../src/testing/index.js";
import { dropSchemas, newSchemaName, PG_URL, pgGate } from "../pg-available.js";

describe("PostgreSQL", () => {
  if (!pgGate(it)) return;
  const schemas: string[] = [];
  registerStoreConformance({
    name: "PostgresStore",
    open: async (clock) => {
      const schema = newSchemaName();
      schemas.push(schema);
      return new PostgresStore({ connectionString: PG_URL, schema, clock });
    },
    cleanup: () => dropSchemas(schemas),
    runner: { describe, it, expect, afterEach, beforeAll, afterAll },
  });
});
