/**
 * The dispatch runner (spec §20.22). Each pass, in order:
 * 1. starts attempts for open items (seats and backoff permitting) and
 *    launches their sessions;
 * 2. leases the live attempts it will read, takes a reading of each
 *    session, asks the reconcile table, and applies the decision with
 *    guarded writes; a sleeping attempt whose wake was requested tries for a
 *    seat (over the cap once `seatlessSeconds` passed);
 * 3. gives its leases back;
 * 4. forgets what is due (kept sessions, then sessions of settled attempts).
 * Several runners may share a store: leases keep each attempt with one of
 * them at a time, and a runner killed anywhere in a pass leaves only leases
 * that lapse. Time is the store's clock (`store.now()`), read once a pass.
 *
 * Modes of `run()`: running (a pass, then a wait of `intervalMs` or until
 * `poke()`), stopping (`stop()` was called: the pass in progress finishes,
 * no new one starts), stopped (`run()` resolved).
 */

import type { SessionReading } from "../../core/dispatch/model.js";
import { type JsonValue, renderSpawn } from "../../core/dispatch/route.js";
import { forgetCutoff, isKeptDue, strayWatchCutoff } from "../../core/dispatch/sessions.js";
import { pickReadingAction } from "../../core/dispatch/table.js";
import { DEFAULT_SLEEP } from "../../core/dispatch/timeouts.js";
import type { AttemptRow, ItemRow } from "../../store/dispatch/ops.js";
import type { WorkerAdapter } from "../workers/adapter.js";
import { type Applied, applyDecision, wake, wakeIsOverdue } from "./apply.js";
import { RunnerContext, type RunnerOptions } from "./context.js";
import { launch } from "./launch.js";
import { scanOutput } from "./output.js";

export interface PassReport {
  readonly started: string[];
  readonly decisions: { attempt: string; rule: string; action: string; applied: Applied }[];
  readonly forgotten: string[];
  readonly failed: string[];
  readonly errors: { attempt: string | null; message: string }[];
  /** Pull requests newly linked from sessions' output (spec §22.11). */
  readonly linked: { attempt: string; url: string }[];
  /** Output scans that could not read or link (the attempts were reconciled all the same). */
  readonly outputFailed: { attempt: string; message: string }[];
}

export class DispatchRunner {
  readonly ctx: RunnerContext;
  #stopping = false;
  #wakeUp: (() => void) | null = null;

  constructor(o: RunnerOptions) {
    this.ctx = new RunnerContext(o);
  }

  get id(): string {
    return this.ctx.id;
  }

  /** One pass (see the class comment). Never throws for one attempt's trouble: it is in `errors`. */
  async pass(): Promise<PassReport> {
    const report: PassReport = {
      started: [],
      decisions: [],
      forgotten: [],
      failed: [],
      errors: [],
      linked: [],
      outputFailed: [],
    };
    this.ctx.backoffUntil.clear();
    for (const s of await this.ctx.ops.seats())
      if (s.backoffUntil !== null) this.ctx.backoffUntil.set(s.worker, s.backoffUntil);
    await this.#claim(report);
    const now = await this.ctx.store.now();
    const leased = await this.ctx.ops.leaseAttempts(this.ctx.id, this.ctx.leaseMs, this.ctx.batch);
    try {
      for (const a of leased) {
        try {
          await this.#reconcile(a, now, report);
        } catch (e) {
          report.errors.push({ attempt: a.id, message: (e as Error).message });
        }
      }
    } finally {
      if (leased.length > 0)
        await this.ctx.ops.releaseAttempts(
          this.ctx.id,
          leased.map((a) => a.id),
        );
    }
    for (const step of [() => this.#strays(now, report), () => this.#forget(now, report)]) {
      try {
        await step();
      } catch (e) {
        report.errors.push({ attempt: null, message: (e as Error).message });
      }
    }
    return report;
  }

  /** Open items, a page at a time: up to `batch` starts, and at most 10 pages read per pass. */
  async #claim(report: PassReport): Promise<void> {
    let after: string | null = null;
    for (let page = 0; page < 10 && report.started.length < this.ctx.batch; page++) {
      const items = await this.ctx.ops.listItems({ state: "open", after, limit: this.ctx.batch });
      for (const item of items) {
        if (report.started.length >= this.ctx.batch) return;
        try {
          await this.#claimOne(item, report);
        } catch (e) {
          report.errors.push({ attempt: null, message: `item ${item.id}: ${(e as Error).message}` });
        }
      }
      if (items.length < this.ctx.batch) return;
      after = items.at(-1)!.id;
    }
  }

  async #claimOne(item: ItemRow, report: PassReport): Promise<void> {
    const { ctx } = this;
    const step = ctx.pipelines.get(item.pipeline)?.steps.get(item.step);
    const worker = step ? ctx.workers.get(step.worker) : undefined;
    // spec §22.7: an item waiting on its pull request starts nothing until a watcher ends the wait.
    if (!step || !worker || item.prWait !== null) return;
    const kept = item.resumeNext && item.kept?.worker === step.worker ? item.kept : null;
    const input = JSON.parse(item.input) as JsonValue;
    const r = await ctx.ops.startAttempt({
      itemId: item.id,
      phase: step.name,
      worker: step.worker,
      mode: step.mode,
      defaultSeats: ctx.defaultSeats(step.worker),
      holder: ctx.id,
      leaseMs: ctx.leaseMs,
      spawnFor: (attemptId) =>
        JSON.stringify({
          request: renderSpawn(step.spawn, { itemId: item.id, attemptId, step: step.name, input }),
          kept,
        }),
    });
    if (r.kind !== "started") return;
    report.started.push(r.attempt.id);
    await launch(ctx, r.attempt, worker);
  }

  /**
   * The session's reading; an unbound attempt's session is looked for by its spawn name first. A
   * `starting` attempt read without a bound session is adopted: it moves to `reconciling` before it is
   * looked for (spec §20.1), and the table moves it on from there. Null when the attempt moved meanwhile.
   */
  async #read(
    listed: AttemptRow,
    worker: WorkerAdapter,
  ): Promise<{ attempt: AttemptRow; reading: SessionReading } | null> {
    if (listed.session !== null) return { attempt: listed, reading: await worker.read(listed.session) };
    const a = await this.#adopt(listed);
    if (a === null) return null;
    const { request, kept } = this.ctx.spawnOf(a);
    let found = await worker.find(request.name);
    // A revival whose answer was lost (the runner died before binding it) shows as the kept session
    // running again: bind it rather than revive it twice, or fall back to a second session.
    if (found === null && kept !== null && !a.resumeFallback) {
      const k = await worker.read(kept.session);
      if (k.kind === "running") found = kept.session;
    }
    if (found === null) return { attempt: a, reading: { kind: "absent" } };
    const m = await this.ctx.ops.moveAttempt(
      this.ctx.guard(a),
      { session: found },
      { bound: found, found: true },
    );
    if (m.kind !== "moved") return null;
    return { attempt: m.attempt, reading: await worker.read(found) };
  }

  /**
   * spec §20.1: `starting` is the claiming runner's launch in progress; once a pass reads the attempt
   * with no session bound (the launch was refused or unanswered, or its runner died between the spawn
   * and the bind), the attempt is being reconciled with whatever the host has: `reconciling`, a guarded
   * move, until a reading moves it on (running, sleeping, settled). Null if the attempt moved meanwhile.
   * Invariant: a runner never writes `starting` → `reconciling` for an attempt with a bound session.
   */
  async #adopt(a: AttemptRow): Promise<AttemptRow | null> {
    if (a.state !== "starting") return a;
    const m = await this.ctx.ops.moveAttempt(
      this.ctx.guard(a),
      { state: "reconciling" },
      { to: "reconciling", why: "no session bound" },
    );
    return m.kind === "moved" ? m.attempt : null;
  }

  async #reconcile(listed: AttemptRow, now: number, report: PassReport): Promise<void> {
    const { ctx } = this;
    const worker = ctx.workers.get(listed.worker);
    // Another runner has this kind's adapter, or this pipeline (settling without it could not route the item).
    if (!worker || !ctx.pipelines.has(listed.pipeline)) return;
    const read = await this.#read(listed, worker);
    if (read === null) return; // moved meanwhile: another runner or an operator acted (spec §20.20)
    const { attempt: a, reading } = read;
    const sleep = ctx.pipelines.get(a.pipeline)?.sleep ?? DEFAULT_SLEEP;
    const d = pickReadingAction({
      attempt: a,
      reading,
      step: ctx.stepOf(a),
      sleep,
      timeouts: ctx.timeouts,
      now,
    });
    await ctx.debug?.("decided", a.id);
    await this.#scan(a, worker, reading, d.action.kind === "settle", now, report);
    let applied = await applyDecision(ctx, a, worker, reading, d, now);
    if (applied === "nothing" && a.state === "sleeping" && a.wakeRequestedAt !== null)
      applied = await wake(ctx, a, worker, wakeIsOverdue(ctx, a, now));
    report.decisions.push({ attempt: a.id, rule: d.rule, action: d.action.kind, applied });
    if (d.action.kind === "settle" && applied === "applied") ctx.outputScans?.forget(a.id);
  }

  /**
   * spec §22.11: a live session's output is scanned for pull-request URLs when due, and once more at
   * its settlement, before the close-out's are linked; a scan's trouble never stops the reconcile.
   */
  async #scan(
    a: AttemptRow,
    worker: WorkerAdapter,
    reading: SessionReading,
    final: boolean,
    now: number,
    report: PassReport,
  ): Promise<void> {
    if (!final && reading.kind !== "running" && reading.kind !== "suspended") return;
    const r = await scanOutput(this.ctx, a, worker, now, final);
    if (r.kind === "skipped") return;
    for (const url of r.linked) report.linked.push({ attempt: a.id, url });
    if (r.kind === "failed") report.outputFailed.push({ attempt: a.id, message: r.message });
  }

  /**
   * spec §20.26: look for each stray's session (by its spawn name when unbound) and stop it until it is
   * seen stopped. A forgotten stray's session that landed late is also forgotten once seen stopped; until
   * the worker confirms that, it stays a stray and is tried again next pass (spec §20.14).
   */
  async #strays(now: number, report: PassReport): Promise<void> {
    const { ctx } = this;
    for (const a of await ctx.ops.strays(ctx.batch, strayWatchCutoff(now, ctx.timeouts))) {
      const worker = ctx.workers.get(a.worker);
      if (!worker) continue;
      try {
        let session = a.session;
        if (session === null) {
          session = await worker.find(ctx.spawnOf(a).request.name);
          if (session === null) continue; // the spawn may still land; forgetting ends the search (spec §20.14)
          await ctx.ops.bindStray(a.id, session);
        }
        const r = await worker.read(session);
        if (r.kind === "running") await worker.stop(session);
        else if (a.forgotten && (await worker.forget(session)).kind === "refused")
          report.failed.push(session);
        else await ctx.ops.strayStopped(a.id, r.kind);
      } catch (e) {
        report.errors.push({ attempt: a.id, message: (e as Error).message });
      }
    }
  }

  /** spec §20.14: a forget the worker does not confirm changes nothing and is tried again next pass. */
  async #forget(now: number, report: PassReport): Promise<void> {
    const { ctx } = this;
    for (const { item, latest } of await ctx.ops.keptSessions(ctx.batch)) {
      const kept = item.kept!;
      const worker = ctx.workers.get(kept.worker);
      if (!worker || !isKeptDue(kept, item, latest, now, ctx.timeouts)) continue;
      const out = await worker.forget(kept.session);
      if (out.kind === "refused") report.failed.push(kept.session);
      else {
        await ctx.ops.markForgotten(kept.attempt, { itemId: item.id, session: kept });
        report.forgotten.push(kept.session);
      }
    }
    for (const a of await ctx.ops.sessionsToForget(forgetCutoff(now, ctx.timeouts), ctx.batch)) {
      const worker = ctx.workers.get(a.worker);
      if (a.session !== null) {
        if (!worker) continue;
        const out = await worker.forget(a.session);
        if (out.kind === "refused") {
          report.failed.push(a.session);
          continue;
        }
        report.forgotten.push(a.session);
      }
      await ctx.ops.markForgotten(a.id, null);
    }
  }

  /** Passes until `stop()`, waiting `intervalMs` (or a `poke()`) between them. */
  async run(o: { intervalMs?: number; onPass?: (r: PassReport) => void } = {}): Promise<void> {
    const interval = Math.min(Math.max(o.intervalMs ?? 1_000, 10), 60_000);
    while (!this.#stopping) {
      o.onPass?.(await this.pass());
      if (this.#stopping) break;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, interval);
        this.#wakeUp = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.#wakeUp = null;
    }
  }

  /** Starts the next pass now. */
  poke(): void {
    this.#wakeUp?.();
  }

  stop(): void {
    this.#stopping = true;
    this.#wakeUp?.();
  }
}
