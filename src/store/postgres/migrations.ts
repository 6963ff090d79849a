/**
 * Numbered schema migrations for PostgreSQL. spec §10.1, §13.
 * `{s}` is the (validated, quoted) schema. Columns mirror the SQLite schema so
 * both backends share one row mapping; times are epoch milliseconds (bigint).
 * Never edit a released migration; add the next number.
 */
export const PG_MIGRATIONS: readonly { version: number; sql: string }[] = [
  {
    version: 1,
    sql: `
-- "Now" for every statement: the database clock at transaction start, unless a
-- test passes an override (a fake clock). Workers pass durations, never
-- instants, so a worker with a wrong clock cannot steal or lose leases (spec §11.1).
CREATE FUNCTION {s}.now_ms(override bigint) RETURNS bigint LANGUAGE sql STABLE AS
  $$ SELECT coalesce(override, (extract(epoch from now()) * 1000)::bigint) $$;

CREATE TABLE {s}.ratchet_tasks (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  queue           text    NOT NULL,
  name            text    NOT NULL,
  version         integer NOT NULL,
  input           text    NOT NULL,
  status          text    NOT NULL CHECK (status IN ('pending','running','waiting','completing','terminal')),
  outcome         text    CHECK (outcome IN ('completed','failed','aborted','upstream_failed','orphaned','faulted')),
  result          text,
  error           text,
  priority        integer NOT NULL,
  order_key       bigint  NOT NULL,
  max_ms          bigint  NOT NULL,
  attempts        integer NOT NULL DEFAULT 0,
  max_attempts    integer NOT NULL,
  epoch           integer NOT NULL DEFAULT 0,
  run_after       bigint  NOT NULL,
  wake_at         bigint,
  lease_until     bigint,
  locked_by       text,
  needs_pending   integer NOT NULL DEFAULT 0,
  dependents      integer NOT NULL DEFAULT 0,
  dedupe_key      text,
  job             text,
  abort_requested integer NOT NULL DEFAULT 0,
  progress        double precision,
  progress_note   text,
  created_at      bigint  NOT NULL,
  updated_at      bigint  NOT NULL,
  started_at      bigint,
  claimed_at      bigint,
  ended_at        bigint,
  CHECK ((status = 'terminal') = (outcome IS NOT NULL))
);
-- Claim path: only due, runnable rows are 'pending' (spec §3.4).
CREATE INDEX ratchet_tasks_ready ON {s}.ratchet_tasks (queue, order_key, id) WHERE status = 'pending';
CREATE INDEX ratchet_tasks_lease ON {s}.ratchet_tasks (lease_until) WHERE status = 'running';
CREATE INDEX ratchet_tasks_wake ON {s}.ratchet_tasks (wake_at) WHERE status = 'waiting' AND wake_at IS NOT NULL;
CREATE UNIQUE INDEX ratchet_tasks_dedupe ON {s}.ratchet_tasks (queue, dedupe_key)
  WHERE dedupe_key IS NOT NULL AND (status <> 'terminal' OR outcome = 'completed');
CREATE INDEX ratchet_tasks_job ON {s}.ratchet_tasks (job) WHERE job IS NOT NULL;
CREATE INDEX ratchet_tasks_ended ON {s}.ratchet_tasks (ended_at) WHERE status = 'terminal';

CREATE TABLE {s}.ratchet_deps (
  needs_id bigint NOT NULL,
  task_id  bigint NOT NULL,
  PRIMARY KEY (needs_id, task_id)
);
CREATE INDEX ratchet_deps_task ON {s}.ratchet_deps (task_id);

CREATE TABLE {s}.ratchet_steps (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  task_id    bigint  NOT NULL,
  name       text    NOT NULL,
  result     text    NOT NULL,
  attempt    integer NOT NULL,
  created_at bigint  NOT NULL,
  UNIQUE (task_id, name)
);

CREATE TABLE {s}.ratchet_events (
  id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  task_id bigint  NOT NULL,
  at      bigint  NOT NULL,
  kind    text    NOT NULL,
  attempt integer,
  detail  text
);
CREATE INDEX ratchet_events_task ON {s}.ratchet_events (task_id, id);

-- Live-task counters per queue, split in shards so concurrent settlements of
-- many workers do not queue on one hot row; enqueue sums them under a
-- per-queue advisory lock (spec §2.7).
CREATE TABLE {s}.ratchet_queue_counts (
  queue text    NOT NULL,
  shard integer NOT NULL,
  live  bigint  NOT NULL DEFAULT 0,
  PRIMARY KEY (queue, shard)
);
`,
  },
];

export const PG_LATEST_VERSION = PG_MIGRATIONS[PG_MIGRATIONS.length - 1]!.version;
