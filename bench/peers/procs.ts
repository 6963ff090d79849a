/**
 * The driver's side of the worker processes (worker-proc.ts): spawn a group of them for one engine
 * and store, start them together, follow how many distinct jobs they have seen, and collect what
 * they saw when they stop. Any worker that reports an error or exits early fails every wait.
 */
import { type ChildProcess, fork } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { StoreRef, Targets } from "./adapter.js";

const HERE = dirname(fileURLToPath(import.meta.url));
/**
 * The worker processes run plain JavaScript: worker-proc.ts and the adapters bundled by esbuild (tsx's
 * own compiler, already installed) into one file beside them, so that relative paths and
 * bench/node_modules resolve as from the sources. Under tsx, every worker process carried the
 * loader's ~30 MB (71 MB RSS before loading anything), which W6 would have charged to the engine.
 */
const BUNDLE = join(HERE, ".worker-proc.mjs");
let bundled: Promise<void> | undefined;

function bundle(): Promise<void> {
  bundled ??= (async () => {
    const esbuild: any = await import("esbuild");
    await esbuild.build({
      entryPoints: [join(HERE, "worker-proc.ts")],
      outfile: BUNDLE,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      packages: "external",
      logLevel: "warning",
    });
  })();
  return bundled;
}

export interface GroupResult {
  /** How many times each sequence number 0..n-1 reached a handler, summed over the processes. */
  seen: Uint16Array;
  /** Jobs outside 0..n-1 that ran (W5: a job that was not due). */
  early: number;
  /** W3: enqueue-to-handler ms of every job, when asked for. */
  latencies: number[];
  /** W6: the largest RSS of any one worker process, at its start and at its peak. */
  rssStartMB: number;
  rssPeakMB: number;
}

interface Done {
  type: "done";
  seen: string;
  early: number;
  latencies: number[];
  rssStartMB: number;
  rssPeakMB: number;
}

export class WorkerGroup {
  readonly #children: ChildProcess[];
  readonly #distinct: number[];
  readonly #done: (Done | undefined)[];
  #failure: Error | undefined;
  #wake: () => void = () => {};
  #t0 = 0;
  /** Milliseconds from start() to the first count with a job in it (a worker's start-up). */
  firstJobMs: number | undefined;

  private constructor(children: ChildProcess[]) {
    this.#children = children;
    this.#distinct = children.map(() => 0);
    this.#done = children.map(() => undefined);
    children.forEach((c, i) => {
      c.on("message", (m: { type: string; distinct?: number; message?: string }) => {
        if (m.type === "count") {
          this.#distinct[i] = m.distinct!;
          if (this.firstJobMs === undefined && m.distinct! > 0)
            this.firstJobMs = performance.now() - this.#t0;
        } else if (m.type === "done") this.#done[i] = m as Done;
        else if (m.type === "error") this.#fail(new Error(`worker process ${i}: ${m.message}`));
        this.#notify(m.type);
      });
      c.on("exit", (code, signal) => {
        if (!this.#done[i]) this.#fail(new Error(`worker process ${i} exited (${signal ?? code}) early`));
        this.#notify("exit");
      });
    });
  }

  /** The worker processes' ids (their CPU is read from /proc, see compare.ts). */
  pids(): number[] {
    return this.#children.map((c) => c.pid!);
  }

  #events: string[] = [];
  #notify(type: string): void {
    this.#events.push(type);
    this.#wake();
  }
  #fail(e: Error): void {
    this.#failure ??= e;
    this.#wake();
  }

  /** Waits until `cond` holds, a worker failed, or `ms` passed. */
  async #until(cond: () => boolean, what: string, ms: number): Promise<void> {
    const limit = Date.now() + ms;
    while (!cond()) {
      if (this.#failure) throw this.#failure;
      const left = limit - Date.now();
      if (left <= 0) throw new Error(`${what} did not happen within ${ms / 1000} s`);
      await new Promise<void>((res) => {
        const t = setTimeout(res, Math.min(left, 1_000));
        this.#wake = () => {
          clearTimeout(t);
          res();
        };
      });
    }
    if (this.#failure) throw this.#failure;
  }

  /** Forks `procs` workers for `key` on the store `ref`; resolves when each has loaded its engine. */
  static async spawn(key: string, t: Targets, ref: StoreRef, procs: number): Promise<WorkerGroup> {
    await bundle();
    const children = Array.from({ length: procs }, () =>
      fork(BUNDLE, [key, JSON.stringify(t), JSON.stringify(ref)], {
        // BENCH_WORKER_ARGS: node flags for the worker processes only, e.g. "--cpu-prof --cpu-prof-dir=prof".
        execArgv: (process.env.BENCH_WORKER_ARGS ?? "").split(" ").filter(Boolean),
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      }),
    );
    const g = new WorkerGroup(children);
    try {
      await g.#until(() => g.#count("loaded") === procs, "worker processes loading", 60_000);
    } catch (e) {
      g.kill();
      throw e;
    }
    return g;
  }

  #count(type: string): number {
    return this.#events.filter((e) => e === type).length;
  }

  /** Starts every worker (each opens its connection and begins claiming). */
  async start(concurrency: number, n: number, latency: boolean): Promise<void> {
    this.#t0 = performance.now();
    for (const c of this.#children) c.send({ type: "start", concurrency, n, latency });
    await this.#until(() => this.#count("started") === this.#children.length, "worker start", 60_000);
  }

  /** Distinct sequence numbers seen, summed over the processes (a job seen by two counts twice). */
  distinct(): number {
    return this.#distinct.reduce((a, b) => a + b, 0);
  }

  async waitDistinct(n: number, ms: number): Promise<void> {
    await this.#until(
      () => this.distinct() >= n,
      `${n} jobs reaching a handler (${this.distinct()} so far)`,
      ms,
    );
  }

  /** Stops every worker and merges what they report. */
  async stop(): Promise<GroupResult> {
    for (const c of this.#children) if (c.connected) c.send({ type: "stop" });
    await this.#until(() => this.#done.every(Boolean), "worker stop", 60_000);
    const done = this.#done as Done[];
    const n = Buffer.from(done[0]!.seen, "base64").byteLength / 2;
    const seen = new Uint16Array(n);
    for (const d of done) {
      const b = Buffer.from(d.seen, "base64");
      // A copy: a decoded Buffer may sit at an odd offset of the pool, which a Uint16Array refuses.
      const part = new Uint16Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
      for (let i = 0; i < n; i++) seen[i]! += part[i]!;
    }
    return {
      seen,
      early: done.reduce((a, d) => a + d.early, 0),
      latencies: done.flatMap((d) => d.latencies),
      rssStartMB: Math.max(...done.map((d) => d.rssStartMB)),
      rssPeakMB: Math.max(...done.map((d) => d.rssPeakMB)),
    };
  }

  kill(): void {
    const now = () => {
      for (const c of this.#children) if (c.exitCode === null) c.kill("SIGKILL");
    };
    // With BENCH_WORKER_ARGS (a profile, say), a worker that reported may still be writing it as it exits.
    if (process.env.BENCH_WORKER_ARGS && this.#done.every(Boolean)) setTimeout(now, 10_000).unref();
    else now();
  }
}
