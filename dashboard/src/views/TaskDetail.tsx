/**
 * One task: its state, progress, error, actions, timeline, steps, retries
 * and owner tree. Live: the task and its tree (up to the stream's 100 ids)
 * are watched; any change refetches the details, at most one fetch at a
 * time (a change during a fetch schedules exactly one more).
 */
import { type ComponentChildren, Fragment } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { call } from "../api.js";
import { percent, pretty, time } from "../format.js";
import { MAX_WATCH, useWatch } from "../live.js";
import { taskHref } from "../router.js";
import type { Explanation, TaskDetails, TaskRecord, Tree } from "../types.js";
import { Actions } from "./Actions.js";
import { StateBadge } from "./StateBadge.js";
import { Streams } from "./Streams.js";
import { Retries, Stack, Steps, Timeline } from "./Timeline.js";
import { TreeView, treeIds } from "./TreeView.js";

interface Loaded {
  details: TaskDetails;
  tree: Tree | null;
  explain: Explanation | null;
}

async function fetchAll(id: number): Promise<Loaded> {
  const [details, tree, explain] = await Promise.all([
    call<TaskDetails>(`/api/tasks/${id}`),
    call<Tree>(`/api/tasks/${id}/tree?limit=500`).catch(() => null),
    call<Explanation>(`/api/tasks/${id}/explain`).catch(() => null),
  ]);
  return { details, tree, explain };
}

function useTask(id: number) {
  const [data, setData] = useState<Loaded | null>(null);
  const [error, setError] = useState<string | null>(null);
  const state = useRef({ busy: false, again: false, alive: true });

  const load = useCallback(() => {
    const s = state.current;
    if (s.busy) {
      s.again = true;
      return;
    }
    s.busy = true;
    fetchAll(id)
      .then(
        (d) => {
          if (!s.alive) return;
          setData(d);
          setError(null);
        },
        (e: Error) => {
          if (s.alive) setError(e.message);
        },
      )
      .finally(() => {
        s.busy = false;
        if (s.again && s.alive) {
          s.again = false;
          load();
        }
      });
  }, [id]);

  useEffect(() => {
    state.current.alive = true;
    load();
    return () => {
      state.current.alive = false;
    };
  }, [load]);
  return { data, error, load };
}

function Facts({ t, needs }: { t: TaskRecord; needs: number[] }) {
  const rows: [string, ComponentChildren][] = [
    ["queue", `${t.queue} · priority ${t.priority}`],
    ["attempts", String(t.attempts)],
    ["created", time(t.createdAt)],
    ["started", time(t.startedAt)],
    ["ended", time(t.endedAt)],
  ];
  if (t.job) rows.push(["job", t.job]);
  if (t.scope) rows.push(["scope", t.scope]);
  if (t.ownerId !== null) rows.push(["owner", <a href={taskHref(t.ownerId)}>#{t.ownerId}</a>]);
  if (needs.length) rows.push(["needs", needs.map((n) => `#${n}`).join(", ")]);
  if (t.eventName && t.status === "waiting") rows.push(["waits for signal", t.eventName]);
  if (t.status === "waiting" && t.wakeAt !== null) rows.push(["wakes at", time(t.wakeAt)]);
  if (t.status === "running") rows.push(["lease", `${t.lockedBy ?? "?"} until ${time(t.leaseUntil)}`]);
  return (
    <dl class="facts">
      {rows.map(([k, v]) => (
        <Fragment key={k}>
          <dt>{k}</dt>
          <dd>{v}</dd>
        </Fragment>
      ))}
    </dl>
  );
}

export function TaskDetail({ id }: { id: number }) {
  const { data, error, load } = useTask(id);
  const ids = data?.tree ? treeIds(data.tree).slice(0, MAX_WATCH) : [id];
  const onTask = useCallback((v: { id: number }) => ids.includes(v.id) && load(), [ids.join(","), load]);
  useWatch(ids, onTask);

  if (error && !data)
    return (
      <p class="problem" role="alert">
        Task #{id}: {error}
      </p>
    );
  if (!data) return <p class="muted">Loading task #{id}…</p>;
  const { details, tree, explain } = data;
  const t = details.task;
  return (
    <div data-view="task" data-task={t.id}>
      <h2>
        #{t.id} {t.name} <StateBadge task={t} />
      </h2>
      {explain && t.status !== "terminal" && <p class="explain">{explain.text}</p>}
      {t.progress !== null && (
        <div class="progress" data-field="progress">
          <progress max={1} value={t.progress} aria-label="progress" /> {percent(t.progress)}
          {t.progressNote ? ` — ${t.progressNote}` : ""}
        </div>
      )}
      {t.error && (
        <section class="card error" data-section="error">
          <h3>
            {t.status === "terminal" ? "Error" : "Last error"}
            {t.error.code ? ` [${t.error.code}]` : ""}
          </h3>
          <p data-field="error">
            {t.error.name}: {t.error.message}
          </p>
          {t.error.upstream !== undefined && (
            <p>
              Caused by <a href={taskHref(t.error.upstream)}>#{t.error.upstream}</a>
            </p>
          )}
          <Stack error={t.error} />
        </section>
      )}
      <Actions task={t} onDone={load} />
      <div class="columns">
        <section>
          <h3>Facts</h3>
          <Facts t={t} needs={details.needs} />
          <h3>Input</h3>
          <pre class="json">{pretty(t.input)}</pre>
          {t.status === "terminal" && t.outcome === "completed" && (
            <>
              <h3>Result</h3>
              <pre class="json" data-field="result">
                {pretty(t.result)}
              </pre>
            </>
          )}
        </section>
        <section>
          <h3>Timeline</h3>
          <Timeline details={details} />
        </section>
      </div>
      <h3>Output streams</h3>
      <Streams taskId={t.id} live={t.status !== "terminal"} />
      <h3>Steps</h3>
      <Steps details={details} />
      <h3>Retries</h3>
      <Retries details={details} />
      <h3>Owner tree</h3>
      {tree ? <TreeView tree={tree} current={t.id} /> : <p class="muted">Not available.</p>}
    </div>
  );
}
