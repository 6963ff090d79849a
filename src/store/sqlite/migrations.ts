/**
 * Numbered schema migrations for SQLite. spec §10.1.
 * Reviewed artefacts: never edit a released migration; add the next number.
 * Index notes (why each exists) sit next to the index.
 * A migration is SQL, or a function for what SQL alone cannot do; both run in the migrating
 * IMMEDIATE transaction, so a throw leaves the database as it was.
 */
import type Database from "better-sqlite3";
import { DISPATCH_SCHEMA_SQLITE } from "../dispatch/schema.js";
import { OUTBOX_SCHEMA_SQLITE } from "../outbox/schema.js";
import { PULLS_SCHEMA_SQLITE } from "../pulls/schema.js";

export interface Migration {
  version: number;
  sql?: string;
  run?: (db: Database.Database) => void;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    sql: `
CREATE TABLE ratchet_tasks (
  -- AUTOINCREMENT: an id is never reused, even after the newest task is pruned (spec §1.4).
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  queue           TEXT    NOT NULL,
  name            TEXT    NOT NULL,
  version         INTEGER NOT NULL,
  input           TEXT    NOT NULL,
  status          TEXT    NOT NULL CHECK (status IN ('pending','running','waiting','completing','terminal')),
  outcome         TEXT    CHECK (outcome IN ('completed','failed','aborted','upstream_failed','orphaned','faulted')),
  result          TEXT,
  error           TEXT,
  priority        INTEGER NOT NULL,
  order_key       INTEGER NOT NULL,
  max_ms          INTEGER NOT NULL,
  attempts        INTEGER NOT NULL DEFAULT 0,
  max_attempts    INTEGER NOT NULL,
  epoch           INTEGER NOT NULL DEFAULT 0,
  run_after       INTEGER NOT NULL,
  wake_at         INTEGER,
  lease_until     INTEGER,
  locked_by       TEXT,
  needs_pending   INTEGER NOT NULL DEFAULT 0,
  dependents      INTEGER NOT NULL DEFAULT 0,
  dedupe_key      TEXT,
  job             TEXT,
  abort_requested INTEGER NOT NULL DEFAULT 0,
  progress        REAL,
  progress_note   TEXT,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  started_at      INTEGER,
  claimed_at      INTEGER,
  ended_at        INTEGER,
  CHECK ((status = 'terminal') = (outcome IS NOT NULL))
);
-- The claim path (spec §3.4): only due, runnable rows are 'pending', so this
-- partial index holds exactly what a claim may take, in claim order. Future
-- and dependency-blocked tasks are 'waiting' and never appear here.
CREATE INDEX ratchet_tasks_ready ON ratchet_tasks (queue, order_key, id) WHERE status = 'pending';
-- Reclaim of expired leases and nextRunAt over running tasks (spec §3.3, §9.3).
CREATE INDEX ratchet_tasks_lease ON ratchet_tasks (lease_until) WHERE status = 'running';
-- Timer promotion: waiting rows with a due time (future runAfter, backoff, sleep).
CREATE INDEX ratchet_tasks_wake ON ratchet_tasks (wake_at) WHERE status = 'waiting' AND wake_at IS NOT NULL;
-- Dedupe (spec §2.3): unique among live and completed tasks; a failed task leaves the index and releases its key.
CREATE UNIQUE INDEX ratchet_tasks_dedupe ON ratchet_tasks (queue, dedupe_key)
  WHERE dedupe_key IS NOT NULL AND (status <> 'terminal' OR outcome = 'completed');
CREATE INDEX ratchet_tasks_job ON ratchet_tasks (job) WHERE job IS NOT NULL;
CREATE INDEX ratchet_tasks_ended ON ratchet_tasks (ended_at) WHERE status = 'terminal';

-- needs edges: task_id needs needs_id.
CREATE TABLE ratchet_deps (
  needs_id INTEGER NOT NULL,
  task_id  INTEGER NOT NULL,
  PRIMARY KEY (needs_id, task_id)
) WITHOUT ROWID;
CREATE INDEX ratchet_deps_task ON ratchet_deps (task_id);

-- id keeps commit order (steps committed in the same millisecond still list in order).
CREATE TABLE ratchet_steps (
  id         INTEGER PRIMARY KEY,
  task_id    INTEGER NOT NULL,
  name       TEXT    NOT NULL,
  result     TEXT    NOT NULL,
  attempt    INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  UNIQUE (task_id, name)
);

-- Only exceptional transitions are logged (failures, reclaims, aborts, retries),
-- so the claim/complete hot path writes no event rows.
CREATE TABLE ratchet_events (
  id      INTEGER PRIMARY KEY,
  task_id INTEGER NOT NULL,
  at      INTEGER NOT NULL,
  kind    TEXT    NOT NULL,
  attempt INTEGER,
  detail  TEXT
);
CREATE INDEX ratchet_events_task ON ratchet_events (task_id, id);

-- Live-task counter per queue for admission control without a scan (spec §2.7).
CREATE TABLE ratchet_queues (
  name TEXT PRIMARY KEY,
  live INTEGER NOT NULL DEFAULT 0
);
`,
  },
  {
    version: 2,
    sql: `
-- Task trees (spec §12). Columns are added (not a rebuilt table) so the upgrade is cheap on a big table.
ALTER TABLE ratchet_tasks ADD COLUMN owner_id INTEGER;
ALTER TABLE ratchet_tasks ADD COLUMN scope TEXT;
ALTER TABLE ratchet_tasks ADD COLUMN background INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ratchet_tasks ADD COLUMN detached INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ratchet_tasks ADD COLUMN spawn_name TEXT;
ALTER TABLE ratchet_tasks ADD COLUMN owns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ratchet_tasks ADD COLUMN watched INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ratchet_tasks ADD COLUMN held_outcome TEXT CHECK (held_outcome IN ('completed','failed','aborted','faulted'));
ALTER TABLE ratchet_tasks ADD COLUMN wait_on TEXT;
ALTER TABLE ratchet_tasks ADD COLUMN wait_policy TEXT;
ALTER TABLE ratchet_tasks ADD COLUMN event_name TEXT;
ALTER TABLE ratchet_tasks ADD COLUMN checkpoint TEXT;
ALTER TABLE ratchet_tasks ADD COLUMN blocked TEXT;
-- Children by owner, and idempotent spawn: a rerun of the owner finds the same child (spec §12.1).
CREATE UNIQUE INDEX ratchet_tasks_spawn ON ratchet_tasks (owner_id, spawn_name) WHERE owner_id IS NOT NULL;
-- Live tasks with an abort mark: the roots of cascades (spec §12.5); stays small.
CREATE INDEX ratchet_tasks_marked ON ratchet_tasks (id) WHERE abort_requested = 1 AND status <> 'terminal';
-- Held outcomes to finalize (spec §12.4).
CREATE INDEX ratchet_tasks_completing ON ratchet_tasks (id) WHERE status = 'completing';
-- Parked tasks by what they wait for: task waits, drains, events (spec §12.3, §12.7).
CREATE INDEX ratchet_tasks_parked ON ratchet_tasks (wait_on, event_name) WHERE status = 'waiting' AND wait_on IS NOT NULL;
-- Live tasks of a named scope (idle, abortScope).
CREATE INDEX ratchet_tasks_scope ON ratchet_tasks (scope) WHERE scope IS NOT NULL AND status <> 'terminal';

-- waitFor edges of parked waiters; deleted when the waiter wakes.
CREATE TABLE ratchet_waits (
  waiter_id INTEGER NOT NULL,
  member_id INTEGER NOT NULL,
  PRIMARY KEY (waiter_id, member_id)
) WITHOUT ROWID;
CREATE INDEX ratchet_waits_member ON ratchet_waits (member_id);

-- Signals (spec §12.7): the first per name is kept, so a signal sent before the wait is not lost.
CREATE TABLE ratchet_signals (
  name       TEXT PRIMARY KEY,
  payload    TEXT NOT NULL,
  created_at INTEGER NOT NULL
);

-- Definitions some Ratchet instance registered: a task whose name is not here has no code (orphaned when aborted).
CREATE TABLE ratchet_definitions (
  name       TEXT PRIMARY KEY,
  version    INTEGER NOT NULL,
  has_abort  INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
`,
  },
  {
    version: 3,
    sql: `
-- Schedules (spec §14.1–§14.4): one row per schedule; next_at is the first unfired tick. A worker wins a
-- tick by a conditional write on next_at; firing_at marks a tick won but not yet enqueued (crash repair).
CREATE TABLE ratchet_schedules (
  name       TEXT PRIMARY KEY,
  cron       TEXT NOT NULL,
  timezone   TEXT,
  task       TEXT NOT NULL,
  input      TEXT NOT NULL,
  queue      TEXT,
  priority   INTEGER,
  missed     TEXT NOT NULL CHECK (missed IN ('once','skip')),
  grace_ms   INTEGER NOT NULL,
  next_at    INTEGER NOT NULL,
  firing_at  INTEGER,
  last_at    INTEGER,
  last_task  INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX ratchet_schedules_due ON ratchet_schedules (next_at);
`,
  },
  {
    version: 4,
    sql: `
-- Throttle and debounce keys (spec §14.6–§14.7): the task a key currently stands for, when the key was
-- last used, and when its debounce window opened.
CREATE TABLE ratchet_flow_keys (
  queue    TEXT NOT NULL,
  kind     TEXT NOT NULL CHECK (kind IN ('throttle','debounce')),
  key      TEXT NOT NULL,
  task_id  INTEGER NOT NULL,
  at       INTEGER NOT NULL,
  first_at INTEGER NOT NULL,
  PRIMARY KEY (queue, kind, key)
);
`,
  },
  {
    version: 5,
    sql: `
-- Flow control inside the claim (spec §14.9–§14.12). seat: the concurrency group and key a task runs
-- under; rate: the buckets and costs it is charged at each start (JSON); fair_key: its fairness key.
ALTER TABLE ratchet_tasks ADD COLUMN seat TEXT;
ALTER TABLE ratchet_tasks ADD COLUMN rate TEXT;
ALTER TABLE ratchet_tasks ADD COLUMN fair_key TEXT;
-- Running tasks of a seat, counted at each claim of the seat. Only running rows are in it, so it stays
-- a few pages and a claim or settle moves one small entry (an index over every seated row measured
-- ~35% off a seated drain: each status change rewrote entries in a big index).
CREATE INDEX ratchet_tasks_seat ON ratchet_tasks (seat) WHERE status = 'running' AND seat IS NOT NULL;
-- Tasks parked on a full seat, in claim order: woken one by one as places free.
CREATE INDEX ratchet_tasks_seat_parked ON ratchet_tasks (seat, order_key, id) WHERE status = 'waiting' AND wait_on = 'seat';
-- Run-time seat limits of a group or one key; they override the limit in code.
CREATE TABLE ratchet_seat_limits (
  seat       TEXT PRIMARY KEY,
  lim        INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
-- Token buckets: level measured at 'at', the wake-up time of the next parked task, a 429 pause,
-- and the configuration the last claimer charged it with.
CREATE TABLE ratchet_buckets (
  bucket       TEXT PRIMARY KEY,
  tokens       REAL NOT NULL,
  at           INTEGER NOT NULL,
  next_wake    INTEGER NOT NULL,
  paused_until INTEGER NOT NULL,
  lim          REAL NOT NULL,
  period_ms    INTEGER NOT NULL,
  burst        REAL NOT NULL
);
-- Fair queueing: the start tag the next task of a key gets.
CREATE TABLE ratchet_fair (
  queue   TEXT NOT NULL,
  key     TEXT NOT NULL,
  next_at INTEGER NOT NULL,
  PRIMARY KEY (queue, key)
);
CREATE INDEX ratchet_fair_next ON ratchet_fair (next_at);
-- A task that leaves 'running' frees its seat: the first parked task of the seat becomes pending.
-- A trigger, so that no transition (settle, park, fail, cancel, reclaim) can forget it. A claim that
-- parks a task on a full seat is not a release.
CREATE TRIGGER ratchet_seat_release AFTER UPDATE OF status ON ratchet_tasks
WHEN OLD.status = 'running' AND NEW.status <> 'running' AND OLD.seat IS NOT NULL
  AND NOT (NEW.status = 'waiting' AND NEW.wait_on IS 'seat')
BEGIN
  UPDATE ratchet_tasks SET status = 'pending', wait_on = NULL, updated_at = NEW.updated_at
  WHERE id = (SELECT id FROM ratchet_tasks WHERE seat = OLD.seat AND status = 'waiting' AND wait_on = 'seat'
              ORDER BY order_key, id LIMIT 1)
    AND status = 'waiting' AND wait_on = 'seat';
END;
`,
  },
  {
    version: 6,
    run: cheapChecks,
  },
  {
    version: 7,
    sql: `
-- Durable output streams (spec §16). One row per (task, stream): its committed length (the next
-- offset), bytes and whether it is closed; the writer's append is conditional on the length it
-- expects, so a retried commit can never add its chunks twice.
CREATE TABLE ratchet_streams (
  task_id    INTEGER NOT NULL,
  name       TEXT    NOT NULL,
  length     INTEGER NOT NULL,
  bytes      INTEGER NOT NULL,
  closed     INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (task_id, name)
) WITHOUT ROWID;
-- One row per committed batch of chunks (a segment): offsets first … first + count - 1, the chunks'
-- JSON texts as one JSON array. A row per batch rather than per chunk: a writer streaming tokens
-- commits every 100 ms, so 50 writers at 50 tokens/s are 500 rows/s instead of 2,500.
CREATE TABLE ratchet_stream_chunks (
  task_id INTEGER NOT NULL,
  name    TEXT    NOT NULL,
  first   INTEGER NOT NULL,
  count   INTEGER NOT NULL,
  data    TEXT    NOT NULL,
  PRIMARY KEY (task_id, name, first)
) WITHOUT ROWID;
`,
  },
  {
    version: 8,
    sql: `
-- Conversations (spec §17). A conversation is not a task: it lives until deleteConversation
-- (spec §17.9), whatever the task retention. run_task_id is the one run in progress (spec §17.5);
-- next_seq the sequence number its next entry gets (spec §17.2).
CREATE TABLE ratchet_conversations (
  id            TEXT    PRIMARY KEY,
  title         TEXT,
  metadata      TEXT,
  owner_task_id INTEGER,
  parent_id     TEXT,
  parent_seq    INTEGER,
  next_seq      INTEGER NOT NULL DEFAULT 0,
  run_task_id   INTEGER,
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX ratchet_conversations_owner ON ratchet_conversations (owner_task_id) WHERE owner_task_id IS NOT NULL;
-- Immutable entries, totally ordered per conversation by seq (spec §17.2).
CREATE TABLE ratchet_entries (
  conversation_id TEXT    NOT NULL,
  seq             INTEGER NOT NULL,
  kind            TEXT    NOT NULL,
  name            TEXT,
  data            TEXT    NOT NULL,
  task_id         INTEGER,
  submission_id   INTEGER,
  created_at      INTEGER NOT NULL,
  PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;
CREATE INDEX ratchet_entries_task ON ratchet_entries (task_id, conversation_id, seq) WHERE task_id IS NOT NULL;
-- Application state per conversation: one JSON value per key (spec §17.4).
CREATE TABLE ratchet_conversation_state (
  conversation_id TEXT    NOT NULL,
  key             TEXT    NOT NULL,
  value           TEXT    NOT NULL,
  updated_at      INTEGER NOT NULL,
  PRIMARY KEY (conversation_id, key)
) WITHOUT ROWID;
-- Keyed commits: a commit with a key is applied once (spec §17.4).
CREATE TABLE ratchet_conversation_commits (
  conversation_id TEXT NOT NULL,
  key             TEXT NOT NULL,
  result          TEXT NOT NULL,
  PRIMARY KEY (conversation_id, key)
) WITHOUT ROWID;
-- Submissions and the inbox (spec §17.5–§17.8): queued rows are the inbox, in id order.
CREATE TABLE ratchet_submissions (
  id              INTEGER PRIMARY KEY,
  conversation_id TEXT    NOT NULL,
  request_id      TEXT,
  mode            TEXT    NOT NULL,
  input           TEXT    NOT NULL,
  status          TEXT    NOT NULL,
  reason          TEXT,
  entry_seq       INTEGER,
  answer_seq      INTEGER,
  run_task_id     INTEGER,
  created_at      INTEGER NOT NULL,
  settled_at      INTEGER
);
CREATE UNIQUE INDEX ratchet_submissions_request ON ratchet_submissions (conversation_id, request_id) WHERE request_id IS NOT NULL;
CREATE INDEX ratchet_submissions_inbox ON ratchet_submissions (conversation_id, status, id);
CREATE INDEX ratchet_submissions_run ON ratchet_submissions (run_task_id) WHERE run_task_id IS NOT NULL;
`,
  },
  {
    version: 9,
    sql: `
-- Circuit breakers per provider+model (spec §18.6), shared by every worker. A missing row is a
-- closed breaker with no failures. state: closed | open | half_open; in half_open, probe_until is
-- when the admitted probe's claim lapses (a probe that died frees the slot for another).
CREATE TABLE ratchet_breakers (
  key          TEXT    PRIMARY KEY,
  state        TEXT    NOT NULL,
  failures     INTEGER NOT NULL,
  window_start INTEGER NOT NULL,
  opened_at    INTEGER NOT NULL,
  probe_until  INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL
) WITHOUT ROWID;
-- The usage ledger (spec §18.8): one row per committed response or billed failed attempt; key makes
-- a repeated write of the same response change nothing.
CREATE TABLE ratchet_usage (
  id              INTEGER PRIMARY KEY,
  key             TEXT    NOT NULL UNIQUE,
  status          TEXT    NOT NULL,
  conversation_id TEXT,
  task_id         INTEGER,
  provider        TEXT    NOT NULL,
  model           TEXT    NOT NULL,
  route           TEXT    NOT NULL,
  input_tokens    INTEGER NOT NULL,
  output_tokens   INTEGER NOT NULL,
  cached_tokens   INTEGER NOT NULL,
  reasoning_tokens INTEGER NOT NULL,
  cost            REAL    NOT NULL,
  created_at      INTEGER NOT NULL
);
CREATE INDEX ratchet_usage_conversation ON ratchet_usage (conversation_id, created_at) WHERE conversation_id IS NOT NULL;
CREATE INDEX ratchet_usage_task ON ratchet_usage (task_id) WHERE task_id IS NOT NULL;
CREATE INDEX ratchet_usage_created ON ratchet_usage (created_at);
`,
  },
  {
    version: 10,
    // The dispatch layer's items, attempts, timelines and seats (spec §20.18); the text is shared with PostgreSQL.
    sql: DISPATCH_SCHEMA_SQLITE,
  },
  {
    version: 11,
    sql: `
-- A closed conversation takes no more input (spec §17.8): set once by closeConversation.
ALTER TABLE ratchet_conversations ADD COLUMN closed_at INTEGER;
`,
  },
  {
    version: 12,
    sql: `
-- Dispatch (spec §20.29): the usage limit that closed an attempt, and the instant before which its item
-- starts no attempt.
ALTER TABLE ratchet_dispatch_attempts ADD COLUMN usage_resets_at INTEGER;
ALTER TABLE ratchet_dispatch_items ADD COLUMN not_before INTEGER;
`,
  },
  {
    version: 13,
    // The outbox's facts and destinations (spec §21.1, §21.6); the text is shared with PostgreSQL.
    sql: OUTBOX_SCHEMA_SQLITE,
  },
  {
    version: 14,
    // Linked pull requests, their links to attempts, and items' waits on them (spec §22.4, §22.7); the text is shared with PostgreSQL.
    sql: PULLS_SCHEMA_SQLITE,
  },
];

export const LATEST_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

/**
 * The CHECK constraints of ratchet_tasks written as CASE expressions instead of `IN (…)` lists.
 * Same rules (a NULL outcome passes both forms), but SQLite evaluated each IN-list CHECK at a cost
 * of microseconds per row written, on every claim and settlement. Claiming and completing 20,000
 * tasks in chunks of 32 took 33.0 µs of CPU per task with the IN lists against 26.5 with CASE
 * (1.25×; `node dist/bench/rowcost.js`, 11 rounds, medians). An earlier run of the same comparison
 * with a third variant, no CHECK at all, measured CASE at 18.8 and none at 20.0 µs: within noise.
 *
 * The stored rows satisfy both forms, so the table's text is changed in place — the procedure
 * SQLite documents for constraint changes that leave the stored rows as they are
 * (https://sqlite.org/lang_altertable.html#otheralter): writable_schema, the new text, a bumped
 * schema_version — instead of copying a table that may hold millions of rows. better-sqlite3 opens
 * connections in defensive mode, which forbids writing sqlite_schema; unsafe mode lifts it for this
 * step only. A text that is not exactly the one migrations 1 and 2 wrote stops the migration.
 */
function cheapChecks(db: Database.Database): void {
  let text = db
    .prepare("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'ratchet_tasks'")
    .pluck()
    .get() as string;
  for (const [from, to] of CHECK_SWAPS) {
    if (text.split(from).length !== 2) throw new Error(`migration 6: ratchet_tasks has no single "${from}"`);
    text = text.replace(from, to);
  }
  rewriteTable(db, "ratchet_tasks", text);
  // Reads the new schema back: a text SQLite cannot parse throws here, inside the transaction.
  db.prepare("SELECT count(*) FROM ratchet_tasks WHERE 0").get();
}

/**
 * Replaces a table's CREATE text in sqlite_schema (the caller guarantees the stored rows satisfy
 * it) and bumps schema_version, so every connection reloads the schema. Also used by
 * bench/rowcost.ts to put the old CHECKs back on a copy, for the side-by-side measurement.
 */
export function rewriteTable(db: Database.Database, table: string, text: string): void {
  const version = db.pragma("schema_version", { simple: true }) as number;
  db.unsafeMode(true);
  try {
    db.pragma("writable_schema = ON");
    db.prepare("UPDATE sqlite_schema SET sql = ? WHERE type = 'table' AND name = ?").run(text, table);
    db.pragma(`schema_version = ${version + 1}`);
  } finally {
    db.pragma("writable_schema = OFF");
    db.unsafeMode(false);
  }
}

/** Migration 6's rewrites of ratchet_tasks' CHECKs: [as migrations 1 and 2 wrote them, as 6 writes them]. */
export const CHECK_SWAPS: readonly (readonly [string, string])[] = [
  [
    "CHECK (status IN ('pending','running','waiting','completing','terminal'))",
    "CHECK (CASE status WHEN 'pending' THEN 1 WHEN 'running' THEN 1 WHEN 'waiting' THEN 1 WHEN 'completing' THEN 1 WHEN 'terminal' THEN 1 ELSE 0 END)",
  ],
  [
    "CHECK (outcome IN ('completed','failed','aborted','upstream_failed','orphaned','faulted'))",
    "CHECK (outcome IS NULL OR CASE outcome WHEN 'completed' THEN 1 WHEN 'failed' THEN 1 WHEN 'aborted' THEN 1 WHEN 'upstream_failed' THEN 1 WHEN 'orphaned' THEN 1 WHEN 'faulted' THEN 1 ELSE 0 END)",
  ],
  [
    "CHECK (held_outcome IN ('completed','failed','aborted','faulted'))",
    "CHECK (held_outcome IS NULL OR CASE held_outcome WHEN 'completed' THEN 1 WHEN 'failed' THEN 1 WHEN 'aborted' THEN 1 WHEN 'faulted' THEN 1 ELSE 0 END)",
  ],
];
