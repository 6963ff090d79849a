/**
 * Scenario 10, the reference model: what the store must do, read from the spec
 * and written down again as a pure function of (state, command) with no I/O.
 * The runner (runner.ts) applies each command to this model and to a real
 * store and compares everything a caller can observe.
 *
 * What it covers, by rule: enqueue with dedupe keys, one need and queue depth
 * (spec §2.3, §2.5, §2.7, §2.8); readiness, claim order, lease, token and
 * attempt counting (§3.1–§3.5, §3.9); fenced step commits, heartbeats, progress
 * and settlements (§3.7, §3.8, §4.2, §4.4, §4.5); retry backoff as the engine
 * decides it (§5.2) and the AttemptsExhausted end of a task whose holders all
 * died (§5.4); cascade and release of dependents (§6.1, §6.2); retry() (§6.3);
 * abort of pending, waiting, running and terminal tasks (§7.1–§7.3, §12.6); and
 * release (§8.2).
 *
 * Tasks are named by their model index (enqueue order); the runner maps an
 * index to the store's id. Where the spec leaves a choice to the store (which
 * of several tasks with the same lease end a claim takes first; which queue a
 * multi-queue claim serves first) `claim` returns every allowed outcome and the
 * runner accepts the one the store took.
 *
 * Invariant: every function here is pure (it clones, never mutates its input)
 * and reads time only from `state.now`.
 */
import type { Status } from "../../src/core/model.js";
import { finish, holdsKey, reconcileMarked } from "./ends.js";
import {
  type Branch,
  type ClaimView,
  clone,
  isLive,
  liveIn,
  type ModelConfig,
  type ModelState,
  type MTask,
  type NewTaskSpec,
  one,
  orderKey,
  type WorkerSpec,
} from "./state.js";

export * from "./fenced.js";
export * from "./state.js";

// ------------------------------------------------------------------ enqueue

/** spec §2.3, §2.5, §2.7, §2.8, §1.5. One task per call (a batch of one). */
export function enqueue(s0: ModelState, cfg: ModelConfig, n: NewTaskSpec): Branch[] {
  const s = clone(s0);
  const now = s.now;
  if (n.dedupe !== null) {
    // spec §2.3: a live or completed holder of (queue, key) answers instead; nothing is written.
    const k = s.tasks.findIndex(
      (t) => t.queue === n.queue && t.dedupe === n.dedupe && (isLive(t) || t.outcome === "completed"),
    );
    if (k >= 0) return one(s0, { ok: { task: k, deduped: true, status: s.tasks[k]!.status } });
  }
  let pending = 0;
  let upstream: number | null = null;
  if (n.need !== null) {
    const d = s.tasks[n.need]!;
    if (isLive(d)) pending = 1;
    else if (d.outcome !== "completed") {
      // spec §2.5: the error names the root, carried forward through an upstream_failed need.
      upstream = d.outcome === "upstream_failed" ? (d.error?.upstream ?? n.need) : n.need;
    }
  }
  const runAfter = now + Math.max(0, n.delayMs);
  const status: Status =
    upstream !== null ? "terminal" : pending > 0 || runAfter > now ? "waiting" : "pending";
  if (status !== "terminal" && liveIn(s, n.queue) + 1 > (cfg.maxDepth[n.queue] ?? Infinity)) {
    return one(s0, { error: "RATCHET_QUEUE_FULL" });
  }
  s.tasks.push({
    queue: n.queue,
    name: n.name,
    priority: n.priority,
    maxMs: n.maxMs,
    maxAttempts: n.maxAttempts,
    dedupe: n.dedupe,
    need: n.need,
    createdAt: now,
    runAfter,
    status,
    outcome: upstream !== null ? "upstream_failed" : null,
    attempts: 0,
    epoch: 0,
    leaseUntil: null,
    lockedBy: null,
    wakeAt: status === "waiting" && pending === 0 ? runAfter : null,
    needsPending: pending,
    abortRequested: false,
    startedAt: null,
    claimedAt: null,
    endedAt: upstream !== null ? now : null,
    result: null,
    error: upstream !== null ? { name: "UpstreamFailed", upstream } : null,
    progress: null,
    progressNote: null,
    steps: {},
    reclaims: 0,
  });
  return one(s, { ok: { task: s.tasks.length - 1, deduped: false, status } });
}

// ------------------------------------------------------------------ claim

/**
 * spec §3.1–§3.5, §5.4, one claim of up to `limit` tasks. Returns every allowed outcome.
 *
 * Due timers are promoted first, in every queue (§3.4). Then running tasks whose lease expired, by
 * lease end, at most `limit` of them: each is reclaimed (§3.3) or, when its attempts are used up,
 * ended `failed` with AttemptsExhausted (§5.4) — such a task takes a place in that selection but
 * not in the result. Then pending tasks fill the rest, queue after queue, each queue in (order key,
 * id) order (§3.5). Left to the store: the order among expired tasks whose leases end at the same
 * instant, and which of a worker's queues is served first (the stores rotate it per claim).
 *
 * NOTE (issue 7, scenario 10; reported, not decided): §3.5 says tasks are claimed in order-key
 * order. The stores take expired leases before any pending task and serve a worker's queues in
 * turn, so a reclaim, or a task of another queue, can go ahead of a pending task with a smaller
 * order key. The model follows the stores here until the spec says which reading is meant.
 */
export function claim(s0: ModelState, cfg: ModelConfig, w: WorkerSpec, limit: number): Branch[] {
  const s1 = clone(s0);
  promoteDue(s1);
  const now = s1.now;
  const expired = s1.tasks
    .map((t, k) => ({ t, k }))
    .filter(
      ({ t }) =>
        t.status === "running" &&
        t.leaseUntil !== null &&
        t.leaseUntil <= now &&
        w.queues.includes(t.queue) &&
        w.names.includes(t.name),
    )
    .map(({ t, k }) => ({ k, at: t.leaseUntil! }));
  const out: Branch[] = [];
  for (const order of leaseOrders(expired, limit)) {
    // Reclaims first; a marked task past its attempts may end two ways (see `exhaust`).
    let partial: { s: ModelState; claimed: ClaimView[] }[] = [{ s: clone(s1), claimed: [] }];
    for (const k of order) {
      partial = partial.flatMap(({ s, claimed }) => {
        const t = s.tasks[k]!;
        if (t.attempts >= t.maxAttempts) return exhaust(s, cfg, k).map((x) => ({ s: x, claimed }));
        const x = clone(s);
        x.tasks[k]!.reclaims++;
        return [{ s: x, claimed: [...claimed, take(x, cfg, k, w.id, true)] }];
      });
    }
    for (const p of partial) {
      for (let start = 0; start < w.queues.length; start++) {
        const s = clone(p.s);
        const claimed = [...p.claimed];
        for (let i = 0; i < w.queues.length && claimed.length < limit; i++) {
          const q = w.queues[(start + i) % w.queues.length]!;
          const pending = s.tasks
            .map((t, k) => ({ t, k }))
            .filter(({ t }) => t.status === "pending" && t.queue === q && w.names.includes(t.name))
            .sort((a, b) => orderKey(a.t) - orderKey(b.t) || a.k - b.k);
          for (const { k } of pending.slice(0, limit - claimed.length)) {
            claimed.push(take(s, cfg, k, w.id, false));
          }
        }
        out.push({ state: s, obs: { ok: claimed } });
      }
    }
  }
  return out;
}

/** Every order of `limit` expired tasks that sorts them by lease end (ties in any order). */
function leaseOrders(expired: readonly { k: number; at: number }[], limit: number): number[][] {
  if (limit === 0 || expired.length === 0) return [[]];
  const min = Math.min(...expired.map((e) => e.at));
  const out: number[][] = [];
  for (const e of expired.filter((x) => x.at === min)) {
    const rest = expired.filter((x) => x !== e);
    for (const tail of leaseOrders(rest, limit - 1)) out.push([e.k, ...tail]);
  }
  return out;
}

/** spec §3.4: waiting tasks whose timer is due become pending (every queue, before the claim). */
function promoteDue(s: ModelState): void {
  for (const t of s.tasks) {
    if (t.status === "waiting" && t.wakeAt !== null && t.wakeAt <= s.now) {
      t.status = "pending";
      t.wakeAt = null;
    }
  }
}

/** spec §3.2: running, one more attempt, a new token, a lease of maxMs + grace, the holder. */
function take(s: ModelState, cfg: ModelConfig, k: number, worker: string, reclaimed: boolean): ClaimView {
  const t = s.tasks[k]!;
  t.status = "running";
  t.attempts += 1;
  t.epoch += 1;
  t.leaseUntil = s.now + t.maxMs + cfg.graceMs;
  t.lockedBy = worker;
  t.claimedAt = s.now;
  t.startedAt ??= s.now;
  t.wakeAt = null;
  return {
    task: k,
    reclaimed,
    status: t.status,
    attempts: t.attempts,
    epoch: t.epoch,
    leaseUntil: t.leaseUntil,
    lockedBy: t.lockedBy,
    abortRequested: t.abortRequested,
    startedAt: t.startedAt,
    claimedAt: t.claimedAt,
  };
}

/**
 * spec §5.4: every attempt was used by holders that died; the claim ends the task `failed`
 * (AttemptsExhausted, naming the last holder) without running it. Returns the allowed results.
 *
 * A task that also carries an abort mark ends `aborted` instead (§5.4, §7.2: the abort was asked
 * for; the stores ended it `failed` until issue 6's session settled the rule). `cfg.strictMarkedExhausted`
 * = "failed" makes the model expect the old end, to show that the simulation tells them apart.
 */
function exhaust(s0: ModelState, cfg: ModelConfig, k: number): ModelState[] {
  const t0 = s0.tasks[k]!;
  const s = clone(s0);
  if (!t0.abortRequested || cfg.strictMarkedExhausted === "failed")
    finish(s, k, "failed", { name: "AttemptsExhausted", holder: t0.lockedBy ?? "unknown" });
  else finish(s, k, "aborted", { name: "Aborted" });
  return [s];
}

// ------------------------------------------------------------------ operator actions

/**
 * spec §7.1–§7.3, §12.6. A task not yet terminal gets the durable mark; then every marked task that
 * holds no worker (pending or waiting, in id order) ends `aborted` — `orphaned` when no code is
 * registered for it — and a running one keeps running until its holder sees the mark (§7.2).
 */
export function abort(s0: ModelState, cfg: ModelConfig, k: number | null): Branch[] {
  if (k === null) return one(s0, { error: "RATCHET_NOT_FOUND" });
  const t0 = s0.tasks[k]!;
  if (t0.status === "terminal")
    return one(s0, { ok: { state: "terminal", outcome: t0.outcome, marked: [] } });
  const s = clone(s0);
  s.tasks[k]!.abortRequested = true;
  reconcileMarked(s, cfg);
  const t = s.tasks[k]!;
  if (t.status !== "terminal") return one(s, { ok: { state: "marked", marked: [k] } });
  if (t.outcome === "aborted" || t.outcome === "orphaned")
    return one(s, { ok: { state: t.outcome, marked: [] } });
  // Ended otherwise in the same call: a marked predecessor was finished first and failed it (§6.1).
  return one(s, { ok: { state: "terminal", outcome: t.outcome, marked: [] } });
}

/**
 * spec §6.3: a failed, aborted, faulted or orphaned task goes back to pending (waiting while its
 * need is live) with attempts 0 and no mark; its dependents that failed because of it wait again.
 */
export function retry(s0: ModelState, k: number | null): Branch[] {
  if (k === null) return one(s0, { error: "RATCHET_NOT_FOUND" });
  const t0 = s0.tasks[k]!;
  if (t0.status !== "terminal" || t0.outcome === "completed" || t0.outcome === "upstream_failed")
    return one(s0, { error: "RATCHET_INVALID_STATE" });
  const need = t0.need === null ? null : s0.tasks[t0.need]!;
  if (need && !isLive(need) && need.outcome !== "completed")
    return one(s0, { error: "RATCHET_INVALID_STATE" });
  if (t0.dedupe !== null && holdsKey(s0, t0.queue, t0.dedupe, k))
    return one(s0, { error: "RATCHET_INVALID_STATE" });
  const s = clone(s0);
  const t = s.tasks[k]!;
  const livePreds = need && isLive(need) ? 1 : 0;
  Object.assign(t, {
    status: livePreds > 0 ? "waiting" : "pending",
    outcome: null,
    result: null,
    error: null,
    attempts: 0,
    abortRequested: false,
    needsPending: livePreds,
    wakeAt: null,
    runAfter: s.now,
    endedAt: null,
    progress: null,
    progressNote: null,
  } satisfies Partial<MTask>);
  // Dependents reached through upstream_failed tasks wait on their need again (one need each here).
  const collided: number[] = [];
  const queue = [k];
  while (queue.length > 0) {
    const from = queue.shift()!;
    s.tasks.forEach((d, j) => {
      if (d.need !== from || d.outcome !== "upstream_failed") return;
      if (d.dedupe !== null && holdsKey(s, d.queue, d.dedupe, j)) {
        collided.push(j);
        return;
      }
      Object.assign(d, {
        status: "waiting",
        outcome: null,
        error: null,
        needsPending: 1,
        wakeAt: null,
        endedAt: null,
        attempts: 0,
      } satisfies Partial<MTask>);
      queue.push(j);
    });
  }
  if (collided.length === 0) return one(s, { ok: { task: k } });
  // A dependent whose dedupe key a live or completed task holds (the root itself, say) cannot wait
  // again without two live holders of one key (§2.3). §6.3 does not say what then; its _Why_ says
  // a retry never breaks a rule about keys. Allowed: refuse the retry (INVALID_STATE), or leave
  // that dependent upstream_failed, as a dependent with another failed need stays.
  return [
    { state: s, obs: { ok: { task: k } } },
    { state: s0, obs: { error: "RATCHET_INVALID_STATE" } },
  ];
}
