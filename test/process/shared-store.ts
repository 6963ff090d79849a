/** The store a process test shares with its child processes, on either backend. */
import { systemClock } from "../../src/core/clock.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { newSchemaName, PG_URL } from "../pg-available.js";
import type { Sandbox } from "./harness.js";

/**
 * The store a process test shares with its children: the sandbox's SQLite file, or a fresh
 * PostgreSQL schema (added to `schemas`, for the suite to drop), migrated. `where` names it the way
 * the fixtures take it (a path, or `postgres:<schema>`).
 */
export async function openSharedStore(
  backend: "sqlite" | "postgres",
  sb: Sandbox,
  schemas: string[],
): Promise<{ store: SqliteStore | PostgresStore; where: string }> {
  let store: SqliteStore | PostgresStore;
  let where: string;
  if (backend === "sqlite") {
    where = sb.db;
    store = new SqliteStore({ path: sb.db, clock: systemClock });
  } else {
    const schema = newSchemaName();
    schemas.push(schema);
    where = `postgres:${schema}`;
    store = new PostgresStore({ connectionString: PG_URL, schema });
  }
  await store.migrate();
  return { store, where };
}
