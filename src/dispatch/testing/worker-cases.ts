/** The cases of the worker contract suite (see worker-contract.ts). */
import { findPullUrls } from "../../core/dispatch/links.js";
import type { SessionReading } from "../../core/dispatch/model.js";
import type { Expect } from "../../testing/conformance.js";
import type { WorkerAdapter } from "../workers/adapter.js";
import { CONTRACT_PR_URL, until, type WorkerEnv } from "./worker-contract.js";

type Define<W extends WorkerAdapter> = (
  title: string,
  fn: (env: WorkerEnv<W>) => Promise<void>,
  o?: { maxSessions?: number },
) => void;

const isRunning = (r: SessionReading) => r.kind === "running";
const isEnded = (r: SessionReading) => r.kind === "ended";

async function startAs<W extends WorkerAdapter>(
  env: WorkerEnv<W>,
  b: Parameters<WorkerEnv<W>["opts"]["spawn"]>[0],
  tag: string,
) {
  const name = env.name(tag);
  const out = await env.worker.start(env.opts.spawn(b, name));
  if (out.kind !== "started") throw new Error(`start ${name}: ${JSON.stringify(out)}`);
  return out.session;
}

export function registerWorkerCases<W extends WorkerAdapter>(define: Define<W>, expect: Expect): void {
  define("§20.16 start answers a session that find() gives back by its spawn name", async (env) => {
    const s = await startAs(env, "wait", "find");
    expect(await env.worker.find(env.opts.spawn("wait", s).name)).toBe(s);
    expect(await env.worker.find("rc-never-started")).toBeNull();
    await env.opts.release(env.worker, s);
    await env.readUntil(s, "the end", isEnded);
  });

  define("§20.16 starting a name that has a session answers that session", async (env) => {
    const s = await startAs(env, "wait", "twice");
    const again = await env.worker.start(env.opts.spawn("wait", s));
    expect(again).toEqual({ kind: "started", session: s });
    await env.opts.release(env.worker, s);
    await env.readUntil(s, "the end", isEnded);
  });

  define(
    "§20.2 a running session reads running, with its reports: attention and agent session",
    async (env) => {
      const s = await startAs(env, "turn", "turn");
      const r = await env.readUntil(
        s,
        "turn-ended",
        (x) => x.kind === "running" && x.attention === "turn-ended",
      );
      expect(r).toMatchObject({
        kind: "running",
        attention: "turn-ended",
        agentSession: "agent-7",
        usageLimitResetsAt: null,
      });
      await env.opts.release(env.worker, s);
      await env.readUntil(s, "the end", isEnded);
    },
  );

  define("§20.2 a session that hit its usage limit reports when it resets", async (env) => {
    const s = await startAs(env, "limit", "limit");
    const r = await env.readUntil(
      s,
      "the usage limit",
      (x) => x.kind === "running" && x.usageLimitResetsAt !== null,
    );
    expect(r).toMatchObject({ kind: "running", usageLimitResetsAt: 1_800_000_000_000 });
    await env.opts.release(env.worker, s);
    await env.readUntil(s, "the end", isEnded);
  });

  define(
    "§20.17 lastActivityAt moves only when the session produces output, on the worker's clock",
    async (env) => {
      const s = await startAs(env, "wait", "activity");
      await until("the session's first output", () => env.opts.ready(env.worker, s));
      // Quiet: two reads a clock second apart give the same instant.
      const quiet = await env.readUntil(s, "a quiet session", (r) => {
        if (r.kind !== "running") return false;
        return true;
      });
      let last = (quiet as Extract<SessionReading, { kind: "running" }>).lastActivityAt;
      for (let settled = false; !settled; ) {
        env.clock.advance(1_000);
        const r = (await env.worker.read(s)) as Extract<SessionReading, { kind: "running" }>;
        settled = r.lastActivityAt === last;
        last = r.lastActivityAt;
      }
      env.clock.advance(60_000);
      const still = await env.worker.read(s);
      expect(still).toMatchObject({ kind: "running", lastActivityAt: last });
      await env.opts.poke(env.worker, s);
      const moved = await env.readUntil(
        s,
        "new activity",
        (r) => r.kind === "running" && r.lastActivityAt > last,
      );
      expect((moved as { lastActivityAt: number }).lastActivityAt).toBe(env.clock.now());
      await env.opts.release(env.worker, s);
      await env.readUntil(s, "the end", isEnded);
    },
  );

  define("§20.2 an ended session reads ended with its exit code and gives its close-out", async (env) => {
    const ok = await startAs(env, "exit0", "exit0");
    expect(await env.readUntil(ok, "exit 0", isEnded)).toEqual({ kind: "ended", exitCode: 0 });
    expect(await env.worker.closeout(ok)).toEqual({ outcome: "succeeded", summary: "ok", data: null });
    const bad = await startAs(env, "exit3", "exit3");
    expect(await env.readUntil(bad, "exit 3", isEnded)).toEqual({ kind: "ended", exitCode: 3 });
    expect(await env.worker.closeout(bad)).toBeNull();
  });

  define(
    "§20.16 suspend makes the session read suspended (asked); resume makes it run again",
    async (env) => {
      const s = await startAs(env, "wait", "suspend");
      await env.readUntil(s, "running", isRunning);
      expect(await env.worker.suspend(s)).toEqual({ kind: "done" });
      expect(await env.readUntil(s, "suspended", (r) => r.kind === "suspended")).toEqual({
        kind: "suspended",
        asked: true,
      });
      expect(await env.worker.resume(s, null)).toEqual({ kind: "done" });
      await env.readUntil(s, "running again", isRunning);
      await env.opts.release(env.worker, s);
      expect(await env.readUntil(s, "the end", isEnded)).toEqual({ kind: "ended", exitCode: 0 });
    },
  );

  define("§20.16 resume revives an ended session: it runs again", async (env) => {
    const s = await startAs(env, "wait", "revive");
    await env.opts.release(env.worker, s);
    await env.readUntil(s, "the end", isEnded);
    expect(await env.worker.resume(s, "go on")).toEqual({ kind: "done" });
    // The revived run plays the same behaviour; released already, it ends again.
    await env.readUntil(s, "the second end", isEnded);
  });

  define("§20.16 stop ends a running session", async (env) => {
    const s = await startAs(env, "wait", "stop");
    await env.readUntil(s, "running", isRunning);
    expect(await env.worker.stop(s)).toEqual({ kind: "done" });
    await env.readUntil(s, "stopped", (r) => r.kind === "ended" || r.kind === "absent");
  });

  define("§20.16 stop reaches a suspended session too", async (env) => {
    const s = await startAs(env, "wait", "stop-suspended");
    await env.readUntil(s, "running", isRunning);
    await env.worker.suspend(s);
    await env.readUntil(s, "suspended", (r) => r.kind === "suspended");
    await env.worker.stop(s);
    await env.worker.stop(s);
    await env.readUntil(s, "stopped", (r) => r.kind === "ended" || r.kind === "absent");
  });

  define("§20.16 forget drops the session: it reads absent and find() no longer has it", async (env) => {
    const s = await startAs(env, "wait", "forget");
    await env.readUntil(s, "running", isRunning);
    expect(await env.worker.forget(s)).toEqual({ kind: "forgotten" });
    expect(await env.worker.read(s)).toEqual({ kind: "absent" });
    expect(await env.worker.find(s)).toBeNull();
    expect(await env.worker.forget(s)).toEqual({ kind: "absent" });
  });

  define("§20.16 an unknown session is absent to every call", async (env) => {
    const s = "rc-no-such-session";
    expect(await env.worker.read(s)).toEqual({ kind: "absent" });
    expect(await env.worker.suspend(s)).toEqual({ kind: "absent" });
    expect(await env.worker.resume(s, null)).toEqual({ kind: "absent" });
    expect(await env.worker.stop(s)).toEqual({ kind: "absent" });
    expect(await env.worker.forget(s)).toEqual({ kind: "absent" });
    expect(await env.worker.closeout(s)).toBeNull();
    expect(await env.worker.output(s)).toEqual({ kind: "absent" });
  });

  define(
    "§20.16 a start past the worker's capacity is refused for capacity, distinct from other refusals",
    async (env) => {
      const a = await startAs(env, "wait", "cap-a");
      await env.readUntil(a, "running", isRunning);
      const b = env.name("cap-b");
      const refused = await env.worker.start(env.opts.spawn("wait", b));
      expect(refused).toMatchObject({ kind: "refused", cause: "capacity" });
      const bad = await env.worker.start({ ...env.opts.spawn("wait", b), name: "no spaces allowed" });
      expect(bad).toMatchObject({ kind: "refused", cause: "other" });
      await env.worker.forget(a);
      expect(await env.worker.start(env.opts.spawn("wait", b))).toEqual({ kind: "started", session: b });
      await env.opts.release(env.worker, b);
      await env.readUntil(b, "the end", isEnded);
    },
    { maxSessions: 1 },
  );

  define(
    "§20.15 resumeKept revives a kept, ended session; a forgotten one is refused for cause other",
    async (env) => {
      const s = await startAs(env, "exit0", "kept");
      await env.readUntil(s, "the end", isEnded);
      const kept = { session: s, worker: env.worker.kind, attempt: "a1", keptAt: env.clock.now() };
      const next = { ...env.opts.spawn("exit0", env.name("next")), prompt: "review found two bugs" };
      expect(await env.worker.resumeKept(kept, next)).toEqual({ kind: "started", session: s });
      await env.readUntil(s, "the revived run's end", isEnded);
      await env.worker.forget(s);
      expect(await env.worker.resumeKept(kept, next)).toMatchObject({ kind: "refused", cause: "other" });
    },
  );

  registerOutputCases(define, expect);
}

/** The text of a session's output once `ok` holds for it (spec §22.11). */
async function outputUntil<W extends WorkerAdapter>(
  env: WorkerEnv<W>,
  s: string,
  what: string,
  ok: (text: string) => boolean,
  maxBytes?: number,
) {
  return until(what, async () => {
    const o = await env.worker.output(s, maxBytes === undefined ? undefined : { maxBytes });
    return o.kind === "output" && ok(o.text) ? o : null;
  });
}

function registerOutputCases<W extends WorkerAdapter>(define: Define<W>, expect: Expect): void {
  define("§22.11 output gives what a running session printed: its pull-request URL", async (env) => {
    const s = await startAs(env, "pr", "output-pr");
    const o = await outputUntil(env, s, "the URL in the output", (t) => findPullUrls(t).length > 0);
    expect(o.cut).toBe(false);
    expect(findPullUrls(o.text).map((f) => f.url)).toEqual([CONTRACT_PR_URL]);
    await env.opts.release(env.worker, s);
    await env.readUntil(s, "the end", isEnded);
  });

  define(
    "§22.11 output is the last maxBytes at most (64 KiB unless asked), cut at the front",
    async (env) => {
      const s = await startAs(env, "flood", "output-flood");
      const o = await outputUntil(env, s, "the flood's end", (t) =>
        t.includes(`${CONTRACT_PR_URL}\nready\n`),
      );
      expect(Buffer.byteLength(o.text)).toBeLessThan(64 * 1024 + 1);
      expect(Buffer.byteLength(o.text)).toBeGreaterThan(32 * 1024);
      expect(o.cut).toBe(true);
      const small = await outputUntil(env, s, "a small tail", (t) => t.endsWith("ready\n"), 1_000);
      expect(Buffer.byteLength(small.text)).toBeLessThan(1_001);
      expect(small.cut).toBe(true);
      expect(findPullUrls(small.text).map((f) => f.url)).toEqual([CONTRACT_PR_URL]);
      await env.opts.release(env.worker, s);
      await env.readUntil(s, "the end", isEnded);
    },
  );

  define("§22.11 output's bound is checked: outside 1 B–1 MiB is refused, nothing read", async (env) => {
    const s = await startAs(env, "pr", "output-bound");
    for (const maxBytes of [0, -1, 1.5, 2 * 1024 * 1024, Number.NaN]) {
      const refused = await env.worker.output(s, { maxBytes }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(refused, String(maxBytes)).toMatchObject({ code: "RATCHET_INVALID_INPUT" });
    }
    expect(await env.worker.output(s, { maxBytes: 1024 * 1024 })).toMatchObject({ kind: "output" });
    await env.opts.release(env.worker, s);
    await env.readUntil(s, "the end", isEnded);
  });
}
