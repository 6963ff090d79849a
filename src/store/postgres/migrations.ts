/**
 * Numbered schema migrations for PostgreSQL. spec §10.1, §13.
 * `{s}` is the (validated, quoted) schema. Columns mirror the SQLite schema so
 * both backends share one row mapping; times are epoch milliseconds (bigint).
 * Never edit a released migration; add the next number.
 */
import { DISPATCH_SCHEMA_PG } from "../dispatch/schema.js";
import { OUTBOX_SCHEMA_PG } from "../outbox/schema.js";
import { PULLS_SCHEMA_PG } from "../pulls/schema.js";

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
  {
    version: 2,
    sql: `
-- One round trip per enqueue of a task without needs (the common case): lock
-- the queue, dedupe, admission check, insert, count, notify. Measured: the
-- statement-by-statement path cost ~7 round trips, 623 enqueues/s single.
-- {n} is the bare schema name (validated), used in the advisory lock key so
-- this path and the general one lock the same queue the same way.
CREATE FUNCTION {s}.enqueue_one(p_queue text, p_name text, p_version integer, p_input text, p_priority integer,
    p_max_ms bigint, p_max_attempts integer, p_delay bigint, p_dedupe text, p_job text, p_max_depth bigint,
    p_shard integer, p_now bigint, p_channel text)
  RETURNS TABLE (task_id bigint, deduped boolean, task_status text) LANGUAGE plpgsql AS $$
DECLARE
  v_now bigint := {s}.now_ms(p_now);
  v_status text := CASE WHEN p_delay > 0 THEN 'waiting' ELSE 'pending' END;
  v_id bigint;
  v_found_status text;
  v_live bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('ratchet-queue:{n}:' || p_queue));
  IF p_dedupe IS NOT NULL THEN
    SELECT t.id, t.status INTO v_id, v_found_status FROM {s}.ratchet_tasks t
      WHERE t.queue = p_queue AND t.dedupe_key = p_dedupe AND (t.status <> 'terminal' OR t.outcome = 'completed');
    IF FOUND THEN
      RETURN QUERY SELECT v_id, true, v_found_status;
      RETURN;
    END IF;
  END IF;
  SELECT coalesce(sum(c.live), 0) INTO v_live FROM {s}.ratchet_queue_counts c WHERE c.queue = p_queue;
  IF v_live + 1 > p_max_depth THEN
    RAISE EXCEPTION 'ratchet queue full' USING ERRCODE = 'RQ001', DETAIL = v_live::text, HINT = p_queue;
  END IF;
  INSERT INTO {s}.ratchet_tasks (queue, name, version, input, status, priority, order_key, max_ms, max_attempts,
      run_after, wake_at, dedupe_key, job, created_at, updated_at)
    VALUES (p_queue, p_name, p_version, p_input, v_status, p_priority, v_now - p_priority::bigint * 360000, p_max_ms,
      p_max_attempts, v_now + p_delay, CASE WHEN p_delay > 0 THEN v_now + p_delay END, p_dedupe, p_job, v_now, v_now)
    RETURNING id INTO v_id;
  INSERT INTO {s}.ratchet_queue_counts (queue, shard, live) VALUES (p_queue, p_shard, 1)
    ON CONFLICT (queue, shard) DO UPDATE SET live = {s}.ratchet_queue_counts.live + 1;
  IF v_status = 'pending' THEN
    PERFORM pg_notify(p_channel, '');
  END IF;
  RETURN QUERY SELECT v_id, false, v_status;
END $$;

-- A batch in one round trip: enqueue_one per element, in order, in the
-- caller's transaction (a full queue raises and rolls the whole batch back).
CREATE FUNCTION {s}.enqueue_batch(p_queue text[], p_name text[], p_version integer[], p_input text[],
    p_priority integer[], p_max_ms bigint[], p_max_attempts integer[], p_delay bigint[], p_dedupe text[],
    p_job text[], p_max_depth bigint[], p_shard integer, p_now bigint, p_channel text)
  RETURNS TABLE (task_id bigint, deduped boolean, task_status text) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. coalesce(array_length(p_queue, 1), 0) LOOP
    RETURN QUERY SELECT * FROM {s}.enqueue_one(p_queue[i], p_name[i], p_version[i], p_input[i], p_priority[i],
      p_max_ms[i], p_max_attempts[i], p_delay[i], p_dedupe[i], p_job[i], p_max_depth[i], p_shard, p_now, p_channel);
  END LOOP;
END $$;
`,
  },
  {
    version: 3,
    sql: `
-- Task trees (spec §12). Columns are added (not a rebuilt table) so the upgrade is cheap on a big table.
ALTER TABLE {s}.ratchet_tasks ADD COLUMN owner_id bigint;
ALTER TABLE {s}.ratchet_tasks ADD COLUMN scope text;
ALTER TABLE {s}.ratchet_tasks ADD COLUMN background integer NOT NULL DEFAULT 0;
ALTER TABLE {s}.ratchet_tasks ADD COLUMN detached integer NOT NULL DEFAULT 0;
ALTER TABLE {s}.ratchet_tasks ADD COLUMN spawn_name text;
ALTER TABLE {s}.ratchet_tasks ADD COLUMN owns integer NOT NULL DEFAULT 0;
ALTER TABLE {s}.ratchet_tasks ADD COLUMN watched integer NOT NULL DEFAULT 0;
ALTER TABLE {s}.ratchet_tasks ADD COLUMN held_outcome text CHECK (held_outcome IN ('completed','failed','aborted','faulted'));
ALTER TABLE {s}.ratchet_tasks ADD COLUMN wait_on text;
ALTER TABLE {s}.ratchet_tasks ADD COLUMN wait_policy text;
ALTER TABLE {s}.ratchet_tasks ADD COLUMN event_name text;
ALTER TABLE {s}.ratchet_tasks ADD COLUMN checkpoint text;
ALTER TABLE {s}.ratchet_tasks ADD COLUMN blocked text;
-- Children by owner, and idempotent spawn: a rerun of the owner finds the same child (spec §12.1).
CREATE UNIQUE INDEX ratchet_tasks_spawn ON {s}.ratchet_tasks (owner_id, spawn_name) WHERE owner_id IS NOT NULL;
-- Live tasks with an abort mark: the roots of cascades (spec §12.5); stays small.
CREATE INDEX ratchet_tasks_marked ON {s}.ratchet_tasks (id) WHERE abort_requested = 1 AND status <> 'terminal';
-- Held outcomes to finalize (spec §12.4).
CREATE INDEX ratchet_tasks_completing ON {s}.ratchet_tasks (id) WHERE status = 'completing';
-- Parked tasks by what they wait for: task waits, drains, events (spec §12.3, §12.7).
CREATE INDEX ratchet_tasks_parked ON {s}.ratchet_tasks (wait_on, event_name) WHERE status = 'waiting' AND wait_on IS NOT NULL;
-- Live tasks of a named scope (idle, abortScope).
CREATE INDEX ratchet_tasks_scope ON {s}.ratchet_tasks (scope) WHERE scope IS NOT NULL AND status <> 'terminal';

-- waitFor edges of parked waiters; deleted when the waiter wakes.
CREATE TABLE {s}.ratchet_waits (
  waiter_id bigint NOT NULL,
  member_id bigint NOT NULL,
  PRIMARY KEY (waiter_id, member_id)
);
CREATE INDEX ratchet_waits_member ON {s}.ratchet_waits (member_id);

-- Signals (spec §12.7): the first per name is kept, so a signal sent before the wait is not lost.
CREATE TABLE {s}.ratchet_signals (
  name       text PRIMARY KEY,
  payload    text NOT NULL,
  created_at bigint NOT NULL
);

-- Definitions some Ratchet instance registered: a task whose name is not here has no code (orphaned when aborted).
CREATE TABLE {s}.ratchet_definitions (
  name       text PRIMARY KEY,
  version    integer NOT NULL,
  has_abort  integer NOT NULL,
  updated_at bigint NOT NULL
);
`,
  },
  {
    version: 4,
    sql: `
-- Schedules (spec §14.1–§14.4): one row per schedule; next_at is the first unfired tick. A worker wins a
-- tick by a conditional write on next_at; firing_at marks a tick won but not yet enqueued (crash repair).
CREATE TABLE {s}.ratchet_schedules (
  name       text PRIMARY KEY,
  cron       text NOT NULL,
  timezone   text,
  task       text NOT NULL,
  input      text NOT NULL,
  queue      text,
  priority   integer,
  missed     text NOT NULL CHECK (missed IN ('once','skip')),
  grace_ms   bigint NOT NULL,
  next_at    bigint NOT NULL,
  firing_at  bigint,
  last_at    bigint,
  last_task  bigint,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL
);
CREATE INDEX ratchet_schedules_due ON {s}.ratchet_schedules (next_at);
`,
  },
  {
    version: 5,
    sql: `
-- Throttle and debounce keys (spec §14.6–§14.7): the task a key currently stands for, when the key was
-- last used, and when its debounce window opened.
CREATE TABLE {s}.ratchet_flow_keys (
  queue    text NOT NULL,
  kind     text NOT NULL CHECK (kind IN ('throttle','debounce')),
  key      text NOT NULL,
  task_id  bigint NOT NULL,
  at       bigint NOT NULL,
  first_at bigint NOT NULL,
  PRIMARY KEY (queue, kind, key)
);
`,
  },
  {
    version: 6,
    sql: `
-- Flow control inside the claim (spec §14.9–§14.12). seat: the concurrency group and key a task runs
-- under; rate: the buckets and costs it is charged at each start (JSON); fair_key: its fairness key.
ALTER TABLE {s}.ratchet_tasks ADD COLUMN seat text;
ALTER TABLE {s}.ratchet_tasks ADD COLUMN rate text;
ALTER TABLE {s}.ratchet_tasks ADD COLUMN fair_key text;
-- Running tasks of a seat, counted at each claim of the seat. Only running rows are in it, so it stays
-- a few pages and a claim or settle moves one small entry (an index over every seated row measured
-- ~35% off a seated drain: each status change rewrote entries in a big index).
CREATE INDEX ratchet_tasks_seat ON {s}.ratchet_tasks (seat) WHERE status = 'running' AND seat IS NOT NULL;
-- Tasks parked on a full seat, in claim order: woken one by one as places free.
CREATE INDEX ratchet_tasks_seat_parked ON {s}.ratchet_tasks (seat, order_key, id) WHERE status = 'waiting' AND wait_on = 'seat';
-- Run-time seat limits of a group or one key; they override the limit in code.
CREATE TABLE {s}.ratchet_seat_limits (
  seat       text PRIMARY KEY,
  lim        integer NOT NULL,
  updated_at bigint NOT NULL
);
-- Token buckets: level measured at 'at', the wake-up time of the next parked task, a 429 pause,
-- and the configuration the last claimer charged it with.
CREATE TABLE {s}.ratchet_buckets (
  bucket       text PRIMARY KEY,
  tokens       double precision NOT NULL,
  at           bigint NOT NULL,
  next_wake    bigint NOT NULL,
  paused_until bigint NOT NULL,
  lim          double precision NOT NULL,
  period_ms    bigint NOT NULL,
  burst        double precision NOT NULL
);
-- Fair queueing: the start tag the next task of a key gets.
CREATE TABLE {s}.ratchet_fair (
  queue   text NOT NULL,
  key     text NOT NULL,
  next_at bigint NOT NULL,
  PRIMARY KEY (queue, key)
);
CREATE INDEX ratchet_fair_next ON {s}.ratchet_fair (next_at);
-- A task that leaves 'running' frees its seat: the first parked task of the seat becomes pending.
-- A trigger, so that no transition (settle, park, fail, cancel, reclaim) can forget it. It takes the
-- flow-control lock, which a claim holds from its count to its commit, so a task parked by a
-- concurrent claim is seen (src/store/gates.ts explains why one lock). A parked row a claimer holds is
-- skipped, not waited for (that wait closed a deadlock), and the outer condition is checked again on
-- the locked row. A claim that parks a task on a full seat is not a release.
CREATE FUNCTION {s}.ratchet_seat_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('ratchet-gates:' || TG_TABLE_SCHEMA));
  UPDATE {s}.ratchet_tasks SET status = 'pending', wait_on = NULL, updated_at = NEW.updated_at
  WHERE id = (SELECT id FROM {s}.ratchet_tasks WHERE seat = OLD.seat AND status = 'waiting' AND wait_on = 'seat'
              ORDER BY order_key, id LIMIT 1 FOR UPDATE SKIP LOCKED)
    AND status = 'waiting' AND wait_on = 'seat';
  IF FOUND THEN
    PERFORM pg_notify('ratchet_' || TG_TABLE_SCHEMA, '');
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER ratchet_seat_release AFTER UPDATE OF status ON {s}.ratchet_tasks FOR EACH ROW
WHEN (OLD.status = 'running' AND NEW.status <> 'running' AND OLD.seat IS NOT NULL
  AND NOT (NEW.status = 'waiting' AND NEW.wait_on IS NOT DISTINCT FROM 'seat'))
EXECUTE FUNCTION {s}.ratchet_seat_release();
`,
  },
  {
    version: 7,
    sql: `
-- A batch without dedupe keys in set form (spec §2.2, §2.5): one INSERT of every row from the arrays,
-- one queue-count upsert and one depth check per queue, one notify. The loop of version 2 paid a
-- function call, a count upsert of the same row and a notify check per element: 1,000-entry batches
-- ran at ~6k tasks/s against ~40k/s for a set-based insert of the same rows (peers harness, W1).
-- Equivalent to the loop: queue depth is checked against every entry the batch adds to the queue (a
-- full queue rolls the whole batch back either way), ids increase in batch order (the INSERT takes the
-- rows ORDER BY their position, and identity values are drawn in that order), and the result is
-- returned in that order. A batch with a dedupe key keeps the loop: a key may repeat within the batch.
CREATE OR REPLACE FUNCTION {s}.enqueue_batch(p_queue text[], p_name text[], p_version integer[], p_input text[],
    p_priority integer[], p_max_ms bigint[], p_max_attempts integer[], p_delay bigint[], p_dedupe text[],
    p_job text[], p_max_depth bigint[], p_shard integer, p_now bigint, p_channel text)
  RETURNS TABLE (task_id bigint, deduped boolean, task_status text) LANGUAGE plpgsql AS $$
DECLARE
  v_now bigint := {s}.now_ms(p_now);
  v_live bigint;
  r record;
BEGIN
  IF EXISTS (SELECT 1 FROM unnest(p_dedupe) AS d(k) WHERE d.k IS NOT NULL) THEN
    FOR i IN 1 .. coalesce(array_length(p_queue, 1), 0) LOOP
      RETURN QUERY SELECT * FROM {s}.enqueue_one(p_queue[i], p_name[i], p_version[i], p_input[i], p_priority[i],
        p_max_ms[i], p_max_attempts[i], p_delay[i], p_dedupe[i], p_job[i], p_max_depth[i], p_shard, p_now, p_channel);
    END LOOP;
    RETURN;
  END IF;
  -- Queue locks in name order, as every enqueue takes them (no deadlock between two batches).
  FOR r IN SELECT x.q, count(*) AS n, min(x.d) AS max_depth FROM unnest(p_queue, p_max_depth) AS x(q, d)
           GROUP BY x.q ORDER BY x.q LOOP
    PERFORM pg_advisory_xact_lock(hashtext('ratchet-queue:{n}:' || r.q));
    SELECT coalesce(sum(c.live), 0) INTO v_live FROM {s}.ratchet_queue_counts c WHERE c.queue = r.q;
    IF v_live + r.n > r.max_depth THEN
      RAISE EXCEPTION 'ratchet queue full' USING ERRCODE = 'RQ001', DETAIL = v_live::text, HINT = r.q;
    END IF;
    INSERT INTO {s}.ratchet_queue_counts (queue, shard, live) VALUES (r.q, p_shard, r.n)
      ON CONFLICT (queue, shard) DO UPDATE SET live = {s}.ratchet_queue_counts.live + EXCLUDED.live;
  END LOOP;
  RETURN QUERY
    WITH ins AS (
      INSERT INTO {s}.ratchet_tasks (queue, name, version, input, status, priority, order_key, max_ms, max_attempts,
          run_after, wake_at, job, created_at, updated_at)
        SELECT x.q, x.nm, x.v, x.inp, CASE WHEN x.dl > 0 THEN 'waiting' ELSE 'pending' END, x.pr,
          v_now - x.pr::bigint * 360000, x.mm, x.ma, v_now + x.dl, CASE WHEN x.dl > 0 THEN v_now + x.dl END, x.jb,
          v_now, v_now
        FROM unnest(p_queue, p_name, p_version, p_input, p_priority, p_max_ms, p_max_attempts, p_delay, p_job)
          WITH ORDINALITY AS x(q, nm, v, inp, pr, mm, ma, dl, jb, ord)
        ORDER BY x.ord
        RETURNING id, status)
    SELECT ins.id, false, ins.status FROM ins ORDER BY ins.id;
  IF EXISTS (SELECT 1 FROM unnest(p_delay) AS d(ms) WHERE d.ms <= 0) THEN
    PERFORM pg_notify(p_channel, '');
  END IF;
END $$;
`,
  },
  {
    version: 8,
    sql: `
-- Room on every page for the next version of each row. A task's row is rewritten whole by its
-- claim and again by its settlement (never a HOT update: status is in the partial indexes'
-- predicates). On full pages each rewrite went to another page, and PostgreSQL first logs a lock of
-- the old version while it finds one (a Heap/LOCK record per task, pg_walinspect). With half of
-- each page free, the claim's versions fit beside the originals, and the settlement's fit once
-- the page is pruned of the claim's dead ones. Drains of 60,000 at c16 (bench/drain.ts, medians
-- of pairs): 987 → 776 bytes of WAL per task. Ratchet's claims of 500 and their settlements, run
-- alone over 60,000 tasks (node dist/bench/pgshape.js --rounds 3, pg_stat_statements): 19.4 → 17.8
-- µs of server time per task. The price: pending rows take twice the pages until they are
-- rewritten. Applies to pages filled from now on.
ALTER TABLE {s}.ratchet_tasks SET (fillfactor = 50);
`,
  },
  {
    version: 9,
    sql: `
-- Single enqueues that arrived together (enqueue.ts, Singles), in one statement and one commit, each
-- its own enqueue as enqueue_one does it (spec §2.3, §2.7): in order, deduped or admitted on its own; a
-- full queue refuses that entry alone (task_id NULL, full_live the depth it found) and writes nothing
-- for it. A queue's lock is held through the commit (admission counts what is committed), so single
-- enqueues to one queue from many callers committed one after another: during a slow fsync every
-- later one queued on the lock and then paid a commit of its own (W3 on a VM with disk stalls: the
-- enqueue call's p99 118–879 ms against graphile-worker's 26–121, peers/w3trace.ts). Together they
-- pay one. Locks in the byte order of the names, as the general path takes them (its names sorted in
-- JS), whatever the database's collation.
CREATE FUNCTION {s}.enqueue_each(p_queue text[], p_name text[], p_version integer[], p_input text[],
    p_priority integer[], p_max_ms bigint[], p_max_attempts integer[], p_delay bigint[], p_dedupe text[],
    p_job text[], p_max_depth bigint[], p_shard integer, p_now bigint, p_channel text)
  RETURNS TABLE (task_id bigint, deduped boolean, task_status text, full_live bigint) LANGUAGE plpgsql AS $$
DECLARE
  v_now bigint := {s}.now_ms(p_now);
  v_status text;
  v_id bigint;
  v_found_status text;
  v_live bigint;
  v_notify boolean := false;
  r record;
BEGIN
  FOR r IN SELECT DISTINCT x.q COLLATE "C" AS q FROM unnest(p_queue) AS x(q) ORDER BY 1 LOOP
    PERFORM pg_advisory_xact_lock(hashtext('ratchet-queue:{n}:' || r.q));
  END LOOP;
  FOR i IN 1 .. coalesce(array_length(p_queue, 1), 0) LOOP
    IF p_dedupe[i] IS NOT NULL THEN
      SELECT t.id, t.status INTO v_id, v_found_status FROM {s}.ratchet_tasks t
        WHERE t.queue = p_queue[i] AND t.dedupe_key = p_dedupe[i] AND (t.status <> 'terminal' OR t.outcome = 'completed');
      IF FOUND THEN
        RETURN QUERY SELECT v_id, true, v_found_status, NULL::bigint;
        CONTINUE;
      END IF;
    END IF;
    SELECT coalesce(sum(c.live), 0) INTO v_live FROM {s}.ratchet_queue_counts c WHERE c.queue = p_queue[i];
    IF v_live + 1 > p_max_depth[i] THEN
      RETURN QUERY SELECT NULL::bigint, false, NULL::text, v_live;
      CONTINUE;
    END IF;
    v_status := CASE WHEN p_delay[i] > 0 THEN 'waiting' ELSE 'pending' END;
    INSERT INTO {s}.ratchet_tasks (queue, name, version, input, status, priority, order_key, max_ms, max_attempts,
        run_after, wake_at, dedupe_key, job, created_at, updated_at)
      VALUES (p_queue[i], p_name[i], p_version[i], p_input[i], v_status, p_priority[i],
        v_now - p_priority[i]::bigint * 360000, p_max_ms[i], p_max_attempts[i], v_now + p_delay[i],
        CASE WHEN p_delay[i] > 0 THEN v_now + p_delay[i] END, p_dedupe[i], p_job[i], v_now, v_now)
      RETURNING id INTO v_id;
    INSERT INTO {s}.ratchet_queue_counts (queue, shard, live) VALUES (p_queue[i], p_shard, 1)
      ON CONFLICT (queue, shard) DO UPDATE SET live = {s}.ratchet_queue_counts.live + 1;
    v_notify := v_notify OR v_status = 'pending';
    RETURN QUERY SELECT v_id, false, v_status, NULL::bigint;
  END LOOP;
  IF v_notify THEN
    PERFORM pg_notify(p_channel, '');
  END IF;
END $$;
`,
  },
  {
    version: 10,
    sql: `
-- Durable output streams (spec §16): see the SQLite migration 7 for why a row per batch.
CREATE TABLE {s}.ratchet_streams (
  task_id    bigint  NOT NULL,
  name       text    NOT NULL,
  length     bigint  NOT NULL,
  bytes      bigint  NOT NULL,
  closed     integer NOT NULL DEFAULT 0,
  created_at bigint  NOT NULL,
  updated_at bigint  NOT NULL,
  PRIMARY KEY (task_id, name)
);
CREATE TABLE {s}.ratchet_stream_chunks (
  task_id bigint  NOT NULL,
  name    text    NOT NULL,
  first   bigint  NOT NULL,
  count   integer NOT NULL,
  data    text    NOT NULL,
  PRIMARY KEY (task_id, name, first)
);
`,
  },
  {
    version: 11,
    sql: `
-- Conversations (spec §17): see the SQLite migration 8.
CREATE TABLE {s}.ratchet_conversations (
  id            text    PRIMARY KEY,
  title         text,
  metadata      text,
  owner_task_id bigint,
  parent_id     text,
  parent_seq    bigint,
  next_seq      bigint  NOT NULL DEFAULT 0,
  run_task_id   bigint,
  created_at    bigint  NOT NULL,
  updated_at    bigint  NOT NULL
);
CREATE INDEX ratchet_conversations_owner ON {s}.ratchet_conversations (owner_task_id) WHERE owner_task_id IS NOT NULL;
CREATE TABLE {s}.ratchet_entries (
  conversation_id text    NOT NULL,
  seq             bigint  NOT NULL,
  kind            text    NOT NULL,
  name            text,
  data            text    NOT NULL,
  task_id         bigint,
  submission_id   bigint,
  created_at      bigint  NOT NULL,
  PRIMARY KEY (conversation_id, seq)
);
CREATE INDEX ratchet_entries_task ON {s}.ratchet_entries (task_id, conversation_id, seq) WHERE task_id IS NOT NULL;
CREATE TABLE {s}.ratchet_conversation_state (
  conversation_id text   NOT NULL,
  key             text   NOT NULL,
  value           text   NOT NULL,
  updated_at      bigint NOT NULL,
  PRIMARY KEY (conversation_id, key)
);
CREATE TABLE {s}.ratchet_conversation_commits (
  conversation_id text NOT NULL,
  key             text NOT NULL,
  result          text NOT NULL,
  PRIMARY KEY (conversation_id, key)
);
CREATE TABLE {s}.ratchet_submissions (
  id              bigint  GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  conversation_id text    NOT NULL,
  request_id      text,
  mode            text    NOT NULL,
  input           text    NOT NULL,
  status          text    NOT NULL,
  reason          text,
  entry_seq       bigint,
  answer_seq      bigint,
  run_task_id     bigint,
  created_at      bigint  NOT NULL,
  settled_at      bigint
);
CREATE UNIQUE INDEX ratchet_submissions_request ON {s}.ratchet_submissions (conversation_id, request_id) WHERE request_id IS NOT NULL;
CREATE INDEX ratchet_submissions_inbox ON {s}.ratchet_submissions (conversation_id, status, id);
CREATE INDEX ratchet_submissions_run ON {s}.ratchet_submissions (run_task_id) WHERE run_task_id IS NOT NULL;
`,
  },
  {
    version: 12,
    sql: `
-- Circuit breakers and the usage ledger (spec §18.6, §18.8): see the SQLite migration 9.
CREATE TABLE {s}.ratchet_breakers (
  key          text    PRIMARY KEY,
  state        text    NOT NULL,
  failures     integer NOT NULL,
  window_start bigint  NOT NULL,
  opened_at    bigint  NOT NULL,
  probe_until  bigint  NOT NULL,
  updated_at   bigint  NOT NULL
);
CREATE TABLE {s}.ratchet_usage (
  id              bigint  GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  key             text    NOT NULL UNIQUE,
  status          text    NOT NULL,
  conversation_id text,
  task_id         bigint,
  provider        text    NOT NULL,
  model           text    NOT NULL,
  route           text    NOT NULL,
  input_tokens    bigint  NOT NULL,
  output_tokens   bigint  NOT NULL,
  cached_tokens   bigint  NOT NULL,
  reasoning_tokens bigint NOT NULL,
  cost            double precision NOT NULL,
  created_at      bigint  NOT NULL
);
CREATE INDEX ratchet_usage_conversation ON {s}.ratchet_usage (conversation_id, created_at) WHERE conversation_id IS NOT NULL;
CREATE INDEX ratchet_usage_task ON {s}.ratchet_usage (task_id) WHERE task_id IS NOT NULL;
CREATE INDEX ratchet_usage_created ON {s}.ratchet_usage (created_at);
`,
  },
  {
    version: 13,
    // The dispatch layer's items, attempts, timelines and seats (spec §20.18); the text is shared with SQLite.
    sql: DISPATCH_SCHEMA_PG,
  },
  {
    version: 14,
    sql: `
-- A closed conversation takes no more input (spec §17.8): see the SQLite migration 11.
ALTER TABLE {s}.ratchet_conversations ADD COLUMN closed_at bigint;
`,
  },
  {
    version: 15,
    sql: `
-- Dispatch (spec §20.29): see the SQLite migration 12.
ALTER TABLE {s}.ratchet_dispatch_attempts ADD COLUMN usage_resets_at bigint;
ALTER TABLE {s}.ratchet_dispatch_items ADD COLUMN not_before bigint;
`,
  },
  {
    version: 16,
    // The outbox's facts and destinations (spec §21.1, §21.6); the text is shared with SQLite.
    sql: OUTBOX_SCHEMA_PG,
  },
  {
    version: 17,
    // Linked pull requests, their links to attempts, and items' waits on them (spec §22.4, §22.7); the text is shared with SQLite.
    sql: PULLS_SCHEMA_PG,
  },
];

export const PG_LATEST_VERSION = PG_MIGRATIONS[PG_MIGRATIONS.length - 1]!.version;
