/**
 * Tasks, newest first, with the API's filters and cursor pages. Live: the
 * rows on screen are watched (their state and progress change in place),
 * and on the first page a change in the queue counts refetches the page, so
 * new tasks appear without a reload. The app mounts a fresh list for each
 * set of filters, so the pages start over when they change.
 */
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { call, query } from "../api.js";
import { percent, stateOf, time } from "../format.js";
import { useStats, useWatch } from "../live.js";
import { listHref, taskHref } from "../router.js";
import { OUTCOMES, STATUSES, type TaskPage, type TaskRecord, type TaskView } from "../types.js";
import { StateBadge } from "./StateBadge.js";

const FIELDS = ["queue", "status", "outcome", "name", "job", "error"] as const;
type Filters = Partial<Record<(typeof FIELDS)[number], string>>;

function pick(raw: Record<string, string>): Filters {
  const f: Filters = {};
  for (const k of FIELDS) if (raw[k]) f[k] = raw[k];
  return f;
}

function FilterForm({ filters }: { filters: Filters }) {
  const [draft, setDraft] = useState<Filters>(filters);
  const set = (k: keyof Filters) => (e: Event) =>
    setDraft({ ...draft, [k]: (e.target as HTMLInputElement | HTMLSelectElement).value });
  const submit = (e: Event) => {
    e.preventDefault();
    location.hash = listHref(draft);
  };
  const text = (k: "queue" | "name" | "job" | "error", label: string) => (
    <label>
      {label} <input name={k} value={draft[k] ?? ""} onInput={set(k)} size={k === "error" ? 18 : 10} />
    </label>
  );
  return (
    <form class="filters" onSubmit={submit}>
      {text("queue", "Queue")}
      <label>
        Status{" "}
        <select name="status" value={draft.status ?? ""} onChange={set("status")}>
          <option value="">any</option>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </label>
      <label>
        Outcome{" "}
        <select name="outcome" value={draft.outcome ?? ""} onChange={set("outcome")}>
          <option value="">any</option>
          {OUTCOMES.map((o) => (
            <option key={o} value={o}>
              {o}
            </option>
          ))}
        </select>
      </label>
      {text("name", "Name")}
      {text("job", "Job")}
      {text("error", "Error text")}
      <button type="submit">Filter</button>{" "}
      <a href="#/tasks" class="button-link">
        Clear
      </a>
    </form>
  );
}

function Row({ t }: { t: TaskRecord }) {
  return (
    <tr data-task={t.id} data-state={stateOf(t)}>
      <td>
        <a href={taskHref(t.id)}>#{t.id}</a>
      </td>
      <td>{t.name}</td>
      <td>{t.queue}</td>
      <td>
        <StateBadge task={t} />
      </td>
      <td class="num">{t.attempts}</td>
      <td>
        {t.progress === null ? "—" : <progress max={1} value={t.progress} title={percent(t.progress)} />}
      </td>
      <td class="muted">{time(t.updatedAt)}</td>
      <td class="error-cell">{t.error ? `${t.error.name}: ${t.error.message}` : ""}</td>
    </tr>
  );
}

export function TaskList({ filters: raw }: { filters: Record<string, string> }) {
  const filters = pick(raw);
  const filterKey = JSON.stringify(filters);
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const [page, setPage] = useState<TaskPage | null>(null);
  const [error, setError] = useState<string | null>(null);
  const seq = useRef(0);
  const cursor = cursors.at(-1) ?? null;

  const load = useCallback(() => {
    const n = ++seq.current;
    call<TaskPage>(`/api/tasks${query({ ...filters, cursor, limit: 50 })}`).then(
      (p) => {
        if (n !== seq.current) return;
        setPage(p);
        setError(null);
      },
      (e: Error) => n === seq.current && setError(e.message),
    );
  }, [filterKey, cursor]);

  useEffect(load, [load]);

  // New tasks appear on the first page: refetch it when the counts move.
  const stats = useStats();
  const countsKey = stats ? JSON.stringify(stats.queues) : "";
  const lastCounts = useRef(countsKey);
  useEffect(() => {
    if (countsKey === lastCounts.current) return;
    lastCounts.current = countsKey;
    if (cursor === null) load();
  }, [countsKey]);

  const onTask = useCallback((v: TaskView) => {
    if (!("status" in v)) return;
    setPage((p) =>
      p?.tasks.some((t) => t.id === v.id)
        ? { ...p, tasks: p.tasks.map((t) => (t.id === v.id ? { ...t, ...v, error: v.error ?? null } : t)) }
        : p,
    );
  }, []);
  useWatch(page?.tasks.map((t) => t.id) ?? [], onTask);

  return (
    <div data-view="tasks">
      <h2>Tasks</h2>
      <FilterForm filters={filters} />
      {error && (
        <p class="problem" role="alert">
          {error}
        </p>
      )}
      {page && (
        <>
          <table class="tasks">
            <thead>
              <tr>
                <th>id</th>
                <th>name</th>
                <th>queue</th>
                <th>state</th>
                <th>attempts</th>
                <th>progress</th>
                <th>updated</th>
                <th>error</th>
              </tr>
            </thead>
            <tbody>
              {page.tasks.map((t) => (
                <Row key={t.id} t={t} />
              ))}
            </tbody>
          </table>
          {page.tasks.length === 0 && <p class="muted">No task matches.</p>}
          {page.scanned !== undefined && (
            <p class="muted">Searched {page.scanned} tasks for the error text on this page.</p>
          )}
          <div class="pager">
            <button
              type="button"
              disabled={cursors.length < 2}
              onClick={() => setCursors(cursors.slice(0, -1))}
            >
              ← Newer
            </button>{" "}
            <span class="muted">page {cursors.length}</span>{" "}
            <button
              type="button"
              disabled={!page.nextCursor}
              onClick={() => page.nextCursor && setCursors([...cursors, page.nextCursor])}
            >
              Older →
            </button>
          </div>
        </>
      )}
    </div>
  );
}
