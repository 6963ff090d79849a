/**
 * Child processes of the chaos harness: spawn a fixture under `node --import
 * tsx`, read its JSON-lines stdout, wait on conditions with a deadline, kill.
 * A Sandbox owns a temp dir and every child spawned in it, and removes both
 * in `cleanup()` (called in `finally` by every scenario).
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const WORKER = join(ROOT, "chaos/fixtures/worker.ts");

export interface Message {
  type: string;
  pid: number;
  [k: string]: unknown;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  at: number;
}

export class ChaosProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly messages: Message[] = [];
  /** Raw stdout lines that were not JSON (the crash-consistency child prints plain lines). */
  readonly lines: string[] = [];
  stderr = "";
  /** Date.now() of the last stdout line (liveness). */
  lastHeard = Date.now();
  /** Set by kill(): the signal we sent and when. */
  killed: { signal: NodeJS.Signals; at: number } | undefined;
  readonly exited: Promise<Exit>;
  #listeners = new Set<() => void>();

  constructor(script: string, args: readonly string[], nodeArgs: readonly string[] = []) {
    this.child = spawn(process.execPath, [...nodeArgs, "--import", "tsx", script, ...args], {
      cwd: ROOT,
      stdio: ["pipe", "pipe", "pipe"],
    });
    createInterface({ input: this.child.stdout }).on("line", (line) => {
      this.lastHeard = Date.now();
      if (line.startsWith("{")) {
        try {
          this.messages.push(JSON.parse(line) as Message);
        } catch {
          this.lines.push(line);
        }
      } else this.lines.push(line);
      this.#notify();
    });
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (d: string) => {
      this.stderr += d;
    });
    this.child.stdin.on("error", () => {});
    this.exited = new Promise((res) => {
      this.child.on("exit", (code, signal) => {
        res({ code, signal, at: Date.now() });
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

  get workerId(): string | undefined {
    const m = this.messages.find((x) => x.type === "ready");
    return m ? String(m.workerId) : undefined;
  }

  #notify(): void {
    for (const l of [...this.#listeners]) l();
  }

  /** Resolves with the first message of this type; rejects if the child exits first or after timeoutMs. */
  waitFor(type: string, timeoutMs = 30_000): Promise<Message> {
    return new Promise((res, rej) => {
      const check = () => {
        const m = this.messages.find((x) => x.type === type);
        if (m) return done(() => res(m));
        if (!this.alive)
          done(() => rej(new Error(`process ${this.pid} exited before "${type}"; stderr:\n${this.stderr}`)));
      };
      const timer = setTimeout(
        () => done(() => rej(new Error(`no "${type}" from ${this.pid} in ${timeoutMs} ms`))),
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

  /** Resolves with the exit, or null after timeoutMs. */
  async exitWithin(timeoutMs: number): Promise<Exit | null> {
    let timer: NodeJS.Timeout | undefined;
    const t = new Promise<null>((r) => {
      timer = setTimeout(() => r(null), timeoutMs);
    });
    try {
      return await Promise.race([this.exited, t]);
    } finally {
      clearTimeout(timer);
    }
  }

  send(cmd: string): void {
    this.child.stdin.write(`${cmd}\n`);
  }

  kill(signal: NodeJS.Signals = "SIGKILL"): void {
    if (!this.alive) return;
    if (!this.killed || signal === "SIGKILL") this.killed = { signal, at: Date.now() };
    this.child.kill(signal);
  }
}

/** A temp dir and the children spawned for one scenario run. */
export class Sandbox {
  readonly dir = mkdtempSync(join(tmpdir(), "ratchet-chaos-"));
  readonly db = join(this.dir, "chaos.db");
  readonly effects = join(this.dir, "effects.log");
  readonly acks = join(this.dir, "acks.log");
  readonly children: ChaosProcess[] = [];

  spawn(script: string, args: readonly string[], nodeArgs: readonly string[] = []): ChaosProcess {
    const p = new ChaosProcess(script, args, nodeArgs);
    this.children.push(p);
    return p;
  }

  /** A chaos worker (chaos/fixtures/worker.ts) on this sandbox's file (or `opts.pg`) and ledger. */
  worker(opts: WorkerOptions = {}): ChaosProcess {
    const args = opts.pg
      ? ["--pg-url", opts.pg.url, "--schema", opts.pg.schema, "--effects", this.effects]
      : ["--db", this.db, "--effects", this.effects];
    if (opts.pg?.pool !== undefined) args.push("--pool", String(opts.pg.pool));
    if (opts.reportClaims) args.push("--report-claims");
    if (opts.concurrency !== undefined) args.push("--concurrency", String(opts.concurrency));
    if (opts.maxMs !== undefined) args.push("--max-ms", String(opts.maxMs));
    if (opts.graceMs !== undefined) args.push("--grace", String(opts.graceMs));
    if (opts.pollMs !== undefined) args.push("--poll", String(opts.pollMs));
    if (opts.shutdownMs !== undefined) args.push("--shutdown-ms", String(opts.shutdownMs));
    if (opts.logWrites) args.push("--log-writes");
    return this.spawn(WORKER, args, opts.nodeArgs ?? []);
  }

  async cleanup(keep = false): Promise<void> {
    for (const c of this.children) c.kill("SIGKILL");
    await Promise.all(this.children.map((c) => c.exitWithin(10_000)));
    if (!keep) rmSync(this.dir, { recursive: true, force: true });
  }
}

export interface WorkerOptions {
  concurrency?: number;
  maxMs?: number;
  graceMs?: number;
  pollMs?: number;
  shutdownMs?: number;
  logWrites?: boolean;
  nodeArgs?: string[];
  /** Run on PostgreSQL instead of the sandbox's SQLite file (`url` may carry an application_name). */
  pg?: { url: string; schema: string; pool?: number };
  /** The worker prints {"type":"claim","got","at"} for every claim that took tasks. */
  reportClaims?: boolean;
}

/** Lines of a file (none when it does not exist yet). */
export function fileLines(path: string): string[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8").split("\n").filter(Boolean);
}

/** Polls `check` until it returns something other than undefined/false; throws after timeoutMs. */
export async function waitUntil<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs: number,
  everyMs = 25,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
