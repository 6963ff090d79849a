/**
 * A task's durable output streams (spec §16), live: one panel per stream, each reading
 * /api/tasks/:id/streams/:name as Server-Sent Events with fetch (EventSource cannot send the
 * token). String chunks are shown as text, as a model's tokens read; other chunks as JSON lines.
 *
 * Modes of one panel:
 * - following: chunks arrive and are appended;
 * - reconnecting: the response ended or failed before the stream's `end` event; after a delay
 *   (1 s doubling to 15 s) it asks again with Last-Event-ID = the last offset shown, so nothing is
 *   shown twice and nothing is missed (spec §16.5);
 * - ended: the `end` event came (the stream closed or its task ended).
 *
 * Bounds: a panel keeps the last MAX_SHOWN characters; the list of streams is read again every
 * 2 s while the task is live, so a stream opened mid-run appears.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { authHeaders, call, reportUnauthorized } from "../api.js";

const MAX_SHOWN = 200_000;

interface StreamInfo {
  name: string;
  length: number;
  bytes: number;
  closed: boolean;
}

function render(data: unknown): string {
  return typeof data === "string" ? data : `${JSON.stringify(data)}\n`;
}

function StreamPanel({ taskId, name, label }: { taskId: number; name: string; label?: string }) {
  const [text, setText] = useState("");
  const [state, setState] = useState<"following" | "reconnecting" | "ended">("following");
  const [count, setCount] = useState(0);
  const last = useRef(-1);

  useEffect(() => {
    const ctl = new AbortController();
    let delay = 1_000;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let shown = "";
    const append = (chunk: string) => {
      shown = (shown + chunk).slice(-MAX_SHOWN);
      setText(shown);
    };
    const read = async (): Promise<boolean> => {
      const headers: Record<string, string> = { ...authHeaders() };
      if (last.current >= 0) headers["last-event-id"] = String(last.current);
      const res = await fetch(`/api/tasks/${taskId}/streams/${encodeURIComponent(name)}`, {
        headers,
        signal: ctl.signal,
      });
      if (res.status === 401) {
        reportUnauthorized();
        return true;
      }
      if (!res.ok || !res.body) return false;
      setState("following");
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return false;
        buffer += decoder.decode(value, { stream: true });
        for (let i = buffer.indexOf("\n\n"); i !== -1; i = buffer.indexOf("\n\n")) {
          const block = buffer.slice(0, i);
          buffer = buffer.slice(i + 2);
          let event = "message";
          let id = "";
          const data: string[] = [];
          for (const line of block.split("\n")) {
            if (line.startsWith("event: ")) event = line.slice(7);
            else if (line.startsWith("id: ")) id = line.slice(4);
            else if (line.startsWith("data: ")) data.push(line.slice(6));
          }
          if (event === "end") return true;
          if (event !== "chunk") continue;
          const offset = Number(id);
          if (!(offset > last.current)) continue;
          last.current = offset;
          delay = 1_000;
          setCount(offset + 1);
          append(render(JSON.parse(data.join("\n"))));
        }
        if (buffer.length > 4 * 1024 * 1024) return false;
      }
    };
    const loop = () => {
      read().then(
        (ended) => (ended ? setState("ended") : again()),
        () => again(),
      );
    };
    const again = () => {
      if (ctl.signal.aborted) return;
      setState("reconnecting");
      timer = setTimeout(loop, delay);
      delay = Math.min(delay * 2, 15_000);
    };
    loop();
    return () => {
      ctl.abort();
      clearTimeout(timer);
    };
  }, [taskId, name]);

  return (
    <section class="card stream" data-stream={name} data-state={state}>
      <h4>
        {label ? `${label} · ` : ""}
        {name}{" "}
        <span class="muted">
          · {count} chunks · {state}
        </span>
      </h4>
      <pre class="stream-text" data-field="stream-text">
        {text}
      </pre>
    </section>
  );
}

/** A task's streams; `quiet` shows nothing for a task without any and labels each panel with the task. */
export function Streams({ taskId, live, quiet }: { taskId: number; live: boolean; quiet?: boolean }) {
  const [streams, setStreams] = useState<StreamInfo[] | null>(null);
  useEffect(() => {
    let alive = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = () =>
      call<{ streams: StreamInfo[] }>(`/api/tasks/${taskId}/streams`)
        .then(
          (r) => alive && setStreams(r.streams),
          () => {},
        )
        .finally(() => {
          if (alive && live) timer = setTimeout(load, 2_000);
        });
    void load();
    return () => {
      alive = false;
      clearTimeout(timer);
    };
  }, [taskId, live]);
  if (!streams || streams.length === 0) return quiet ? null : <p class="muted">No output streams.</p>;
  return (
    <div data-section="streams" data-task={taskId}>
      {streams.map((s) => (
        <StreamPanel key={s.name} taskId={taskId} name={s.name} label={quiet ? `#${taskId}` : undefined} />
      ))}
    </div>
  );
}
