/**
 * The `fake` worker adapter: sessions in memory, driven by the test. A
 * request's `command[0]` names a program given to the constructor, run at
 * start (and at each revival) with a handle to its session; the test drives
 * a session through the same handle (`worker.session(id)`). It passes the
 * worker contract suite like the real adapters, so a test that uses it
 * tests the rules, not a fake's quirks.
 */
import { type Clock, systemClock } from "../../core/clock.js";
import type { Attention, Instant, SessionReading } from "../../core/dispatch/model.js";
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

type Phase = "running" | "suspended" | "ended";

/** A scripted session, as its program and the test see it. */
export class FakeSession {
  phase: Phase = "running";
  asked = false;
  attentionNow: Attention = "working";
  agent: string | null = null;
  limit: Instant | null = null;
  exitCode: number | null = null;
  report: Closeout | null = null;
  lastActivityAt: Instant;
  lastOwnerAt: Instant | null = null;
  readonly messages: (string | null)[] = [];
  /** A session that ignores stop (the host cannot stop it). */
  stubborn = false;
  output = "";

  constructor(
    readonly id: string,
    readonly request: SpawnRequest,
    readonly clock: Clock,
  ) {
    this.lastActivityAt = clock.now();
  }

  say(text: string): this {
    this.output += text;
    this.lastActivityAt = this.clock.now();
    return this;
  }
  attention(a: Attention): this {
    this.attentionNow = a;
    return this;
  }
  agentSession(id: string | null): this {
    this.agent = id;
    return this;
  }
  usageLimit(resetsAt: Instant | null): this {
    this.limit = resetsAt;
    return this;
  }
  owner(): this {
    this.lastOwnerAt = this.clock.now();
    return this;
  }
  closeout(c: Closeout): this {
    this.report = c;
    return this;
  }
  exit(code: number | null): this {
    this.phase = "ended";
    this.exitCode = code;
    return this;
  }
  /** The host slept the session without being asked. */
  hostSuspend(): this {
    this.phase = "suspended";
    this.asked = false;
    return this;
  }
}

export type FakeProgram = (s: FakeSession) => void;

export interface FakeWorkerOptions {
  kind?: string;
  programs?: Readonly<Record<string, FakeProgram>>;
  maxSessions?: number;
  clock?: Clock;
}

export class FakeWorker implements WorkerAdapter {
  readonly kind: string;
  readonly #sessions = new Map<string, FakeSession>();
  readonly #programs: Readonly<Record<string, FakeProgram>>;
  readonly #max: number;
  readonly #clock: Clock;
  /** Every call, in order, for tests that check what the runner asked. */
  readonly calls: { op: string; session: string }[] = [];
  /** Refuse the next starts with this cause (a test's way to script a refusal). */
  refuseNext: { cause: "capacity" | "other"; count: number } | null = null;
  /** Refuse this many forgets (a host that does not confirm). */
  refuseForgets = 0;
  /** Fail this many output() reads (a host that does not answer), then answer again. */
  failOutputs = 0;

  constructor(o: FakeWorkerOptions = {}) {
    this.kind = o.kind ?? "fake";
    this.#programs = o.programs ?? {};
    this.#max = o.maxSessions ?? Number.POSITIVE_INFINITY;
    this.#clock = o.clock ?? systemClock;
  }

  session(id: string): FakeSession {
    const s = this.#sessions.get(id);
    if (!s) throw new Error(`no fake session ${id}`);
    return s;
  }

  get sessions(): readonly FakeSession[] {
    return [...this.#sessions.values()];
  }

  #run(s: FakeSession): void {
    this.#programs[s.request.command[0] ?? ""]?.(s);
  }

  #refusal(): StartOutcome | null {
    if (this.refuseNext && this.refuseNext.count > 0) {
      this.refuseNext.count--;
      return { kind: "refused", cause: this.refuseNext.cause, message: "scripted refusal" };
    }
    const live = [...this.#sessions.values()].filter((s) => s.phase !== "ended").length;
    return live >= this.#max
      ? { kind: "refused", cause: "capacity", message: `${this.#max} sessions run` }
      : null;
  }

  async start(req: SpawnRequest): Promise<StartOutcome> {
    this.calls.push({ op: "start", session: req.name });
    if (!/^[A-Za-z0-9_-]{1,100}$/.test(req.name))
      return { kind: "refused", cause: "other", message: "bad name" };
    if (this.#sessions.has(req.name)) return { kind: "started", session: req.name };
    const refused = this.#refusal();
    if (refused) return refused;
    const s = new FakeSession(req.name, req, this.#clock);
    this.#sessions.set(req.name, s);
    this.#run(s);
    return { kind: "started", session: req.name };
  }

  async read(session: string): Promise<SessionReading> {
    const s = this.#sessions.get(session);
    if (!s) return { kind: "absent" };
    if (s.phase === "ended") return { kind: "ended", exitCode: s.exitCode };
    if (s.phase === "suspended") return { kind: "suspended", asked: s.asked };
    return {
      kind: "running",
      attention: s.attentionNow,
      lastActivityAt: s.lastActivityAt,
      lastOwnerAt: s.lastOwnerAt,
      usageLimitResetsAt: s.limit,
      agentSession: s.agent ?? session,
    };
  }

  async find(name: string): Promise<string | null> {
    return this.#sessions.has(name) ? name : null;
  }

  async suspend(session: string): Promise<ControlOutcome> {
    this.calls.push({ op: "suspend", session });
    const s = this.#sessions.get(session);
    if (!s) return { kind: "absent" };
    if (s.phase === "ended") return { kind: "refused", cause: "other", message: "the session ended" };
    s.phase = "suspended";
    s.asked = true;
    return { kind: "done" };
  }

  async resume(session: string, message: string | null): Promise<ControlOutcome> {
    this.calls.push({ op: "resume", session });
    const s = this.#sessions.get(session);
    if (!s) return { kind: "absent" };
    s.messages.push(message);
    s.lastActivityAt = this.#clock.now();
    if (s.phase === "ended") {
      s.phase = "running";
      s.exitCode = null;
      s.report = null;
      s.attentionNow = "working";
      this.#run(s);
    } else s.phase = "running";
    s.asked = false;
    return { kind: "done" };
  }

  async resumeKept(kept: KeptSession, req: SpawnRequest): Promise<StartOutcome> {
    this.calls.push({ op: "resumeKept", session: kept.session });
    const s = this.#sessions.get(kept.session);
    if (!s) return { kind: "refused", cause: "other", message: "the kept session is gone" };
    if (s.phase !== "ended")
      return { kind: "refused", cause: "other", message: "the kept session still runs" };
    const refused = this.#refusal();
    if (refused) return refused;
    await this.resume(kept.session, req.prompt);
    return { kind: "started", session: kept.session };
  }

  async stop(session: string): Promise<ControlOutcome> {
    this.calls.push({ op: "stop", session });
    const s = this.#sessions.get(session);
    if (!s) return { kind: "absent" };
    if (s.phase !== "ended" && !s.stubborn) s.exit(143);
    return { kind: "done" };
  }

  async forget(session: string): Promise<ForgetOutcome> {
    this.calls.push({ op: "forget", session });
    if (this.refuseForgets > 0) {
      this.refuseForgets--;
      return { kind: "refused", message: "scripted refusal" };
    }
    return this.#sessions.delete(session) ? { kind: "forgotten" } : { kind: "absent" };
  }

  async closeout(session: string): Promise<Closeout | null> {
    return this.#sessions.get(session)?.report ?? null;
  }

  /** The last ≤ maxBytes of what the test made the session say (spec §22.11). */
  async output(session: string, o?: OutputOptions): Promise<OutputOutcome> {
    const max = outputBytes(o);
    this.calls.push({ op: "output", session });
    if (this.failOutputs > 0) {
      this.failOutputs--;
      throw new Error("scripted output failure");
    }
    const s = this.#sessions.get(session);
    if (!s) return { kind: "absent" };
    return { kind: "output", ...tailText(Buffer.from(s.output, "utf8"), max) };
  }
}
