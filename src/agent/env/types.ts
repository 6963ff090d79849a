/**
 * The execution environment a conversation's tools run in (spec §19.1): processes and files,
 * behind one interface so a container or a remote machine can stand in for the local one. Every
 * implementation passes the conformance suite (./conformance.ts, exported from @ratchet-engine/ratchet/agent).
 *
 * Paths are resolved inside the environment's `cwd`; a path that leaves it (`..`, an absolute path
 * elsewhere, a symlink pointing out) is refused with `escape` unless the environment was made with
 * `allowOutside` (spec §19.2).
 */
import { RatchetError } from "../../errors.js";
import type { ProcessGroupRecord, ReapOutcome } from "./groups.js";

export type { ProcessGroupRecord, ReapOutcome } from "./groups.js";

/** Why an environment call failed; stable across implementations (the conformance suite checks them). */
export type EnvErrorKind =
  | "not_found"
  | "exists"
  | "is_directory"
  | "not_directory"
  | "permission_denied"
  | "escape"
  | "too_large"
  | "invalid"
  | "spawn_failed"
  | "aborted"
  | "unknown";

export class EnvError extends RatchetError {
  constructor(
    readonly kind: EnvErrorKind,
    message: string,
    readonly path?: string,
    options?: { cause?: unknown },
  ) {
    super("RATCHET_ENV", message, options);
  }
}

export type FileKind = "file" | "directory" | "symlink" | "other";

export interface FileInfo {
  /** The path as given, resolved inside cwd (absolute). */
  path: string;
  name: string;
  kind: FileKind;
  size: number;
  mtimeMs: number;
}

export interface ExecOptions {
  /** Working directory, resolved inside the environment's cwd. Default: cwd. */
  cwd?: string;
  /** Variables added to (or, with `inheritEnv: false`, instead of) the environment's own. */
  env?: Record<string, string>;
  inheritEnv?: boolean;
  /** Kill the process group after this long (spec §19.3). Default 120 s; at most 24 h. */
  timeoutMs?: number;
  /** Abort kills the process group at once. */
  signal?: AbortSignal;
  /** Each piece of output as it arrives, decoded as UTF-8. */
  onOutput?: (stream: "stdout" | "stderr", text: string) => void;
  /** Characters kept per stream (its head and tail, spec §19.4); the rest is counted, not kept. Default 1 Mi. */
  maxOutputBytes?: number;
  /** Bytes written to the process's stdin, then closed. Default: stdin closed at once. */
  stdin?: string;
  /**
   * Told once, right after the process started, what identifies its process group (spec §19.30),
   * so a caller can record it durably and a later attempt can `reap` it if this one dies.
   */
  onStart?: (group: ProcessGroupRecord) => void;
}

export interface ExecResult {
  /** The exit code, or null when a signal ended the process. */
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  /** Bytes the process wrote per stream, kept or not. */
  stdoutBytes: number;
  stderrBytes: number;
  /** Output was dropped from the middle of a stream past maxOutputBytes. */
  truncated: boolean;
  timedOut: boolean;
  aborted: boolean;
  durationMs: number;
}

export interface ReadOptions {
  /** Byte offset to start at. Default 0. */
  offset?: number;
  /** Bytes to read at most. Default: the whole file, refused past maxBytes. */
  length?: number;
  /** Largest whole-file read. Default 16 MiB (`too_large` beyond). */
  maxBytes?: number;
  signal?: AbortSignal;
}

export interface WriteOptions {
  /** Create missing parent directories. Default true. */
  mkdirs?: boolean;
  /** Refuse if the file exists (`exists`). Default false. */
  exclusive?: boolean;
  signal?: AbortSignal;
}

export interface ExecutionEnv {
  /** The directory tools work in; every relative path is resolved against it. */
  readonly cwd: string;
  /** The absolute path of `path`, or `escape` (spec §19.2). */
  resolve(path: string): Promise<string>;
  /** Runs argv[0] with the rest as its arguments, no shell (use ["bash", "-c", …] for one). */
  exec(argv: readonly string[], opts?: ExecOptions): Promise<ExecResult>;
  readFile(path: string, opts?: ReadOptions): Promise<Uint8Array>;
  /** Writes the file whole (atomically: a temp file renamed over it). */
  writeFile(path: string, data: string | Uint8Array, opts?: WriteOptions): Promise<void>;
  /** null when nothing is there. Does not follow a final symlink. */
  stat(path: string): Promise<FileInfo | null>;
  /** Entries of a directory by name, at most `limit` (default 1,000). */
  list(path: string, opts?: { limit?: number }): Promise<FileInfo[]>;
  /**
   * Runs `fn` while holding the write lock of `path`: writes to one file are serialised across the
   * process (spec §19.5), so two tool calls editing one file cannot interleave read and write.
   */
  withWriteLock<T>(path: string, fn: () => Promise<T>): Promise<T>;
  /**
   * Ends a process group an earlier exec started (its `onStart` record) if it still runs: used when
   * the worker that ran it died (spec §19.30). Optional: without it a leftover group cannot be reached.
   */
  reap?(group: ProcessGroupRecord): Promise<ReapOutcome>;
}
