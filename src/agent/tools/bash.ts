/**
 * The bash tool (spec §19.9): one command line in the conversation's environment, its output
 * streamed to the call's stream as it comes and kept for the model head and tail; its process
 * group killed on abort or at the timeout (spec §19.3). A non-zero exit, a timeout or an abort is
 * an error result that still carries the output.
 */
import { z } from "zod";
import { defineTool, type ToolResult } from "./define.js";
import { HeadTail } from "./truncate.js";

export const BASH_DEFAULT_TIMEOUT_MS = 120_000;
export const BASH_MAX_TIMEOUT_MS = 3_600_000;
/** Characters of output kept for the result (the whole output went to the stream). */
export const BASH_KEPT_CHARS = 30_000;

export const bashTool = defineTool({
  name: "bash",
  description:
    "Run a bash command line in the working directory. Output (stdout and stderr, interleaved) is returned, its middle cut when long. Default timeout 120 s.",
  schema: z.object({
    command: z.string().min(1).max(100_000),
    timeoutMs: z.number().int().min(1).max(BASH_MAX_TIMEOUT_MS).optional(),
  }),
  replay: "unsafe",
  async execute(ctx, a): Promise<ToolResult> {
    const kept = new HeadTail(BASH_KEPT_CHARS);
    const r = await ctx.env.exec(["bash", "-c", a.command], {
      timeoutMs: a.timeoutMs ?? BASH_DEFAULT_TIMEOUT_MS,
      signal: ctx.signal,
      maxOutputBytes: 1024,
      onOutput: (_stream, text) => {
        kept.add(text);
        ctx.output(text);
      },
    });
    const status = r.timedOut
      ? `[timed out after ${a.timeoutMs ?? BASH_DEFAULT_TIMEOUT_MS} ms; process group killed]`
      : r.aborted
        ? "[aborted; process group killed]"
        : r.exitCode === 0
          ? ""
          : `[exit ${r.exitCode ?? `signal ${r.signal}`}]`;
    const body = kept.text();
    const content = status
      ? `${body}${body && !body.endsWith("\n") ? "\n" : ""}${status}`
      : body || "(no output)";
    return {
      content,
      isError: r.exitCode !== 0 || r.timedOut || r.aborted,
      details: {
        exitCode: r.exitCode,
        signal: r.signal,
        timedOut: r.timedOut,
        aborted: r.aborted,
        ms: r.durationMs,
      },
    };
  },
  // Its own HeadTail bounds the text; the default result limits apply on top.
});

/** The built-in coding tools, by name. */
export { editTool, findTool, grepTool, lsTool, readTool, writeTool } from "./files.js";
