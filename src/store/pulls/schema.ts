/**
 * The pull-request tables (spec §22.4), one text for both backends (`ID` is
 * the identity column's spelling). Released as SQLite migration 14 and
 * PostgreSQL migration 17: never edit this text; change the schema with a new
 * migration.
 *
 * - pulls: one row per pull request (`pull_key` is its case-folded identity,
 *   `host/owner/repo#n`), its last known state and checks, and the watcher's
 *   bookkeeping: `version` (the compare-and-set guard of every watcher write),
 *   `next_check_at` (also the claim: a watcher that takes a pull request moves
 *   it forward by its lease), `failures` in a row and the last error.
 * - pull links: which attempts (and so which items) a pull request belongs to,
 *   and how it was found (`url`, `trailer`, `manual`); one link per pair.
 * - items.pr_wait: the pull-request state an item waits for before it moves on
 *   (spec §22.7), JSON, null when it waits for none.
 */
const TEXT = `
CREATE TABLE {s}.ratchet_dispatch_pulls (
  id             ID,
  pull_key       text    NOT NULL UNIQUE,
  host           text    NOT NULL,
  owner          text    NOT NULL,
  repo           text    NOT NULL,
  number         bigint  NOT NULL,
  url            text    NOT NULL,
  state          text    CHECK (state IS NULL OR state IN ('open','merged','closed')),
  draft          integer,
  head_sha       text,
  mergeable      integer,
  checks         text    CHECK (checks IS NULL OR checks IN ('none','pending','success','failure')),
  final          integer NOT NULL,
  version        bigint  NOT NULL,
  failures       integer NOT NULL,
  last_error     text,
  checked_at     bigint,
  next_check_at  bigint  NOT NULL,
  created_at     bigint  NOT NULL,
  updated_at     bigint  NOT NULL
);
CREATE INDEX ratchet_dispatch_pulls_due ON {s}.ratchet_dispatch_pulls (next_check_at, id) WHERE final = 0;
CREATE TABLE {s}.ratchet_dispatch_pull_links (
  id          ID,
  pull_id     bigint NOT NULL,
  attempt_id  bigint NOT NULL,
  item_id     bigint NOT NULL,
  source      text   NOT NULL CHECK (source IN ('url','trailer','manual')),
  created_at  bigint NOT NULL,
  UNIQUE (pull_id, attempt_id)
);
CREATE INDEX ratchet_dispatch_pull_links_item ON {s}.ratchet_dispatch_pull_links (item_id, id);
CREATE INDEX ratchet_dispatch_pull_links_attempt ON {s}.ratchet_dispatch_pull_links (attempt_id, id);
ALTER TABLE {s}.ratchet_dispatch_items ADD COLUMN pr_wait text;
`;

/** The SQLite spelling (no schema prefix). */
export const PULLS_SCHEMA_SQLITE = TEXT.replaceAll("{s}.", "").replaceAll(" ID,", " INTEGER PRIMARY KEY,");

/** The PostgreSQL spelling (`{s}` is filled in by the migration runner). */
export const PULLS_SCHEMA_PG = TEXT.replaceAll(" ID,", " bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,");
