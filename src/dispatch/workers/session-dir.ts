/**
 * What the `process` and `tmux` adapters keep per session on disk, under
 * their root directory: `<root>/<session>/`. Every runner on the machine
 * sees the same files, so a runner that died mid-pass leaves nothing only
 * it knew. The session's command gets the directory as RATCHET_SESSION_DIR
 * and reports through files in it:
 * - `attention`: `working`, `turn-ended` or `waiting` (default `working`);
 * - `agent-session`: the agent's own session id;
 * - `usage-limit`: the instant (ms) its usage limit resets;
 * - `closeout.json`: its close-out (spec §20.17).
 * The adapter keeps `spawn.json` (the request), `activity.json` (the last
 * output mark it saw and when, on the injected clock) and `suspend-asked`.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Clock } from "../../core/clock.js";
import { ATTENTIONS, type Attention, type Instant } from "../../core/dispatch/model.js";
import type { SpawnRequest } from "../../core/dispatch/route.js";
import { type Closeout, MAX_CLOSEOUT_BYTES, MAX_REPORT_CHARS, parseCloseout } from "./adapter.js";

/** Session names are file and tmux names: letters, digits, `_` and `-`, at most 100. */
export const SESSION_NAME_RE = /^[A-Za-z0-9_-]{1,100}$/;
/** The most sessions an adapter lists (capacity counts, finds). */
export const MAX_LISTED_SESSIONS = 10_000;

export interface Reports {
  readonly attention: Attention;
  readonly agentSession: string | null;
  readonly usageLimitResetsAt: Instant | null;
}

function readSmall(path: string, max = MAX_REPORT_CHARS): string | null {
  try {
    return readFileSync(path, "utf8").slice(0, max).trim();
  } catch {
    return null;
  }
}

function writeAtomic(path: string, text: string): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

export class SessionDirs {
  constructor(
    readonly root: string,
    readonly clock: Clock,
  ) {
    mkdirSync(root, { recursive: true });
  }

  dir(session: string): string {
    if (!SESSION_NAME_RE.test(session)) throw new Error(`bad session name ${JSON.stringify(session)}`);
    return join(this.root, session);
  }

  exists(session: string): boolean {
    return SESSION_NAME_RE.test(session) && existsSync(join(this.dir(session), "spawn.json"));
  }

  create(session: string, req: SpawnRequest): string {
    const dir = this.dir(session);
    mkdirSync(dir, { recursive: true });
    writeAtomic(join(dir, "activity.json"), JSON.stringify({ mark: "", at: this.clock.now() }));
    writeAtomic(join(dir, "spawn.json"), JSON.stringify(req));
    return dir;
  }

  spawnOf(session: string): SpawnRequest | null {
    const text = readSmall(join(this.dir(session), "spawn.json"), 1 << 20);
    return text ? (JSON.parse(text) as SpawnRequest) : null;
  }

  /**
   * The last activity: the clock's now when the output mark (a size, a
   * hash of the screen) differs from the one seen before, else the instant
   * it last changed.
   */
  activity(session: string, mark: string): Instant {
    const path = join(this.dir(session), "activity.json");
    const text = readSmall(path, 4_096);
    const seen = text ? (JSON.parse(text) as { mark: string; at: number }) : null;
    if (seen && seen.mark === mark) return seen.at;
    const at = this.clock.now();
    writeAtomic(path, JSON.stringify({ mark, at }));
    return at;
  }

  /** Marks the activity as now (a revival or a message counts as activity). */
  touch(session: string): void {
    const path = join(this.dir(session), "activity.json");
    const text = readSmall(path, 4_096);
    const seen = text ? (JSON.parse(text) as { mark: string }) : { mark: "" };
    writeAtomic(path, JSON.stringify({ mark: seen.mark, at: this.clock.now() }));
  }

  reports(session: string): Reports {
    const dir = this.dir(session);
    const a = readSmall(join(dir, "attention"));
    const attention = (ATTENTIONS as readonly string[]).includes(a ?? "") ? (a as Attention) : "working";
    const agentSession = readSmall(join(dir, "agent-session")) || null;
    const limit = Number(readSmall(join(dir, "usage-limit")) ?? Number.NaN);
    return {
      attention,
      agentSession,
      usageLimitResetsAt: Number.isFinite(limit) && limit > 0 ? limit : null,
    };
  }

  /** Forgets the attention a previous run reported (a revival starts working). */
  clearReports(session: string): void {
    for (const f of ["attention", "usage-limit", "closeout.json", "exit", "stop-asked"])
      rmSync(join(this.dir(session), f), { force: true });
  }

  closeout(session: string): Closeout | null {
    const text = readSmall(join(this.dir(session), "closeout.json"), MAX_CLOSEOUT_BYTES + 1);
    return text === null ? null : parseCloseout(text);
  }

  markSuspend(session: string): void {
    writeFileSync(join(this.dir(session), "suspend-asked"), String(this.clock.now()));
  }

  clearSuspend(session: string): void {
    rmSync(join(this.dir(session), "suspend-asked"), { force: true });
  }

  wasSuspendAsked(session: string): boolean {
    return existsSync(join(this.dir(session), "suspend-asked"));
  }

  wasStopAsked(session: string): boolean {
    return existsSync(join(this.dir(session), "stop-asked"));
  }

  /** The exit code the wrapper recorded, or null (none yet, or killed before it could). */
  exitCode(session: string): number | null {
    const text = readSmall(join(this.dir(session), "exit"));
    const n = text === null ? Number.NaN : Number(text);
    return Number.isInteger(n) ? n : null;
  }

  hasExited(session: string): boolean {
    return existsSync(join(this.dir(session), "exit"));
  }

  remove(session: string): void {
    rmSync(this.dir(session), { recursive: true, force: true });
  }

  list(): string[] {
    return readdirSync(this.root)
      .filter((n) => SESSION_NAME_RE.test(n))
      .slice(0, MAX_LISTED_SESSIONS);
  }
}

export type ProcState = "running" | "stopped" | "dead";

/**
 * A process's state from /proc (Linux): stopped (`T`, `t`), dead (gone, or
 * a zombie), or running. `startTime` guards against a reused pid: a process
 * that started at another time is not ours.
 */
export function procState(pid: number, startTime: string | null): ProcState {
  const stat = readSmall(`/proc/${pid}/stat`, 4_096);
  if (stat === null) return "dead";
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  if (startTime !== null && fields[19] !== startTime) return "dead";
  const s = fields[0];
  if (s === "Z" || s === "X") return "dead";
  return s === "T" || s === "t" ? "stopped" : "running";
}

export function procStartTime(pid: number): string | null {
  const stat = readSmall(`/proc/${pid}/stat`, 4_096);
  if (stat === null) return null;
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null;
}

/**
 * Sends a signal to a process group; false when it is gone. A leader that
 * has not reached setsid() yet (just spawned) has no group: it gets the
 * signal alone, and whatever it starts inherits its state.
 */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  for (const target of [-pgid, pgid]) {
    try {
      process.kill(target, signal);
      return true;
    } catch {
      // Try the leader alone, then give up.
    }
  }
  return false;
}

/** The most processes a group scan reads from /proc. */
const MAX_PROC_SCAN = 100_000;

/** The pids of a process group's members other than its leader (from /proc, bounded). */
export function groupFollowers(pgid: number): number[] {
  const out: number[] = [];
  let names: string[];
  try {
    names = readdirSync("/proc").slice(0, MAX_PROC_SCAN);
  } catch {
    return out;
  }
  for (const name of names) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === pgid) continue;
    const stat = readSmall(`/proc/${pid}/stat`, 4_096);
    if (stat === null) continue;
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(fields[2]) === pgid && fields[0] !== "Z") out.push(pid);
  }
  return out;
}

/**
 * A session's process group as one state: dead when its leader is gone
 * (or is another process now); stopped when some member is stopped and the
 * rest are stopped or blocked in the kernel (`D`: a shell that vforked a
 * child we stopped before it could exec waits there); else running.
 */
export function groupState(pgid: number, startTime: string | null): ProcState {
  const leader = procState(pgid, startTime);
  if (leader === "dead") return "dead";
  const states = [rawState(pgid), ...groupFollowers(pgid).map(rawState)];
  const stopped = states.some((x) => x === "T" || x === "t");
  return stopped && states.every((x) => x === "T" || x === "t" || x === "D" || x === null)
    ? "stopped"
    : "running";
}

function rawState(pid: number): string | null {
  const stat = readSmall(`/proc/${pid}/stat`, 4_096);
  return stat === null ? null : (stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] ?? null);
}
