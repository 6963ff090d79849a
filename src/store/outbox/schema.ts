/**
 * The outbox tables (spec §21.1, §21.6), one text for both backends: `ID` is
 * the identity column's spelling. Released as SQLite migration 13 and
 * PostgreSQL migration 16: never edit this text; change the schema with a new
 * migration.
 *
 * - ratchet_outbox: the facts, in `seq` order (the identity). `data` is JSON
 *   text. A fact's id is derived from its seq (`fact_<seq>`), so it is stable
 *   across senders and redeliveries.
 * - ratchet_outbox_destinations: one row per destination a sender has run
 *   for: its cursor (the last seq delivered or passed over by its filter),
 *   its lease (`holder`, `lease_until`), its status (`ok`, `retrying` since
 *   `since` with `failures` and `last_error`, `dead` with the batch that
 *   dead-lettered), the instant before which it is not tried (`next_at`), and
 *   counters for /metrics.
 */
const TEXT = `
CREATE TABLE {s}.ratchet_outbox (
  seq      ID,
  type     text   NOT NULL,
  subject  text   NOT NULL,
  at       bigint NOT NULL,
  data     text   NOT NULL
);
CREATE TABLE {s}.ratchet_outbox_destinations (
  name          text    PRIMARY KEY,
  cursor        bigint  NOT NULL,
  holder        text,
  lease_until   bigint,
  state         text    NOT NULL CHECK (state IN ('ok','retrying','dead')),
  failures      integer NOT NULL,
  since         bigint,
  next_at       bigint,
  last_error    text,
  dead_batch    text,
  last_ok_at    bigint,
  delivered     bigint  NOT NULL,
  batches       bigint  NOT NULL,
  failed        bigint  NOT NULL,
  created_at    bigint  NOT NULL,
  updated_at    bigint  NOT NULL
);
`;

/** The SQLite spelling (no schema prefix). */
export const OUTBOX_SCHEMA_SQLITE = TEXT.replaceAll("{s}.", "").replaceAll(" ID,", " INTEGER PRIMARY KEY,");

/** The PostgreSQL spelling (`{s}` is filled in by the migration runner). */
export const OUTBOX_SCHEMA_PG = TEXT.replaceAll(" ID,", " bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,");
