/**
 * The local execution environment (spec §19): processes are spawned in a process group of their
 * own, so a timeout or an abort kills the command and everything it started; files are read and
 * written under `cwd`, writes atomically (a temp file renamed over the target).
 *
 * Modes of one exec:
 * - running: output is decoded and passed to onOutput as it comes, and kept per stream up to
 *   maxOutputBytes (the head and the tail, spec §19.4);
 * - stopping: the timeout passed or the signal aborted: SIGTERM to the group, SIGKILL after
 *   KILL_GRACE_MS if it is still there;
 * - done: the process exited and both pipes closed (or the pipes stayed open past EXIT_PIPE_MS
 *   after the exit — a background grandchild holding them — and were dropped).
 *
 * Invariant: exec never resolves while its process group could still be running because of a
 * timeout or an abort (spec §19.3): the group is killed first.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { lstat, mkdir, open, readdir, realpath, rename, rm, writeFile } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { StringDecoder } from "node:string_decoder";
import { HeadTail } from "../tools/truncate.js";
import { type ProcessGroupRecord, type ReapOutcome, reapGroup, recordGroup } from "./groups.js";
import { EnvError, type ExecOptions, type ExecResult, type ExecutionEnv, type FileInfo } from "./types.js";

const DEFAULT_TIMEOUT_MS = 120_000;
const MAX_TIMEOUT_MS = 24 * 3_600_000;
const DEFAULT_MAX_OUTPUT = 1024 * 1024;
const DEFAULT_MAX_READ = 16 * 1024 * 1024;
const KILL_GRACE_MS = 2_000;
const EXIT_PIPE_MS = 200;
const MAX_LIST = 10_000;

export interface LocalEnvOptions {
  cwd: string;
  /** Allow paths outside cwd (spec §19.2). Default false. */
  allowOutside?: boolean;
  /** Environment variables of every exec (default: this process's). */
  env?: Record<string, string | undefined>;
}

/** Locks by real path, for every environment of this process (spec §19.5). */
const writeLocks = new Map<string, Promise<unknown>>();

function envError(e: unknown, path?: string): EnvError {
  if (e instanceof EnvError) return e;
  const code = (e as NodeJS.ErrnoException)?.code;
  const msg = (e as Error)?.message ?? String(e);
  const kind =
    code === "ENOENT"
      ? "not_found"
      : code === "EEXIST"
        ? "exists"
        : code === "EISDIR"
          ? "is_directory"
          : code === "ENOTDIR"
            ? "not_directory"
            : code === "EACCES" || code === "EPERM"
              ? "permission_denied"
              : code === "ABORT_ERR"
                ? "aborted"
                : "unknown";
  return new EnvError(kind, msg, path, { cause: e });
}

function kindOf(s: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean }) {
  return s.isFile() ? "file" : s.isDirectory() ? "directory" : s.isSymbolicLink() ? "symlink" : "other";
}

export class LocalEnv implements ExecutionEnv {
  readonly cwd: string;
  readonly #allowOutside: boolean;
  readonly #env: Record<string, string | undefined>;

  constructor(o: LocalEnvOptions) {
    if (typeof o?.cwd !== "string" || !isAbsolute(o.cwd))
      throw new EnvError("invalid", `cwd must be an absolute path (got ${JSON.stringify(o?.cwd)})`);
    this.cwd = resolve(o.cwd);
    this.#allowOutside = o.allowOutside ?? false;
    this.#env = o.env ?? process.env;
  }

  /** spec §19.2: inside cwd after following symlinks of the part that exists. */
  async resolve(path: string): Promise<string> {
    if (typeof path !== "string" || path.length === 0 || path.length > 4096 || path.includes("\u0000"))
      throw new EnvError("invalid", "a path must be a non-empty string of at most 4096 characters, no NUL");
    const full = resolve(this.cwd, path);
    if (this.#allowOutside) return full;
    const root = await realpath(this.cwd).catch(() => this.cwd);
    // The nearest existing ancestor's real path decides: a symlink inside cwd may point outside.
    let probe = full;
    let rest = "";
    for (;;) {
      try {
        const real = await realpath(probe);
        const target = rest ? join(real, rest) : real;
        if (!inside(root, target)) throw new EnvError("escape", `${path} is outside ${this.cwd}`, path);
        return full;
      } catch (e) {
        if (e instanceof EnvError) throw e;
        const parent = dirname(probe);
        if (parent === probe) throw new EnvError("escape", `${path} is outside ${this.cwd}`, path);
        rest = rest ? join(basename(probe), rest) : basename(probe);
        probe = parent;
      }
    }
  }

  async exec(argv: readonly string[], opts: ExecOptions = {}): Promise<ExecResult> {
    if (
      !Array.isArray(argv) ||
      argv.length === 0 ||
      argv.some((a) => typeof a !== "string" || a.includes("\u0000"))
    )
      throw new EnvError("invalid", "argv must be a non-empty array of strings without NUL");
    const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_TIMEOUT_MS)
      throw new EnvError("invalid", `timeoutMs must be an integer in [1, ${MAX_TIMEOUT_MS}]`);
    const max = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    if (!Number.isInteger(max) || max < 2 || max > 256 * 1024 * 1024)
      throw new EnvError("invalid", "maxOutputBytes must be an integer in [2, 256 MiB]");
    const cwd = opts.cwd === undefined ? this.cwd : await this.resolve(opts.cwd);
    if (opts.signal?.aborted) throw new EnvError("aborted", "aborted before the process started");
    const env = opts.inheritEnv === false ? { ...opts.env } : { ...this.#env, ...opts.env };
    return runProcess(argv, cwd, env, timeoutMs, max, opts);
  }

  async readFile(
    path: string,
    opts: { offset?: number; length?: number; maxBytes?: number; signal?: AbortSignal } = {},
  ) {
    const full = await this.resolve(path);
    const offset = opts.offset ?? 0;
    if (!Number.isSafeInteger(offset) || offset < 0)
      throw new EnvError("invalid", "offset must be an integer ≥ 0", path);
    if (opts.length !== undefined && (!Number.isSafeInteger(opts.length) || opts.length < 0))
      throw new EnvError("invalid", "length must be an integer ≥ 0", path);
    const maxBytes = opts.maxBytes ?? DEFAULT_MAX_READ;
    let fh: Awaited<ReturnType<typeof open>> | undefined;
    try {
      fh = await open(full, "r");
      const st = await fh.stat();
      if (st.isDirectory()) throw new EnvError("is_directory", `${path} is a directory`, path);
      const length = opts.length ?? Math.max(0, st.size - offset);
      if (opts.length === undefined && length > maxBytes)
        throw new EnvError(
          "too_large",
          `${path} is ${st.size} bytes; read it in ranges (at most ${maxBytes})`,
          path,
        );
      const buf = Buffer.alloc(Math.min(length, Math.max(0, st.size - offset)));
      let got = 0;
      while (got < buf.length) {
        if (opts.signal?.aborted) throw new EnvError("aborted", "aborted", path);
        const { bytesRead } = await fh.read(buf, got, buf.length - got, offset + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      return new Uint8Array(buf.buffer, buf.byteOffset, got);
    } catch (e) {
      throw envError(e, path);
    } finally {
      await fh?.close().catch(() => {});
    }
  }

  async writeFile(
    path: string,
    data: string | Uint8Array,
    opts: { mkdirs?: boolean; exclusive?: boolean; signal?: AbortSignal } = {},
  ) {
    const full = await this.resolve(path);
    if (typeof data !== "string" && !(data instanceof Uint8Array))
      throw new EnvError("invalid", "data must be a string or bytes", path);
    const tmp = join(dirname(full), `.${basename(full)}.${randomBytes(6).toString("hex")}.tmp`);
    try {
      if (opts.signal?.aborted) throw new EnvError("aborted", "aborted", path);
      const st = await lstat(full).catch(() => null);
      if (st?.isDirectory()) throw new EnvError("is_directory", `${path} is a directory`, path);
      if (st && opts.exclusive) throw new EnvError("exists", `${path} exists`, path);
      if (opts.mkdirs ?? true) await mkdir(dirname(full), { recursive: true });
      await writeFile(tmp, data, { flag: "wx", mode: st ? st.mode & 0o7777 : 0o644 });
      await rename(tmp, full);
    } catch (e) {
      await rm(tmp, { force: true }).catch(() => {});
      throw envError(e, path);
    }
  }

  async stat(path: string): Promise<FileInfo | null> {
    const full = await this.resolve(path);
    try {
      const s = await lstat(full);
      return { path: full, name: basename(full), kind: kindOf(s), size: s.size, mtimeMs: s.mtimeMs };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw envError(e, path);
    }
  }

  async list(path: string, opts: { limit?: number } = {}): Promise<FileInfo[]> {
    const limit = opts.limit ?? 1_000;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST)
      throw new EnvError("invalid", `limit must be an integer in [1, ${MAX_LIST}]`, path);
    const full = await this.resolve(path);
    try {
      const names = (await readdir(full)).sort();
      const out: FileInfo[] = [];
      for (const name of names.slice(0, limit)) {
        const p = join(full, name);
        const s = await lstat(p).catch(() => null);
        if (s) out.push({ path: p, name, kind: kindOf(s), size: s.size, mtimeMs: s.mtimeMs });
      }
      return out;
    } catch (e) {
      throw envError(e, path);
    }
  }

  /** spec §19.30: a group of this host, identified by its boot id and leader's start time. */
  reap(group: ProcessGroupRecord): Promise<ReapOutcome> {
    return reapGroup(group);
  }

  /** Lock turns are taken in call order: the key (the real path) is found one call at a time. */
  #keying: Promise<unknown> = Promise.resolve();

  async withWriteLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
    const turn = this.#keying.then(async () => {
      const full = await this.resolve(path);
      const key = await realpath(full).catch(() => full);
      const before = writeLocks.get(key) ?? Promise.resolve();
      let release!: () => void;
      const mine = new Promise<void>((r) => {
        release = r;
      });
      const chained = before.then(() => mine);
      writeLocks.set(key, chained);
      return { key, before, chained, release };
    });
    this.#keying = turn.catch(() => {});
    const t = await turn;
    await t.before;
    try {
      return await fn();
    } finally {
      t.release();
      if (writeLocks.get(t.key) === t.chained) writeLocks.delete(t.key);
    }
  }
}

function inside(root: string, target: string): boolean {
  const rel = relative(root, target);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

function runProcess(
  argv: readonly string[],
  cwd: string,
  env: Record<string, string | undefined>,
  timeoutMs: number,
  max: number,
  opts: ExecOptions,
): Promise<ExecResult> {
  const t0 = performance.now();
  return new Promise<ExecResult>((resolvePromise, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), {
      cwd,
      env,
      detached: true,
      stdio: [opts.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    });
    // spec §19.30: the group's identity, read while the leader is there (at worst a zombie not yet reaped).
    try {
      if (child.pid && opts.onStart) opts.onStart(recordGroup(child.pid));
    } catch {
      // The caller's record failed; the command runs on and is bounded as ever (spec §19.3).
    }
    const out = new HeadTail(max);
    const bytes = { stdout: 0, stderr: 0 };
    const err = new HeadTail(max);
    let timedOut = false;
    let aborted = false;
    let exited: { code: number | null; signal: string | null } | null = null;
    let killTimer: NodeJS.Timeout | undefined;
    let pipeTimer: NodeJS.Timeout | undefined;
    let open = 2;
    const killGroup = (sig: NodeJS.Signals) => {
      try {
        if (child.pid) process.kill(-child.pid, sig);
      } catch {
        // The group is gone.
      }
    };
    const stop = () => {
      killGroup("SIGTERM");
      killTimer ??= setTimeout(() => killGroup("SIGKILL"), KILL_GRACE_MS);
    };
    const timer = setTimeout(() => {
      timedOut = true;
      stop();
    }, timeoutMs);
    const onAbort = () => {
      aborted = true;
      stop();
    };
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(killTimer);
      clearTimeout(pipeTimer);
      opts.signal?.removeEventListener("abort", onAbort);
      // A timeout or abort killed the group; a normal exit may leave grandchildren: the group goes too.
      if (timedOut || aborted) killGroup("SIGKILL");
      resolvePromise({
        exitCode: exited?.code ?? null,
        signal: exited?.signal ?? null,
        stdout: out.text(),
        stderr: err.text(),
        stdoutBytes: bytes.stdout,
        stderrBytes: bytes.stderr,
        truncated: out.dropped || err.dropped,
        timedOut,
        aborted,
        durationMs: performance.now() - t0,
      });
    };
    const pipe = (stream: NodeJS.ReadableStream, kept: HeadTail, name: "stdout" | "stderr") => {
      const dec = new StringDecoder("utf8");
      stream.on("data", (b: Buffer) => {
        const text = dec.write(b);
        bytes[name] += b.length;
        kept.add(text);
        if (text) opts.onOutput?.(name, text);
      });
      stream.on("close", () => {
        const rest = dec.end();
        if (rest) kept.add(rest);
        if (--open === 0 && exited) finish();
      });
    };
    pipe(child.stdout!, out, "stdout");
    pipe(child.stderr!, err, "stderr");
    if (opts.stdin !== undefined) {
      child.stdin!.on("error", () => {});
      child.stdin!.end(opts.stdin);
    }
    child.once("error", (e) => {
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      reject(new EnvError("spawn_failed", `cannot run ${argv[0]}: ${e.message}`, undefined, { cause: e }));
    });
    child.once("exit", (code, signal) => {
      exited = { code, signal };
      if (open === 0) finish();
      // A grandchild that keeps the pipes open must not hold the result for ever.
      else pipeTimer = setTimeout(finish, EXIT_PIPE_MS);
    });
  });
}
