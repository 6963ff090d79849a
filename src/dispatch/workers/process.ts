/**
 * The `process` worker adapter (spec §20.17): each session is a local
 * command in a process group of its own, with its state in a session
 * directory (session-dir.ts) that every runner on the machine shares.
 *
 * - start: `sh` wraps the command (output to `out.log`, exit code to `exit`),
 *   detached, so the session outlives the runner that started it.
 * - read: `ended` once the wrapper recorded an exit or the group is gone;
 *   `suspended` while the leader is stopped (SIGSTOP); else `running`, with
 *   activity from the growth of `out.log` and attention from the reports.
 * - suspend / resume: SIGSTOP / SIGCONT to the group; resuming an ended
 *   session runs its command again (RATCHET_RESUME=1, the message in
 *   RATCHET_RESUME_MESSAGE), which is also how a kept session is revived.
 * - stop: SIGTERM, and SIGKILL on the next call; forget: SIGKILL and remove.
 * - output: the tail of `out.log`, read at its offset (never the whole file);
 *   it outlives the session's end until the session is forgotten.
 * Linux only: process states are read from /proc.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import { join } from "node:path";
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
import { outputBytes, tailText } from "./adapter.js";
import { groupState, procStartTime, SESSION_NAME_RE, SessionDirs, signalGroup } from "./session-dir.js";

export interface ProcessWorkerOptions {
  /** The worker kind (default "process"). */
  kind?: string;
  /** Where session directories live. */
  root: string;
  /** At most this many live sessions; a start beyond is refused for capacity (default unlimited). */
  maxSessions?: number;
  clock?: Clock;
}

/** The wrapper: records its exit code atomically once the command ends. */
const WRAPPER =
  'cd "$RATCHET_CWD" || exit 126; "$@" >>"$RATCHET_SESSION_DIR/out.log" 2>&1 </dev/null; ' +
  'echo $? >"$RATCHET_SESSION_DIR/exit.tmp"; mv "$RATCHET_SESSION_DIR/exit.tmp" "$RATCHET_SESSION_DIR/exit"';

export class ProcessWorker implements WorkerAdapter {
  readonly kind: string;
  readonly dirs: SessionDirs;
  readonly #max: number;

  constructor(o: ProcessWorkerOptions) {
    this.kind = o.kind ?? "process";
    this.dirs = new SessionDirs(o.root, o.clock ?? systemClock);
    this.#max = o.maxSessions ?? Number.POSITIVE_INFINITY;
  }

  #pid(session: string): { pid: number; start: string | null } | null {
    try {
      const [pid, start] = readFileSync(join(this.dirs.dir(session), "pid"), "utf8")
        .trim()
        .split(" ");
      const n = Number(pid);
      return Number.isInteger(n) && n > 0 ? { pid: n, start: start ?? null } : null;
    } catch {
      return null;
    }
  }

  #state(session: string) {
    const p = this.#pid(session);
    if (p === null || this.dirs.hasExited(session)) return { p, state: "dead" as const };
    return { p, state: groupState(p.pid, p.start) };
  }

  #live(): number {
    return this.dirs.list().filter((s) => this.#pid(s) !== null && this.#state(s).state !== "dead").length;
  }

  #launch(session: string, req: SpawnRequest, extra: Record<string, string>): void {
    const dir = this.dirs.dir(session);
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...req.env,
      ...extra,
      RATCHET_SESSION_DIR: dir,
      RATCHET_CWD: req.cwd ?? process.cwd(),
    };
    if (req.prompt !== null) env.RATCHET_PROMPT = req.prompt;
    const child = spawn("sh", ["-c", WRAPPER, "ratchet-session", ...req.command], {
      detached: true,
      stdio: "ignore",
      env,
    });
    child.unref();
    const pid = child.pid!;
    writeFileSync(join(dir, "pid"), `${pid} ${procStartTime(pid) ?? ""}`.trim());
  }

  async start(req: SpawnRequest): Promise<StartOutcome> {
    if (!SESSION_NAME_RE.test(req.name))
      return { kind: "refused", cause: "other", message: `bad session name ${req.name}` };
    if (this.dirs.exists(req.name) && this.#pid(req.name) !== null)
      return { kind: "started", session: req.name };
    if (this.#live() >= this.#max)
      return { kind: "refused", cause: "capacity", message: `${this.#max} sessions run` };
    try {
      const dir = this.dirs.create(req.name, req);
      if (req.prompt !== null) writeFileSync(join(dir, "prompt"), req.prompt);
      this.#launch(req.name, req, {});
    } catch (e) {
      return { kind: "refused", cause: "other", message: (e as Error).message };
    }
    return { kind: "started", session: req.name };
  }

  async read(session: string): Promise<SessionReading> {
    if (!this.dirs.exists(session) || this.#pid(session) === null) return { kind: "absent" };
    const { state } = this.#state(session);
    if (state === "dead") return { kind: "ended", exitCode: this.dirs.exitCode(session) };
    if (state === "stopped") return { kind: "suspended", asked: this.dirs.wasSuspendAsked(session) };
    let size = 0;
    try {
      size = statSync(join(this.dirs.dir(session), "out.log")).size;
    } catch {
      // No output yet.
    }
    const r = this.dirs.reports(session);
    return {
      kind: "running",
      attention: r.attention,
      lastActivityAt: this.dirs.activity(session, String(size)),
      lastOwnerAt: null,
      usageLimitResetsAt: r.usageLimitResetsAt,
      // A local command can always be run again, so the session itself is the agent session.
      agentSession: r.agentSession ?? session,
    };
  }

  async find(name: string): Promise<string | null> {
    return this.dirs.exists(name) ? name : null;
  }

  async suspend(session: string): Promise<ControlOutcome> {
    if (!this.dirs.exists(session)) return { kind: "absent" };
    const { p, state } = this.#state(session);
    if (p === null || state === "dead")
      return { kind: "refused", cause: "other", message: "the session ended" };
    this.dirs.markSuspend(session);
    return signalGroup(p.pid, "SIGSTOP")
      ? { kind: "done" }
      : { kind: "refused", cause: "other", message: "gone" };
  }

  async resume(session: string, message: string | null): Promise<ControlOutcome> {
    if (!this.dirs.exists(session)) return { kind: "absent" };
    const { p, state } = this.#state(session);
    if (state === "dead") return this.#revive(session, message);
    if (message !== null) writeFileSync(join(this.dirs.dir(session), "message"), message);
    this.dirs.clearSuspend(session);
    this.dirs.touch(session);
    if (state === "stopped" && !signalGroup(p!.pid, "SIGCONT"))
      return { kind: "refused", cause: "other", message: "gone" };
    return { kind: "done" };
  }

  #revive(session: string, message: string | null): ControlOutcome {
    const req = this.dirs.spawnOf(session);
    if (req === null) return { kind: "refused", cause: "other", message: "no spawn request kept" };
    if (this.#live() >= this.#max)
      return { kind: "refused", cause: "capacity", message: `${this.#max} sessions run` };
    this.dirs.clearSuspend(session);
    this.dirs.clearReports(session);
    this.dirs.touch(session);
    const extra: Record<string, string> = { RATCHET_RESUME: "1" };
    if (message !== null) extra.RATCHET_RESUME_MESSAGE = message;
    this.#launch(session, req, extra);
    return { kind: "done" };
  }

  async resumeKept(kept: KeptSession, req: SpawnRequest): Promise<StartOutcome> {
    if (!this.dirs.exists(kept.session))
      return { kind: "refused", cause: "other", message: "the kept session is gone" };
    if (this.#state(kept.session).state !== "dead")
      return { kind: "refused", cause: "other", message: "the kept session still runs" };
    const out = this.#revive(kept.session, req.prompt);
    if (out.kind === "refused") return { kind: "refused", cause: out.cause, message: out.message };
    return { kind: "started", session: kept.session };
  }

  async stop(session: string): Promise<ControlOutcome> {
    if (!this.dirs.exists(session)) return { kind: "absent" };
    const { p, state } = this.#state(session);
    if (p === null || state === "dead") return { kind: "done" };
    const asked = join(this.dirs.dir(session), "stop-asked");
    // The first stop asks; a later one insists (a stopped group must be continued to see SIGTERM).
    const signal = existsSync(asked) ? "SIGKILL" : "SIGTERM";
    writeFileSync(asked, String(this.dirs.clock.now()));
    signalGroup(p.pid, signal);
    signalGroup(p.pid, "SIGCONT");
    return { kind: "done" };
  }

  async forget(session: string): Promise<ForgetOutcome> {
    if (!SESSION_NAME_RE.test(session) || !existsSync(this.dirs.dir(session))) return { kind: "absent" };
    const { p, state } = this.#state(session);
    if (p !== null && state !== "dead") signalGroup(p.pid, "SIGKILL");
    try {
      this.dirs.remove(session);
    } catch (e) {
      return { kind: "refused", message: (e as Error).message };
    }
    return { kind: "forgotten" };
  }

  async closeout(session: string): Promise<Closeout | null> {
    return this.dirs.exists(session) ? this.dirs.closeout(session) : null;
  }

  /** spec §22.11: the last ≤ maxBytes of `out.log`, one positioned read of the tail. */
  async output(session: string, o?: OutputOptions): Promise<OutputOutcome> {
    const max = outputBytes(o);
    if (!this.dirs.exists(session)) return { kind: "absent" };
    let f: Awaited<ReturnType<typeof open>>;
    try {
      f = await open(join(this.dirs.dir(session), "out.log"), "r");
    } catch {
      return { kind: "output", text: "", cut: false }; // nothing printed yet
    }
    try {
      const size = (await f.stat()).size;
      const from = Math.max(0, size - max - 3); // up to 3 more bytes, to cut at a character's start
      const buf = Buffer.alloc(size - from);
      const { bytesRead } = await f.read(buf, 0, buf.length, from);
      const t = tailText(buf.subarray(0, bytesRead), max);
      return { kind: "output", text: t.text, cut: t.cut || from > 0 };
    } finally {
      await f.close();
    }
  }
}
