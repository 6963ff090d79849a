/**
 * What every part of a runner pass shares: the store's dispatch operations,
 * the registered pipelines, the adapters by worker kind, the resolved
 * timeouts, and the runner's identity (spec §20.22).
 */
import { hostname } from "node:os";
import { type Random, systemRandom } from "../../core/clock.js";
import { definePipeline, type Pipeline, type PipelineSpec, type Step } from "../../core/dispatch/pipeline.js";
import type { SpawnRequest } from "../../core/dispatch/route.js";
import type { KeptSession } from "../../core/dispatch/sessions.js";
import { type DispatchTimeouts, resolveTimeouts } from "../../core/dispatch/timeouts.js";
import { ConfigError } from "../../errors.js";
import type { AttemptRow, DispatchCapable, DispatchOps } from "../../store/dispatch/ops.js";
import type { WorkerAdapter } from "../workers/adapter.js";
import { OutputScans, outputScanMsOf } from "./output.js";

export interface RunnerOptions {
  store: DispatchCapable;
  pipelines: readonly PipelineSpec[];
  workers: readonly WorkerAdapter[];
  timeouts?: Partial<DispatchTimeouts>;
  /** Seat limits per worker kind when the store has none set (spec §20.21). */
  seats?: Readonly<Record<string, number>>;
  /** How long a pass holds the attempts it reads (default 60 s). */
  leaseMs?: number;
  /** Attempts read, and items started, per pass (default 100, at most 1,000). */
  batch?: number;
  /** The runner's name in leases (default host:pid:random). */
  id?: string;
  random?: Random;
  /**
   * Named debug points (tests): awaited where a runner may die in a pass —
   * `launched` (a session started, not yet bound), `decided` (a decision
   * made, not yet applied). A test can pause or kill the runner there.
   */
  debug?: (point: "launched" | "decided", attemptId: string) => Promise<void>;
  /**
   * The forge hosts whose pull-request URLs in close-outs are linked to their attempts (spec §22.4),
   * e.g. `["github.com"]`. Given when a watcher follows pull requests; without it no edge may wait on
   * one (`no_forge`, spec §22.7) and nothing is linked.
   */
  pullHosts?: readonly string[];
  /**
   * With `pullHosts`: how often a running attempt's session output is scanned for pull-request URLs
   * (spec §22.11; default 30 s, 1 s–1 h, on the store's clock). It is scanned once more as it settles.
   */
  outputScanMs?: number;
}

/** What an attempt's stored spawn holds: the request, and the kept session it revives (if any). */
export interface StoredSpawn {
  readonly request: SpawnRequest;
  readonly kept: KeptSession | null;
}

export class RunnerContext {
  readonly ops: DispatchOps;
  readonly store: DispatchCapable;
  readonly pipelines = new Map<string, Pipeline>();
  readonly workers = new Map<string, WorkerAdapter>();
  readonly timeouts: DispatchTimeouts;
  readonly seats: Readonly<Record<string, number>>;
  readonly leaseMs: number;
  readonly batch: number;
  readonly id: string;
  readonly random: Random;
  readonly debug: NonNullable<RunnerOptions["debug"]> | null;
  readonly pullHosts: readonly string[] | null;
  /** What live-output scans linked, per attempt (spec §22.11); null without forge hosts. */
  readonly outputScans: OutputScans | null;
  /** Worker kinds backing off after a capacity refusal, until when (read each pass, spec §20.21). */
  readonly backoffUntil = new Map<string, number>();

  constructor(o: RunnerOptions) {
    this.store = o.store;
    this.ops = o.store.dispatch;
    for (const w of o.workers) {
      if (this.workers.has(w.kind)) throw new ConfigError(`two worker adapters for kind "${w.kind}"`);
      this.workers.set(w.kind, w);
    }
    const kinds = new Set(this.workers.keys());
    for (const spec of o.pipelines) {
      const p = definePipeline(spec, kinds, { forge: o.pullHosts !== undefined });
      if (this.pipelines.has(p.name)) throw new ConfigError(`pipeline "${p.name}" is registered twice`);
      this.pipelines.set(p.name, p);
    }
    this.timeouts = resolveTimeouts(o.timeouts);
    this.seats = { ...(o.seats ?? {}) };
    this.leaseMs = o.leaseMs ?? 60_000;
    this.batch = o.batch ?? 100;
    if (!Number.isInteger(this.batch) || this.batch < 1 || this.batch > 1_000)
      throw new ConfigError("batch must be an integer in 1–1,000");
    if (!Number.isSafeInteger(this.leaseMs) || this.leaseMs < 1_000)
      throw new ConfigError("leaseMs must be at least 1,000");
    this.id = o.id ?? `${hostname()}:${process.pid}:${Math.floor(Math.random() * 1e9).toString(36)}`;
    this.random = o.random ?? systemRandom;
    this.debug = o.debug ?? null;
    this.pullHosts = o.pullHosts ? [...o.pullHosts] : null;
    const every = outputScanMsOf(o.outputScanMs);
    this.outputScans = this.pullHosts === null ? null : new OutputScans(every);
  }

  stepOf(a: { pipeline: string; phase: string }): Step | null {
    return this.pipelines.get(a.pipeline)?.steps.get(a.phase) ?? null;
  }

  isBackingOff(worker: string, now: number): boolean {
    return (this.backoffUntil.get(worker) ?? 0) > now;
  }

  defaultSeats(worker: string): number | null {
    return this.seats[worker] ?? null;
  }

  spawnOf(a: AttemptRow): StoredSpawn {
    return JSON.parse(a.spawn) as StoredSpawn;
  }

  guard(a: AttemptRow) {
    return { id: a.id, version: a.version, holder: this.id };
  }
}
