/**
 * Runs a dispatch test body on SQLite (memory) and on PostgreSQL (a schema per
 * store, dropped after the file). Under CI=true the PostgreSQL block fails
 * without a server rather than skipping (test/pg-available.ts).
 */
import { afterAll, afterEach, describe, it } from "vitest";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import type { FakeClock } from "../../src/testing/fake-clock.js";
import { dropSchemas, newSchemaName, PG_URL, pgGate } from "../pg-available.js";

export type DispatchTestStore = SqliteStore | PostgresStore;

const opened: DispatchTestStore[] = [];
const schemas: string[] = [];

afterEach(async () => {
  for (const s of opened.splice(0).reverse()) await s.close().catch(() => {});
});
afterAll(async () => {
  await dropSchemas(schemas.splice(0));
});

export function forEachStore(body: (open: (clock: FakeClock) => Promise<DispatchTestStore>) => void): void {
  describe("sqlite", () => {
    body(async (clock) => {
      const s = new SqliteStore({ path: ":memory:", clock });
      opened.push(s);
      await s.migrate();
      return s;
    });
  });
  describe("postgres", () => {
    if (!pgGate(it)) return;
    body(async (clock) => {
      const schema = newSchemaName();
      schemas.push(schema);
      const s = new PostgresStore({ connectionString: PG_URL, schema, clock });
      opened.push(s);
      await s.migrate();
      return s;
    });
  });
}
