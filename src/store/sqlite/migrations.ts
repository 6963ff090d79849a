/**
 * Numbered schema migrations for SQLite. spec §10.1.
 * Reviewed artefacts: never edit a released migration; add the next number.
 * Index notes (why each exists) sit next to the index.
 */
export const MIGRATIONS: readonly { version: number; sql: string }[] = [
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
];

export const LATEST_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;
