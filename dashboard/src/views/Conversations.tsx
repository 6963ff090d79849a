/**
 * Conversations (spec §17): the list, and one conversation's transcript, inbox, the task tree of
 * its run in progress, a box to send input and an Abort button. Live by polling the API once a
 * second while mounted (the transcript reads only the entries after the last one it has).
 * Beside the transcript, the run's tool calls and subagents as a live tree with their output streams
 * (spec §19.33, §16.5) — the run in progress, or else the conversation's last; each assistant turn
 * shows its usage, cost and route (spec §18.9).
 */
import { useRef, useState } from "preact/hooks";
import type {
  AssistantData,
  ConversationRecord,
  EntryRecord,
  SubmissionRecord,
} from "../../../src/agent/index.js";
import { call, query } from "../api.js";
import { short, time } from "../format.js";
import { usePoll } from "../poll.js";
import type { Tree } from "../types.js";
import { AgentTree } from "./AgentTree.js";
import { TreeView } from "./TreeView.js";

/** Entries kept on screen: the newest ones (older ones stay in the API). */
const MAX_SHOWN = 2_000;

export function conversationHref(id: string): string {
  return `#/conversations/${encodeURIComponent(id)}`;
}

export function ConversationList() {
  const [list, setList] = useState<ConversationRecord[] | null>(null);
  const error = usePoll(async () => {
    setList(
      (await call<{ conversations: ConversationRecord[] }>("/api/conversations?limit=200")).conversations,
    );
  }, []);
  if (!list) return <p class="muted">{error ?? "Loading conversations…"}</p>;
  return (
    <div data-view="conversations">
      <h2>Conversations</h2>
      {list.length === 0 ? (
        <p class="muted">No conversations yet.</p>
      ) : (
        <table class="tasks">
          <thead>
            <tr>
              <th>Id</th>
              <th>Title</th>
              <th>Entries</th>
              <th>Run</th>
              <th>Updated</th>
            </tr>
          </thead>
          <tbody>
            {list.map((c) => (
              <tr key={c.id} data-conversation={c.id}>
                <td>
                  <a href={conversationHref(c.id)}>{c.id}</a>
                </td>
                <td>{c.title ?? ""}</td>
                <td>{c.length}</td>
                <td>
                  {c.runTaskId === null ? "idle" : <a href={`#/tasks/${c.runTaskId}`}>#{c.runTaskId}</a>}
                </td>
                <td>{time(c.updatedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

/** USD with enough digits for a cheap turn (fractions of a cent). */
export function usd(n: number): string {
  return `$${n < 0.01 ? n.toFixed(6) : n.toFixed(4)}`;
}

/**
 * spec §18.9: an assistant turn's usage, cost and the router's decision (the route that answered,
 * and each route it fell back from with the code it failed with), from the entry's data.
 */
function TurnMeta({ d }: { d: AssistantData }) {
  if (!d.usage && d.route === undefined) return null;
  const u = d.usage;
  return (
    <div class="turn-meta muted" data-field="turn-meta">
      {u && (
        <span data-field="usage">
          in {u.input} · out {u.output}
          {u.cached > 0 ? ` · cached ${u.cached}` : ""}
          {u.reasoning > 0 ? ` · reasoning ${u.reasoning}` : ""} tokens
        </span>
      )}
      {d.cost !== undefined && <span data-field="cost"> · {usd(d.cost)}</span>}
      {d.route !== undefined && <span data-field="route"> · route {d.route}</span>}
      {d.fallbacks && d.fallbacks.length > 0 && (
        <span data-field="fallbacks">
          {" "}
          (after {d.fallbacks.map((f) => `${f.route}: ${f.code}`).join(", ")})
        </span>
      )}
    </div>
  );
}

function Entry({ e }: { e: EntryRecord }) {
  const kind = e.kind === "custom" ? `custom:${e.name}` : e.kind;
  const text =
    typeof e.data === "string"
      ? e.data
      : typeof (e.data as { text?: unknown } | null)?.text === "string"
        ? (e.data as { text: string }).text
        : short(e.data, 400);
  return (
    <li class={`entry entry-${e.kind}`} data-seq={e.seq} data-kind={e.kind}>
      <span class="seq">#{e.seq}</span> <span class="kind">{kind}</span> <span class="data">{text}</span>
      {e.kind === "assistant" && e.data !== null && typeof e.data === "object" && (
        <TurnMeta d={e.data as AssistantData} />
      )}
      {e.taskId !== null && (
        <a href={`#/tasks/${e.taskId}`} class="muted">
          {" "}
          task #{e.taskId}
        </a>
      )}
    </li>
  );
}

function SendBox({ id, onSent }: { id: string; onSent: () => void }) {
  const [text, setText] = useState("");
  const [mode, setMode] = useState("follow-up");
  const [note, setNote] = useState<string | null>(null);
  const submit = async (ev: Event) => {
    ev.preventDefault();
    if (text.trim() === "") return;
    try {
      const r = await call<{ submission: SubmissionRecord }>(
        `/api/conversations/${encodeURIComponent(id)}/submissions`,
        { json: { input: { text }, whenBusy: mode } },
      );
      setNote(`submission #${r.submission.id}: ${r.submission.status}`);
      setText("");
      onSent();
    } catch (e) {
      setNote((e as Error).message);
    }
  };
  return (
    <form class="send" onSubmit={submit} data-section="send">
      <input
        name="text"
        value={text}
        onInput={(e) => setText((e.target as HTMLInputElement).value)}
        size={50}
      />
      <select name="whenBusy" value={mode} onChange={(e) => setMode((e.target as HTMLSelectElement).value)}>
        <option value="follow-up">follow-up</option>
        <option value="steer">steer</option>
        <option value="reject">reject</option>
      </select>
      <button type="submit">Send</button>
      {note && (
        <span class="muted" data-field="send-note">
          {" "}
          {note}
        </span>
      )}
    </form>
  );
}

export function ConversationDetail({ id }: { id: string }) {
  const [conv, setConv] = useState<ConversationRecord | null>(null);
  const [inbox, setInbox] = useState<SubmissionRecord[]>([]);
  const [entries, setEntries] = useState<EntryRecord[]>([]);
  const [tree, setTree] = useState<Tree | null>(null);
  const [lastTree, setLastTree] = useState<Tree | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const next = useRef(0);
  /** The newest run that wrote an entry: its tree shows when no run is in progress (spec §19.33). */
  const lastRun = useRef<number | null>(null);
  const path = `/api/conversations/${encodeURIComponent(id)}`;
  const load = async () => {
    const d = await call<{ conversation: ConversationRecord; inbox: SubmissionRecord[] }>(path);
    const page = await call<{ entries: EntryRecord[] }>(
      `${path}/entries${query({ from: next.current, limit: 1_000 })}`,
    );
    if (page.entries.length > 0) {
      next.current = page.entries[page.entries.length - 1]!.seq + 1;
      for (const e of page.entries) if (e.taskId !== null && e.kind !== "user") lastRun.current = e.taskId;
      setEntries((old) => [...old, ...page.entries].slice(-MAX_SHOWN));
    }
    setConv(d.conversation);
    setInbox(d.inbox);
    const run = d.conversation.runTaskId;
    const live = run === null ? null : await call<Tree>(`/api/tasks/${run}/tree?limit=300`).catch(() => null);
    setTree(live);
    const shown = run ?? lastRun.current;
    setLastTree(
      live ??
        (shown === null ? null : await call<Tree>(`/api/tasks/${shown}/tree?limit=300`).catch(() => null)),
    );
  };
  const error = usePoll(load, [id]);
  const abort = async () => {
    try {
      const r = await call<{ withdrawn: number; marked: number }>(`${path}/abort`, { json: {} });
      setNote(`aborted: ${r.marked} task(s) marked, ${r.withdrawn} queued input(s) withdrawn`);
      await load();
    } catch (e) {
      setNote((e as Error).message);
    }
  };
  if (!conv)
    return <p class={error ? "problem" : "muted"}>{error ? `Conversation ${id}: ${error}` : "Loading…"}</p>;
  return (
    <div data-view="conversation" data-conversation={conv.id}>
      <h2>
        {conv.title ?? conv.id}{" "}
        <span class="tag" data-field="run-state">
          {conv.runTaskId === null ? "idle" : `run #${conv.runTaskId}`}
        </span>
      </h2>
      {conv.parent && (
        <p class="muted">
          forked from <a href={conversationHref(conv.parent.conversationId)}>{conv.parent.conversationId}</a>{" "}
          at #{conv.parent.seq}
        </p>
      )}
      <div class="conversation-body">
        <div class="conversation-main">
          <h3>Transcript</h3>
          <ol class="transcript" data-section="transcript">
            {entries.map((e) => (
              <Entry key={e.seq} e={e} />
            ))}
          </ol>
        </div>
        {lastTree && (
          <aside class="conversation-side" data-section="live-output">
            {/* spec §19.33, §16.5: tool calls and subagents, each with its streams, live beside the transcript. */}
            <h3>Tool calls and subagents {tree === null && <span class="muted">(last run)</span>}</h3>
            <AgentTree tree={lastTree} />
          </aside>
        )}
      </div>
      <SendBox id={conv.id} onSent={() => void load()} />
      <h3>Inbox</h3>
      {inbox.length === 0 ? (
        <p class="muted" data-section="inbox">
          Empty.
        </p>
      ) : (
        <ul data-section="inbox">
          {inbox.map((s) => (
            <li key={s.id} data-submission={s.id}>
              #{s.id} {s.mode}: {short(s.input, 200)}
            </li>
          ))}
        </ul>
      )}
      <h3>Run</h3>
      {tree ? <TreeView tree={tree} current={tree.task.id} /> : <p class="muted">No run in progress.</p>}
      <p>
        <button type="button" data-action="abort-conversation" onClick={() => void abort()}>
          Abort
        </button>
        {note && (
          <span class="muted" data-field="abort-note">
            {" "}
            {note}
          </span>
        )}
      </p>
    </div>
  );
}
