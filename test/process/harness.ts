/**
 * Helpers for tests that run workers in child processes: spawn the worker
 * fixture under `node --import tsx`, talk to it over stdio, wait on
 * conditions with a bound, and clean up temp dirs and children.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const WORKER = join(ROOT, "test/fixtures/worker.ts");

export interface WorkerMessage {
  type: string;
  pid: number;
  [k: string]: unknown;
}

export interface WorkerArgs {
  db: string;
  ledger: string;
  concurrency?: number;
  graceMs?: number;
  pollMs?: number;
  blockStepTwo?: boolean;
  /** Declare schedule "tick" (task "ledger") with this cron. */
  schedule?: string;
  maintenanceMs?: number;
}

/**
 * A worker fixture process (test/fixtures/worker.ts) spoken to over stdio: one
 * JSON message per stdout line, "go"/"stop" on stdin. Shared by the SQLite and
 * PostgreSQL process tests, which differ only in the arguments they pass.
 */
export class FixtureProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly messages: WorkerMessage[] = [];
  stderr = "";
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  #listeners = new Set<() => void>();

  /** `script`: the fixture to run (default test/fixtures/worker.ts), with the same stdio protocol. */
  constructor(args: readonly string[], script: string = WORKER) {
    this.child = spawn(process.execPath, ["--import", "tsx", script, ...args], {
      cwd: ROOT,
      stdio: ["pipe", "pipe", "pipe"],
    });
    createInterface({ input: this.child.stdout }).on("line", (line) => {
      try {
        this.messages.push(JSON.parse(line) as WorkerMessage);
      } catch {
        this.stderr += `(stdout) ${line}\n`;
      }
      this.#notify();
    });
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (d: string) => {
      this.stderr += d;
    });
    this.child.stdin.on("error", () => {});
    this.exited = new Promise((res) => {
      this.child.on("exit", (code, signal) => {
        res({ code, signal });
        this.#notify();
      });
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The workerId the fixture reported in its "ready" message. */
  get workerId(): string {
    const m = this.messages.find((x) => x.type === "ready");
    if (!m) throw new Error(`worker ${this.pid} is not ready yet`);
    return String(m.workerId);
  }

  #notify(): void {
    for (const l of [...this.#listeners]) l();
  }

  /**
   * Resolves with the index of the first message at or after `from` that matches;
   * rejects if the child exits first or after timeoutMs.
   */
  waitForIndex(
    what: string,
    match: (m: WorkerMessage) => boolean,
    opts: { from?: number; timeoutMs?: number } = {},
  ): Promise<number> {
    const from = opts.from ?? 0;
    const timeoutMs = opts.timeoutMs ?? 20_000;
    return new Promise((res, rej) => {
      const check = () => {
        const i = this.messages.findIndex((m, k) => k >= from && match(m));
        if (i >= 0) return done(() => res(i));
        if (!this.alive)
          return done(() =>
            rej(new Error(`worker ${this.pid} exited before ${what}; stderr:\n${this.stderr}`)),
          );
      };
      const timer = setTimeout(
        () => done(() => rej(new Error(`no ${what} from worker ${this.pid}; stderr:\n${this.stderr}`))),
        timeoutMs,
      );
      const done = (f: () => void) => {
        clearTimeout(timer);
        this.#listeners.delete(check);
        f();
      };
      this.#listeners.add(check);
      check();
    });
  }

  /** Resolves with the first message of this type (already received or later). */
  async waitFor(type: string, timeoutMs = 20_000): Promise<WorkerMessage> {
    const i = await this.waitForIndex(`"${type}"`, (m) => m.type === type, { timeoutMs });
    return this.messages[i]!;
  }

  send(cmd: "go" | "stop"): void {
    this.child.stdin.write(`${cmd}\n`);
  }

  /** Graceful stop; resolves with the exit code. */
  async stop(timeoutMs = 30_000): Promise<number | null> {
    this.send("stop");
    await this.waitFor("closed", timeoutMs);
    return (await this.exited).code;
  }

  kill(signal: NodeJS.Signals = "SIGKILL"): void {
    if (this.alive) this.child.kill(signal);
  }
}

/** A worker on a SQLite file. */
export class WorkerProcess extends FixtureProcess {
  constructor(args: WorkerArgs) {
    const argv = ["--db", args.db, "--ledger", args.ledger];
    if (args.concurrency !== undefined) argv.push("--concurrency", String(args.concurrency));
    if (args.graceMs !== undefined) argv.push("--grace", String(args.graceMs));
    if (args.pollMs !== undefined) argv.push("--poll", String(args.pollMs));
    if (args.blockStepTwo) argv.push("--block-step-two");
    if (args.schedule !== undefined) argv.push("--schedule", args.schedule);
    if (args.maintenanceMs !== undefined) argv.push("--maintenance", String(args.maintenanceMs));
    super(argv);
  }
}

/** Tracks what a test created so afterEach can remove it. */
export class Sandbox {
  readonly dir = mkdtempSync(join(tmpdir(), "ratchet-"));
  readonly db = join(this.dir, "ratchet.db");
  readonly workers: WorkerProcess[] = [];

  path(name: string): string {
    return join(this.dir, name);
  }

  spawn(args: Omit<WorkerArgs, "db">): WorkerProcess {
    const w = new WorkerProcess({ db: this.db, ...args });
    this.workers.push(w);
    return w;
  }

  async cleanup(): Promise<void> {
    for (const w of this.workers) w.kill("SIGKILL");
    await Promise.all(this.workers.map((w) => w.exited));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Lines of a ledger file (empty when it does not exist yet). */
export function ledgerLines(path: string): string[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8").split("\n").filter(Boolean);
}

/** Polls `check` until it returns a value other than undefined/false, or throws after timeoutMs. */
export async function waitUntil<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 20_000,
  everyMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
