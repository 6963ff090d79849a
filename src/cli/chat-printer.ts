/**
 * What `ratchet chat` prints of a conversation's watch: the agent's answer as it streams, tool
 * calls, their live output and results as lines of their own.
 *
 * A watch orders events per source only (spec §17.11): a tool call's output or result, and even the
 * turn's own committed entry (which commits with the turn's last chunks, spec §18.10), can arrive
 * while an answer is mid-line. Such lines are held until the answer's line ends (a newline in its
 * text, its stream's `finish` or `error` chunk, the next answer's first chunk, or the end of the
 * watch), so they never split the agent's words. The answer's own stream (a rerun's notice, its
 * finish) ends the line at once: it is the same source, so nothing of the answer can follow.
 */
import type { AssistantData } from "../agent/agent.js";
import type { WatchEvent } from "../agent/watch-live.js";

/** At most this many lines are held while an answer streams; past it they print anyway. */
const MAX_HELD = 1_000;

export interface ChatPrinter {
  event(e: WatchEvent): void;
  end(): void;
}

export function chatPrinter(write: (text: string) => void): ChatPrinter {
  let mid = false;
  /** The stream of the answer being printed (task and stream name). */
  let answer = "";
  const held: string[] = [];
  const breakLine = () => {
    if (mid) write("\n");
    mid = false;
    for (const h of held.splice(0)) write(`${h}\n`);
  };
  const now = (s: string) => {
    breakLine();
    write(`${s}\n`);
  };
  const line = (s: string) => {
    if (mid && held.length < MAX_HELD) held.push(s);
    else now(s);
  };
  return {
    event(e) {
      if (e.kind === "chunk") {
        // A tool call's live output (its stream `output`), each line marked (spec §19.32).
        if (e.stream === "output" && typeof e.data === "string") {
          for (const l of e.data.split("\n").filter((x) => x !== "")) line(`  | ${l}`);
          return;
        }
        const c = e.data as { t?: string; d?: string; attempt?: number };
        if (c?.t === "text" && typeof c.d === "string") {
          const from = `${e.taskId}:${e.stream}`;
          if (from !== answer) breakLine(); // another answer: the last one's line is over
          answer = from;
          if (!mid) write("agent> ");
          write(c.d);
          mid = !c.d.endsWith("\n");
          if (!mid) breakLine();
        } else if ((c?.t === "finish" || c?.t === "error") && `${e.taskId}:${e.stream}` === answer)
          breakLine(); // the answer is whole: what waited for its line to end prints now
        else if (c?.t === "attempt" && (c.attempt ?? 1) > 1)
          now("(the turn is requested again: its worker stopped mid-answer)");
        return;
      }
      if (e.kind !== "entry") return;
      const d = e.entry.data as AssistantData & { tool?: string; content?: unknown; isError?: boolean };
      if (e.entry.kind === "assistant") {
        // Its answer's last chunks may still be on their way: its lines wait like any other.
        if (d.toolCalls)
          for (const c of d.toolCalls) line(`  [${c.name}] ${JSON.stringify(c.input).slice(0, 200)}`);
        if (d.error) line(`  (${d.error})`);
      } else if (e.entry.kind === "custom" && e.entry.name === "compacted") {
        const c = e.entry.data as { applied?: boolean; reason?: string };
        line(c.applied ? "(compacted: older messages are summarised)" : `(nothing compacted: ${c.reason})`);
      } else if (e.entry.kind === "tool-result")
        line(
          `  [${d.tool}${d.isError ? " error" : ""}] ${String(
            typeof d.content === "string" ? d.content : JSON.stringify(d.content),
          )
            .split("\n")[0]!
            .slice(0, 200)}`,
        );
    },
    end: breakLine,
  };
}
