/**
 * The `tmux` worker adapter (spec §20.17): each session is a tmux session on
 * the adapter's own server socket (`tmux -L <socket>`), named by the spawn
 * name, with its reports in a session directory (session-dir.ts). This is
 * how people run fleets of terminal coding agents: an owner can attach to
 * any session (`tmux -L ratchet attach -t <name>`) and work in it.
 *
 * - start: `tmux new-session -d` runs the command under a wrapper that
 *   records its exit code in the session directory.
 * - read: `ended` once the exit is recorded or the tmux session is gone;
 *   `suspended` while the pane's process is stopped; else `running`, with
 *   activity from changes of the pane's screen, and the owner seen whenever
 *   a client is attached (`lastOwnerAt`).
 * - suspend / resume: SIGSTOP to the processes of the pane's group but its
 *   wrapper (see suspend) / SIGCONT to the group; a
 *   message is typed into the pane (`send-keys`); an ended session is started
 *   again under its name (RATCHET_RESUME=1).
 * - stop: SIGTERM to the pane's group, then kill-session on the next call.
 * - output: the pane's history and screen down to the cursor's line
 *   (`capture-pane -J`, at most HISTORY_LINES back); gone with the pane.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { type Clock, systemClock } from "../../core/clock.js";
import type { SessionReading } from "../../core/dispatch/model.js";
import type { KeptSession } from "../../core/dispatch/sessions.js";
import type {
  Closeout,
  ControlOutcome,
  ForgetOutcome,
  OutputOptions,
  OutputOutcome,
  SpawnRequest,
  StartOutcome,
  WorkerAdapter,
} from "./adapter.js";
import { MAX_OUTPUT_BYTES, outputBytes, tailText } from "./adapter.js";
import { groupFollowers, procState, SESSION_NAME_RE, SessionDirs, signalGroup } from "./session-dir.js";

const run = promisify(execFile);

export interface TmuxWorkerOptions {
  kind?: string;
  root: string;
  /** The tmux server socket name (`tmux -L`), default "ratchet". */
  socket?: string;
  maxSessions?: number;
  clock?: Clock;
  /** Bound on each tmux command (default 10 s). */
  commandTimeoutMs?: number;
}

const WRAPPER =
  '"$@"; echo $? >"$RATCHET_SESSION_DIR/exit.tmp"; mv "$RATCHET_SESSION_DIR/exit.tmp" "$RATCHET_SESSION_DIR/exit"';

/** How far back in a pane's history output() reads (tmux keeps at most its history-limit anyway). */
const HISTORY_LINES = 10_000;

interface Pane {
  pid: number;
  attached: boolean;
}

export class TmuxWorker implements WorkerAdapter {
  readonly kind: string;
  readonly dirs: SessionDirs;
  readonly socket: string;
  readonly #max: number;
  readonly #timeoutMs: number;

  constructor(o: TmuxWorkerOptions) {
    this.kind = o.kind ?? "tmux";
    this.dirs = new SessionDirs(o.root, o.clock ?? systemClock);
    this.socket = o.socket ?? "ratchet";
    this.#max = o.maxSessions ?? Number.POSITIVE_INFINITY;
    this.#timeoutMs = o.commandTimeoutMs ?? 10_000;
  }

  /** Runs tmux on our socket; null when it fails (no server, no such session). */
  async #tmux(args: readonly string[], maxBuffer = 1024 * 1024): Promise<string | null> {
    try {
      const r = await run("tmux", ["-L", this.socket, "-f", "/dev/null", ...args], {
        timeout: this.#timeoutMs,
        maxBuffer,
      });
      return r.stdout;
    } catch {
      return null;
    }
  }

  async #pane(session: string): Promise<Pane | null> {
    const out = await this.#tmux([
      "display-message",
      "-p",
      "-t",
      `=${session}:`,
      "#{pane_pid} #{session_attached}",
    ]);
    if (out === null) return null;
    const [pid, attached] = out.trim().split(" ");
    const n = Number(pid);
    return Number.isInteger(n) && n > 0 ? { pid: n, attached: Number(attached) > 0 } : null;
  }

  async #live(): Promise<number> {
    const out = await this.#tmux(["list-sessions", "-F", "#{session_name}"]);
    if (out === null) return 0;
    const mine = new Set(this.dirs.list());
    return out.split("\n").filter((n) => mine.has(n) && !this.dirs.hasExited(n)).length;
  }

  async #launch(session: string, req: SpawnRequest, extra: Record<string, string>): Promise<string | null> {
    const dir = this.dirs.dir(session);
    const env: Record<string, string> = { ...req.env, ...extra, RATCHET_SESSION_DIR: dir };
    if (req.prompt !== null) env.RATCHET_PROMPT = req.prompt;
    const flags = Object.entries(env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
    const cwd = req.cwd ? ["-c", req.cwd] : [];
    const out = await this.#tmux([
      "new-session", "-d", "-s", session, "-x", "200", "-y", "50", ...cwd, ...flags,
      "--", "sh", "-c", WRAPPER, "ratchet-session", ...req.command,
    ]); // biome-ignore format: one tmux argument list
    return out === null ? `tmux could not start session ${session}` : null;
  }

  async start(req: SpawnRequest): Promise<StartOutcome> {
    if (!SESSION_NAME_RE.test(req.name))
      return { kind: "refused", cause: "other", message: `bad session name ${req.name}` };
    if (this.dirs.exists(req.name)) return { kind: "started", session: req.name };
    if ((await this.#live()) >= this.#max)
      return { kind: "refused", cause: "capacity", message: `${this.#max} sessions run` };
    this.dirs.create(req.name, req);
    const failed = await this.#launch(req.name, req, {});
    if (failed !== null) {
      this.dirs.remove(req.name);
      return { kind: "refused", cause: "other", message: failed };
    }
    return { kind: "started", session: req.name };
  }

  #owner(session: string, attached: boolean): number | null {
    const path = join(this.dirs.dir(session), "owner");
    if (attached) {
      const now = this.dirs.clock.now();
      writeFileSync(path, String(now));
      return now;
    }
    try {
      const n = Number(readFileSync(path, "utf8"));
      return Number.isFinite(n) ? n : null;
    } catch {
      return null;
    }
  }

  async read(session: string): Promise<SessionReading> {
    if (!this.dirs.exists(session)) return { kind: "absent" };
    if (this.dirs.hasExited(session)) return { kind: "ended", exitCode: this.dirs.exitCode(session) };
    const pane = await this.#pane(session);
    if (pane === null || procState(pane.pid, null) === "dead")
      return { kind: "ended", exitCode: this.dirs.exitCode(session) };
    if (this.#isStopped(pane)) return { kind: "suspended", asked: this.dirs.wasSuspendAsked(session) };
    const screen = (await this.#tmux(["capture-pane", "-p", "-t", `=${session}:`])) ?? "";
    const mark = createHash("sha1").update(screen).digest("hex");
    const r = this.dirs.reports(session);
    return {
      kind: "running",
      attention: r.attention,
      lastActivityAt: this.dirs.activity(session, mark),
      lastOwnerAt: this.#owner(session, pane.attached),
      usageLimitResetsAt: r.usageLimitResetsAt,
      agentSession: r.agentSession ?? session,
    };
  }

  async find(name: string): Promise<string | null> {
    return this.dirs.exists(name) ? name : null;
  }

  async suspend(session: string): Promise<ControlOutcome> {
    if (!this.dirs.exists(session)) return { kind: "absent" };
    const pane = await this.#pane(session);
    if (pane === null || this.dirs.hasExited(session))
      return { kind: "refused", cause: "other", message: "the session ended" };
    this.dirs.markSuspend(session);
    // tmux continues a pane whose own process stops (server_child_stopped sends SIGCONT to its
    // group), and the group is orphaned, so the kernel drops SIGTSTP/SIGTTOU. So the wrapper runs
    // on and everything it started stops: the pane's other processes get SIGSTOP one by one.
    const followers = groupFollowers(pane.pid);
    for (const pid of followers) signalGroup(pid, "SIGSTOP");
    return followers.length > 0
      ? { kind: "done" }
      : { kind: "refused", cause: "other", message: "the session has nothing to suspend" };
  }

  /** Stopped when every process the wrapper started is stopped. */
  #isStopped(pane: Pane): boolean {
    const followers = groupFollowers(pane.pid);
    return followers.length > 0 && followers.every((pid) => procState(pid, null) === "stopped");
  }

  async resume(session: string, message: string | null): Promise<ControlOutcome> {
    if (!this.dirs.exists(session)) return { kind: "absent" };
    const pane = await this.#pane(session);
    if (pane === null || this.dirs.hasExited(session)) return this.#revive(session, message);
    this.dirs.clearSuspend(session);
    this.dirs.touch(session);
    signalGroup(pane.pid, "SIGCONT");
    if (message !== null) {
      const typed = await this.#tmux(["send-keys", "-t", `=${session}:`, "-l", message]);
      const entered =
        typed !== null && (await this.#tmux(["send-keys", "-t", `=${session}:`, "Enter"])) !== null;
      if (!entered) return { kind: "refused", cause: "other", message: "tmux could not type the message" };
    }
    return { kind: "done" };
  }

  async #revive(session: string, message: string | null): Promise<ControlOutcome> {
    const req = this.dirs.spawnOf(session);
    if (req === null) return { kind: "refused", cause: "other", message: "no spawn request kept" };
    if ((await this.#live()) >= this.#max)
      return { kind: "refused", cause: "capacity", message: `${this.#max} sessions run` };
    await this.#tmux(["kill-session", "-t", `=${session}`]);
    this.dirs.clearSuspend(session);
    this.dirs.clearReports(session);
    this.dirs.touch(session);
    const extra: Record<string, string> = { RATCHET_RESUME: "1" };
    if (message !== null) extra.RATCHET_RESUME_MESSAGE = message;
    const failed = await this.#launch(session, req, extra);
    return failed === null ? { kind: "done" } : { kind: "refused", cause: "other", message: failed };
  }

  async resumeKept(kept: KeptSession, req: SpawnRequest): Promise<StartOutcome> {
    if (!this.dirs.exists(kept.session))
      return { kind: "refused", cause: "other", message: "the kept session is gone" };
    const out = await this.resume(kept.session, req.prompt);
    if (out.kind === "refused") return { kind: "refused", cause: out.cause, message: out.message };
    if (out.kind === "absent")
      return { kind: "refused", cause: "other", message: "the kept session is gone" };
    return { kind: "started", session: kept.session };
  }

  async stop(session: string): Promise<ControlOutcome> {
    if (!this.dirs.exists(session)) return { kind: "absent" };
    const pane = await this.#pane(session);
    if (pane === null) return { kind: "done" };
    const asked = join(this.dirs.dir(session), "stop-asked");
    if (this.dirs.wasStopAsked(session)) await this.#tmux(["kill-session", "-t", `=${session}`]);
    else {
      writeFileSync(asked, String(this.dirs.clock.now()));
      signalGroup(pane.pid, "SIGTERM");
      signalGroup(pane.pid, "SIGCONT");
    }
    return { kind: "done" };
  }

  async forget(session: string): Promise<ForgetOutcome> {
    if (!SESSION_NAME_RE.test(session) || !this.dirs.exists(session)) return { kind: "absent" };
    await this.#tmux(["kill-session", "-t", `=${session}`]);
    if ((await this.#pane(session)) !== null)
      return { kind: "refused", message: "tmux did not kill the session" };
    this.dirs.remove(session);
    return { kind: "forgotten" };
  }

  async closeout(session: string): Promise<Closeout | null> {
    return this.dirs.exists(session) ? this.dirs.closeout(session) : null;
  }

  /**
   * spec §22.11: the pane's lines from at most HISTORY_LINES back down to the cursor's line, wrapped
   * lines joined; the cursor's line keeps no line break (it may still be being printed). Its last
   * ≤ maxBytes; absent once the pane is gone.
   */
  async output(session: string, o?: OutputOptions): Promise<OutputOutcome> {
    const max = outputBytes(o);
    if (!this.dirs.exists(session)) return { kind: "absent" };
    const at = await this.#tmux(["display-message", "-p", "-t", `=${session}:`, "#{cursor_y}"]);
    const y = Number((at ?? "").trim());
    if (at === null || !Number.isInteger(y)) return { kind: "absent" };
    const t = `=${session}:`;
    const lines = ["capture-pane", "-p", "-J", "-S", `-${HISTORY_LINES}`, "-E", String(y), "-t", t];
    const out = await this.#tmux(lines, 8 * MAX_OUTPUT_BYTES);
    if (out === null) return { kind: "absent" };
    // The cursor's line ends the text with no line break: empty at column 0, else maybe half-printed.
    const text = out.endsWith("\n") ? out.slice(0, -1) : out;
    return { kind: "output", ...tailText(Buffer.from(text, "utf8"), max) };
  }
}
