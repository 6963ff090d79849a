/**
 * The dispatch tables (spec §20.18), one text for both backends: `ID` is the
 * identity column's spelling (SQLite INTEGER PRIMARY KEY, PostgreSQL bigint
 * identity). Released as SQLite migration 10 and PostgreSQL migration 13:
 * never edit this text; change the schema with a new migration (SQLite 12 and PostgreSQL 15 add
 * `attempts.usage_resets_at` and `items.not_before`, spec §20.29).
 *
 * - items: an item of a pipeline, its current step and state, the edge takes
 *   that bound its cycles (`taken`, JSON), whether its next attempt revives
 *   the kept session (`resume_next`), and the kept session (JSON, with its
 *   attempt in `kept_attempt` for the forget scan).
 * - attempts: one try of one step; `version` is the compare-and-set guard of
 *   every move, `holder`/`lease_until` the runner that reads it now.
 * - events: the attempt's timeline (readings, decisions, moves).
 * - seats: per worker kind, the seat limit and the capacity backoff.
 */
const TEXT = `
CREATE TABLE {s}.ratchet_dispatch_items (
  id            ID,
  pipeline      text    NOT NULL,
  step          text    NOT NULL,
  state         text    NOT NULL CHECK (state IN ('open','running','done','closed','archived')),
  input         text    NOT NULL,
  taken         text    NOT NULL,
  resume_next   integer NOT NULL,
  kept          text,
  kept_attempt  bigint,
  created_at    bigint  NOT NULL,
  updated_at    bigint  NOT NULL,
  ended_at      bigint
);
CREATE INDEX ratchet_dispatch_items_state ON {s}.ratchet_dispatch_items (state, id);
CREATE TABLE {s}.ratchet_dispatch_attempts (
  id                    ID,
  item_id               bigint  NOT NULL,
  pipeline              text    NOT NULL,
  phase                 text    NOT NULL,
  worker                text    NOT NULL,
  mode                  text    NOT NULL CHECK (mode IN ('agent','attended')),
  state                 text    NOT NULL CHECK (state IN ('starting','reconciling','running','sleeping','waking','closing','succeeded','failed')),
  claimed_at            bigint  NOT NULL,
  started_at            bigint,
  woken_at              bigint,
  wake_requested_at     bigint,
  suspend_requested_at  bigint,
  closing_at            bigint,
  closing               text,
  session               text,
  spawn                 text    NOT NULL,
  ended_at              bigint,
  forced                text,
  session_stopped       integer,
  resume_fallback       integer NOT NULL,
  forgotten             integer NOT NULL,
  closeout              text,
  version               bigint  NOT NULL,
  holder                text,
  lease_until           bigint,
  updated_at            bigint  NOT NULL
);
CREATE INDEX ratchet_dispatch_attempts_live ON {s}.ratchet_dispatch_attempts (id) WHERE ended_at IS NULL;
CREATE INDEX ratchet_dispatch_attempts_item ON {s}.ratchet_dispatch_attempts (item_id, id);
CREATE INDEX ratchet_dispatch_attempts_session ON {s}.ratchet_dispatch_attempts (session, id) WHERE session IS NOT NULL;
CREATE INDEX ratchet_dispatch_attempts_ended ON {s}.ratchet_dispatch_attempts (ended_at) WHERE ended_at IS NOT NULL AND forgotten = 0;
CREATE TABLE {s}.ratchet_dispatch_events (
  id          ID,
  attempt_id  bigint NOT NULL,
  at          bigint NOT NULL,
  kind        text   NOT NULL,
  detail      text
);
CREATE INDEX ratchet_dispatch_events_attempt ON {s}.ratchet_dispatch_events (attempt_id, id);
CREATE TABLE {s}.ratchet_dispatch_seats (
  worker         text    PRIMARY KEY,
  seat_limit     integer,
  refusals       integer NOT NULL,
  backoff_until  bigint
);
`;

/** The SQLite spelling (no schema prefix). */
export const DISPATCH_SCHEMA_SQLITE = TEXT.replaceAll("{s}.", "").replaceAll(" ID,", " INTEGER PRIMARY KEY,");

/** The PostgreSQL spelling (`{s}` is filled in by the migration runner). */
export const DISPATCH_SCHEMA_PG = TEXT.replaceAll(
  " ID,",
  " bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,",
);
