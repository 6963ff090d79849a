/**
 * A pool of chaos workers of one size: kill one (recording who and when, for
 * P5), replace it, probe liveness, stop them all.
 *
 * Modes of a member: starting (spawned, not yet "started") → running →
 * gone (killed, exited, or stopped). Only running members are picked for a
 * kill, so every kill lands on a worker that was claiming.
 */
import type { Kill } from "./checker.js";
import type { ChaosProcess, Sandbox, WorkerOptions } from "./process.js";
import type { Rng } from "./scenario.js";

export class WorkerPool {
  /** Every worker ever spawned, for stderr checks and cleanup. */
  readonly all: ChaosProcess[] = [];
  readonly kills: Kill[] = [];
  /** Workers killed by the liveness probe (their event loop stopped answering). */
  readonly hung: ChaosProcess[] = [];
  readonly #running = new Set<ChaosProcess>();
  readonly #starting = new Set<Promise<void>>();
  readonly #failures: string[] = [];

  constructor(
    readonly sb: Sandbox,
    readonly opts: WorkerOptions,
  ) {}

  /** Spawns a worker and starts it once it is ready; a worker that fails to start is recorded. */
  spawn(): ChaosProcess {
    const w = this.sb.worker(this.opts);
    this.all.push(w);
    const p = (async () => {
      try {
        await w.waitFor("ready", 60_000);
        w.send("go");
        await w.waitFor("started", 30_000);
        if (w.alive) this.#running.add(w);
      } catch (err) {
        if (!w.killed && w.alive)
          this.#failures.push(`worker ${w.pid} did not start: ${(err as Error).message}`);
      }
    })();
    this.#starting.add(p);
    void p.finally(() => this.#starting.delete(p));
    void w.exited.then(() => this.#running.delete(w));
    return w;
  }

  /** Spawns n workers and waits until each is claiming. */
  async start(n: number): Promise<void> {
    for (let i = 0; i < n; i++) this.spawn();
    await this.settled();
  }

  /** Waits for every spawn in progress. */
  async settled(): Promise<void> {
    while (this.#starting.size > 0) await Promise.all([...this.#starting]);
  }

  get running(): ChaosProcess[] {
    return [...this.#running].filter((w) => w.alive);
  }

  get failures(): readonly string[] {
    return this.#failures;
  }

  /** SIGKILLs one running worker picked by `rng` and spawns its replacement. Returns the victim. */
  killOne(rng: Rng): ChaosProcess | undefined {
    const live = this.running;
    if (live.length === 0) return undefined;
    const w = rng.pick(live);
    this.kills.push({ workerId: w.workerId!, at: Date.now() });
    w.kill("SIGKILL");
    this.#running.delete(w);
    this.spawn();
    return w;
  }

  /**
   * SIGKILLs every member of the pool at once — a machine going down — and
   * spawns as many replacements (the machine coming back). Members still
   * starting die too; a kill is recorded for each that had opened (P5).
   */
  killAll(): ChaosProcess[] {
    const victims = this.all.filter((w) => w.alive);
    const at = Date.now();
    for (const w of victims) {
      if (w.workerId !== undefined) this.kills.push({ workerId: w.workerId, at });
      w.kill("SIGKILL");
      this.#running.delete(w);
    }
    for (let i = 0; i < victims.length; i++) this.spawn();
    return victims;
  }

  /**
   * The liveness probe a supervisor (systemd, Kubernetes) would run: a running
   * worker silent for more than silentMs has a stuck event loop; kill and replace it.
   */
  probe(silentMs: number): number {
    let n = 0;
    for (const w of this.running) {
      if (Date.now() - w.lastHeard <= silentMs) continue;
      this.hung.push(w);
      this.kills.push({ workerId: w.workerId!, at: Date.now() });
      w.kill("SIGKILL");
      this.#running.delete(w);
      this.spawn();
      n++;
    }
    return n;
  }

  /** Replaces running workers that died on their own (a poison task took them down). */
  replaceDead(): ChaosProcess[] {
    const dead = this.all.filter(
      (w) => !w.alive && !w.killed && !w.messages.some((m) => m.type === "closed"),
    );
    const fresh: ChaosProcess[] = [];
    for (const w of dead) {
      if (this.#replaced.has(w)) continue;
      this.#replaced.add(w);
      fresh.push(this.spawn());
    }
    return fresh;
  }
  readonly #replaced = new Set<ChaosProcess>();

  /** Graceful stop of every live worker; resolves with their exit codes (null: had to be killed). */
  async stopAll(timeoutMs = 30_000): Promise<(number | null)[]> {
    await this.settled();
    const live = this.all.filter((w) => w.alive);
    for (const w of live) w.send("stop");
    return Promise.all(
      live.map(async (w) => {
        const e = await w.exitWithin(timeoutMs);
        if (e) return e.code;
        w.kill("SIGKILL");
        return null;
      }),
    );
  }
}
