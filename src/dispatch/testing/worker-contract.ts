/**
 * The worker contract suite (spec §20.16–§20.17): what every worker adapter
 * must do, checked through the WorkerAdapter interface against real
 * sessions. The test framework is a parameter, as in the store conformance
 * suite:
 *
 * ```ts
 * import { describe, expect, it } from "vitest";
 * import { registerWorkerContract, shellBehaviour, dirControls } from "@ratchet-engine/ratchet/dispatch";
 * registerWorkerContract({
 *   name: "process",
 *   open: async (clock, o) => new ProcessWorker({ root, clock, ...o }),
 *   spawn: (behaviour, name) => ({ name, command: ["sh", "-c", shellBehaviour(behaviour)], ... }),
 *   ...dirControls(),
 *   runner: { describe, it, expect },
 * });
 * ```
 *
 * Behaviours a session must be able to play (`spawn` builds them for the
 * adapter): `exit0` says something, writes a succeeded close-out and exits 0;
 * `exit3` exits 3; `wait` says `ready`, then repeats what it is told (`poke`)
 * until it is released (`release`) and exits 0; `turn` reports attention
 * `turn-ended` and agent session `agent-7`, then behaves like `wait`; `limit`
 * reports a usage limit that resets at 1800000000000, then behaves like `wait`;
 * `pr` says `opened PR_URL` (CONTRACT_PR_URL), then behaves like `wait`; `flood`
 * says 3,000 lines of 60 bytes, then `opened PR_URL`, then behaves like `wait`.
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { SessionReading } from "../../core/dispatch/model.js";
import type { ConformanceRunner } from "../../testing/conformance.js";
import { FakeClock } from "../../testing/fake-clock.js";
import type { SpawnRequest, WorkerAdapter } from "../workers/adapter.js";
import type { SessionDirs } from "../workers/session-dir.js";
import { registerWorkerCases } from "./worker-cases.js";

export type Behaviour = "exit0" | "exit3" | "wait" | "turn" | "limit" | "pr" | "flood";

/** The pull-request URL the `pr` and `flood` behaviours print. */
export const CONTRACT_PR_URL = "https://github.com/acme/widgets/pull/42";
/** One of the `flood` behaviour's 3,000 lines (60 bytes with its line break). */
export const FLOOD_LINE = "flood: output that fills the history past any bound we read";

export interface WorkerContractOptions<W extends WorkerAdapter> {
  name: string;
  /** A worker over fresh, empty host state, reporting time from `clock`. */
  open(clock: FakeClock, o: { maxSessions?: number }): Promise<W>;
  /** The request that makes a session of this adapter play `behaviour`. */
  spawn(behaviour: Behaviour, name: string): SpawnRequest;
  /** Lets a `wait` or `turn` session end (exit 0). */
  release(worker: W, session: string): Promise<void>;
  /** Makes a `wait` or `turn` session produce output. */
  poke(worker: W, session: string): Promise<void>;
  /** Whether a `wait` session has said `ready` (its first output is out). */
  ready(worker: W, session: string): Promise<boolean>;
  /** Once, after all tests. */
  cleanup?(): Promise<void>;
  runner: ConformanceRunner;
}

/** The shell text of a behaviour, for adapters that run commands (reports go through RATCHET_SESSION_DIR). */
export function shellBehaviour(b: Behaviour): string {
  const wait =
    'echo ready; touch "$D/ready"; while [ ! -e "$D/go" ]; do if [ -e "$D/say" ]; then cat "$D/say"; rm -f "$D/say"; fi; sleep 0.05; done; echo go; exit 0';
  const body: Record<Behaviour, string> = {
    exit0: `echo hello; printf '{"outcome":"succeeded","summary":"ok"}' > "$D/closeout.json"; exit 0`,
    exit3: "echo bad; exit 3",
    wait,
    turn: `printf turn-ended > "$D/attention"; printf agent-7 > "$D/agent-session"; ${wait}`,
    limit: `printf 1800000000000 > "$D/usage-limit"; ${wait}`,
    pr: `echo "opened ${CONTRACT_PR_URL}"; ${wait}`,
    flood: `i=0; while [ $i -lt 3000 ]; do echo "${FLOOD_LINE}"; i=$((i+1)); done; echo "opened ${CONTRACT_PR_URL}"; ${wait}`,
  };
  return `D="$RATCHET_SESSION_DIR"; ${body[b]}`;
}

/** `release` and `poke` for adapters that keep session directories (process, tmux). */
export function dirControls<W extends WorkerAdapter & { dirs: SessionDirs }>() {
  return {
    release: async (w: W, s: string) => writeFileSync(join(w.dirs.dir(s), "go"), ""),
    poke: async (w: W, s: string) => writeFileSync(join(w.dirs.dir(s), "say"), "more output\n"),
    ready: async (w: W, s: string) => existsSync(join(w.dirs.dir(s), "ready")),
  };
}

/** Waits for a condition, polling; throws with `what` after `timeoutMs`. */
export async function until<T>(
  what: string,
  fn: () => Promise<T | null | undefined | false>,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface WorkerEnv<W extends WorkerAdapter> {
  clock: FakeClock;
  worker: W;
  opts: WorkerContractOptions<W>;
  /** A unique spawn name for this test. */
  name(tag: string): string;
  readUntil(session: string, what: string, ok: (r: SessionReading) => boolean): Promise<SessionReading>;
}

/** Registers the contract's tests with `opts.runner`. */
export function registerWorkerContract<W extends WorkerAdapter>(opts: WorkerContractOptions<W>): void {
  const { runner } = opts;
  let n = 0;
  runner.describe(`worker contract: ${opts.name}`, () => {
    const define = (
      title: string,
      fn: (env: WorkerEnv<W>) => Promise<void>,
      o: { maxSessions?: number } = {},
    ) =>
      runner.it(title, async () => {
        const clock = new FakeClock();
        const worker = await opts.open(clock, o);
        const started: string[] = [];
        const env: WorkerEnv<W> = {
          clock,
          worker,
          opts,
          name: (tag) => {
            const s = `rc-${process.pid}-${++n}-${tag}`;
            started.push(s);
            return s;
          },
          readUntil: (session, what, ok) =>
            until(what, async () => {
              const r = await worker.read(session);
              return ok(r) ? r : null;
            }),
        };
        try {
          await fn(env);
        } finally {
          for (const s of started) await worker.forget(s).catch(() => {});
          await worker.close?.();
        }
      });
    registerWorkerCases(define, runner.expect);
    const cleanup = opts.cleanup;
    if (cleanup) {
      if (runner.afterAll) runner.afterAll(() => cleanup());
      else runner.it("cleanup", () => cleanup());
    }
  });
}
