import { describe, expect, it } from "vitest";
import type { WatchEvent } from "../../src/agent/watch-live.js";
import { chatPrinter } from "../../src/cli/chat-printer.js";
import type { EntryKind } from "../../src/store/conversations/types.js";

function printed(events: readonly WatchEvent[]): string {
  let out = "";
  const p = chatPrinter((t) => {
    out += t;
  });
  for (const e of events) p.event(e);
  p.end();
  return out;
}

const text = (d: string): WatchEvent => ({
  kind: "chunk",
  taskId: 1,
  stream: "turn",
  offset: 0,
  data: { t: "text", d },
});
const output = (d: string): WatchEvent => ({
  kind: "chunk",
  taskId: 2,
  stream: "output",
  offset: 0,
  data: d,
});
const entry = (kind: EntryKind, data: unknown, name: string | null = null): WatchEvent => ({
  kind: "entry",
  entry: { conversationId: "c", seq: 1, kind, name, data, taskId: 1, submissionId: null, createdAt: 0 },
});

describe("ratchet chat's printer", () => {
  it("§17.11 a tool result that arrives mid-answer is held until the answer's line ends", () => {
    const out = printed([
      text("Hel"),
      entry("tool-result", { tool: "read", content: "file text" }),
      output("a line of output\n"),
      text("lo there"),
      entry("assistant", { text: "Hello there" }),
    ]);
    expect(out).toBe("agent> Hello there\n  [read] file text\n  | a line of output\n");
  });

  it("§17.11 held lines print where the answer's text ends its line, before the next line of the answer", () => {
    const out = printed([
      text("one"),
      entry("tool-result", { tool: "ls", content: "x" }),
      text(" two\n"),
      text("three"),
    ]);
    expect(out).toBe("agent> one two\n  [ls] x\nagent> three\n");
  });

  it("§17.11 lines print at once when no answer is streaming, and held ones at the end of the watch", () => {
    expect(printed([entry("tool-result", { tool: "bash", content: "ok\nmore", isError: true })])).toBe(
      "  [bash error] ok\n",
    );
    expect(printed([text("partial"), output("late\n")])).toBe("agent> partial\n  | late\n");
  });

  it("§17.11 the answer's own stream (a rerun's notice) breaks its line at once", () => {
    const out = printed([
      text("half"),
      { kind: "chunk", taskId: 1, stream: "turn", offset: 1, data: { t: "attempt", attempt: 2 } },
      text("whole\n"),
    ]);
    expect(out).toBe(
      "agent> half\n(the turn is requested again: its worker stopped mid-answer)\nagent> whole\n",
    );
  });

  it("§17.11 the turn's committed entry may arrive before its last chunks: the answer stays on one line", () => {
    const out = printed([
      text('You said: "hello'),
      entry("assistant", { text: 'You said: "hello". Bye.', toolCalls: [{ name: "ls", input: {} }] }),
      text('". Bye.'),
    ]);
    expect(out).toBe('agent> You said: "hello". Bye.\n  [ls] {}\n');
  });

  it("§17.11 the next answer's first chunk ends the last one's line and prints what was held", () => {
    const next: WatchEvent = {
      kind: "chunk",
      taskId: 1,
      stream: "turn-2",
      offset: 0,
      data: { t: "text", d: "Done" },
    };
    const out = printed([
      text("Let me look"),
      entry("assistant", { toolCalls: [{ name: "read", input: {} }] }),
      next,
    ]);
    expect(out).toBe("agent> Let me look\n  [read] {}\nagent> Done\n");
  });

  it("§17.11 the answer's finish chunk ends its line: a tool call's live output then prints at once", () => {
    const finish: WatchEvent = { kind: "chunk", taskId: 1, stream: "turn", offset: 2, data: { t: "finish" } };
    let out = "";
    const p = chatPrinter((t) => {
      out += t;
    });
    p.event(text("Running it"));
    p.event(entry("assistant", { toolCalls: [{ name: "bash", input: { command: "make" } }] }));
    expect(out).toBe("agent> Running it");
    p.event(finish);
    expect(out).toBe('agent> Running it\n  [bash] {"command":"make"}\n');
    p.event(output("started\n"));
    expect(out).toBe('agent> Running it\n  [bash] {"command":"make"}\n  | started\n');
  });

  it("an assistant entry's tool calls print after its answer", () => {
    const out = printed([
      text("Let me look"),
      entry("assistant", { toolCalls: [{ name: "read", input: { path: "a" } }] }),
    ]);
    expect(out).toBe('agent> Let me look\n  [read] {"path":"a"}\n');
  });
});
