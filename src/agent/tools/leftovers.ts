/**
 * The process groups of a tool call (spec §19.30): each exec of a call records, in the call's
 * durable stream `processes`, the group it started (the attempt, its pgid, host, boot id and
 * leader's start time), flushed at once, and that the exec returned. A later attempt of the call —
 * the earlier one's worker died — ends, before it answers `interrupted` or runs the tool again,
 * every group an earlier attempt started and never saw return, when it is on this host.
 *
 * Invariant: a rerun of a call never starts its tool, nor answers, while a group a dead attempt of
 * the call started still runs on this host and the environment can reap it (spec §19.30).
 */
import type { TaskContext } from "../../engine/context.js";
import type { StreamWriter } from "../../engine/stream.js";
import type { ExecOptions, ExecutionEnv, ProcessGroupRecord, ReapOutcome } from "../env/types.js";

/** The call's stream of process records. */
export const PROCESSES_STREAM = "processes";

type Chunk =
  | { attempt: number; started: ProcessGroupRecord }
  | { attempt: number; ended: number }
  | { attempt: number; reaped: number; outcome: ReapOutcome };

/** `env` whose execs record their groups in `w` for `attempt`. */
export function recordingEnv(env: ExecutionEnv, w: StreamWriter, attempt: number): ExecutionEnv {
  const put = (c: Chunk) => {
    try {
      w.write(c);
    } catch {
      // A full stream (spec §16.6) only costs the reap of this group after a crash.
    }
  };
  return {
    cwd: env.cwd,
    resolve: (p) => env.resolve(p),
    readFile: (p, o) => env.readFile(p, o),
    writeFile: (p, d, o) => env.writeFile(p, d, o),
    stat: (p) => env.stat(p),
    list: (p, o) => env.list(p, o),
    withWriteLock: (p, fn) => env.withWriteLock(p, fn),
    ...(env.reap ? { reap: (g: ProcessGroupRecord) => env.reap!(g) } : {}),
    async exec(argv: readonly string[], opts: ExecOptions = {}) {
      let pgid: number | undefined;
      const result = env.exec(argv, {
        ...opts,
        onStart(g) {
          pgid = g.pgid;
          put({ attempt, started: g });
          // Committed now rather than within the interval: the worker may die any moment.
          void w.flush().catch(() => {});
          opts.onStart?.(g);
        },
      });
      try {
        return await result;
      } finally {
        if (pgid !== undefined) put({ attempt, ended: pgid });
      }
    },
  };
}

/**
 * Ends the groups earlier attempts (below `ctx.attempt`; in an abort handler, any) started and
 * did not see return; records each reap; resolves with a sentence for the model ("" when none).
 */
export async function reapLeftovers(ctx: TaskContext, env: ExecutionEnv, w: StreamWriter): Promise<string> {
  const open = new Map<number, ProcessGroupRecord>();
  for await (const c of ctx.readStream(PROCESSES_STREAM)) {
    const d = c.data as Chunk;
    if (ctx.mode === "run" && d.attempt >= ctx.attempt) continue;
    if ("started" in d) open.set(d.started.pgid, d.started);
    else if ("ended" in d) open.delete(d.ended);
    else if ("reaped" in d) open.delete(d.reaped);
  }
  const said: string[] = [];
  for (const g of open.values()) {
    const outcome: ReapOutcome = env.reap ? await env.reap(g) : "elsewhere";
    w.write({ attempt: ctx.attempt, reaped: g.pgid, outcome } satisfies Chunk);
    if (outcome === "killed") said.push(`its process group ${g.pgid} was still running and was killed`);
    else if (outcome === "elsewhere" || outcome === "unverifiable")
      said.push(`its process group ${g.pgid} on ${g.host || "an unknown host"} may still be running`);
  }
  await w.flush();
  return said.join("; ");
}
