/**
 * Task routes: enqueue, list, one task, its tree, why it is where it is,
 * retry and abort. Each handler parses, calls the public Ratchet method the
 * library user would call, and returns its result as JSON; validation is the
 * engine's own (bad input writes nothing, spec §2.1).
 */
import type { Hono } from "hono";
import type { BatchEntry, Ratchet } from "../../engine/ratchet.js";
import { ValidationError } from "../../errors.js";
import type { ListFilter, TaskRecord } from "../../store/store.js";
import {
  decodeCursor,
  encodeCursor,
  onlyKeys,
  parseIntParam,
  parseName,
  parseOutcome,
  parseStatus,
  parseTaskId,
  readObject,
} from "../params.js";

/** Page size of GET /api/tasks: default and bound. */
export const DEFAULT_PAGE = 50;
export const MAX_PAGE = 200;
/**
 * The error-text filter has no index: it reads pages of the other filters and
 * matches in memory. One request reads at most this many tasks, then returns
 * what it found with a cursor to go on (`scanned` tells how far it got).
 */
export const MAX_ERROR_SCAN = 5_000;
const SCAN_PAGE = 500;
const MAX_ERROR_TEXT = 200;

const ENTRY_FIELDS = [
  "task",
  "input",
  "key",
  "queue",
  "priority",
  "runAfter",
  "delayMs",
  "dedupe",
  "job",
  "scope",
  "needs",
  "throttle",
  "debounce",
] as const;

/** A JSON entry → a BatchEntry; `task` must be a registered name (no code ever comes from a request). */
export function toEntry(value: unknown, what: string): BatchEntry {
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw new ValidationError(`${what} must be an object`);
  const e = value as Record<string, unknown>;
  onlyKeys(e, ENTRY_FIELDS, what);
  if (typeof e.task !== "string") throw new ValidationError(`${what}: task must be a task name (a string)`);
  let runAfter = e.runAfter;
  if (typeof runAfter === "string") {
    // JSON has no Date: an ISO 8601 instant is accepted besides epoch ms.
    if (!/^\d{4}-\d{2}-\d{2}T/.test(runAfter) || Number.isNaN(Date.parse(runAfter)))
      throw new ValidationError(`${what}: runAfter must be epoch ms or an ISO 8601 instant`);
    runAfter = new Date(runAfter);
  }
  return {
    ...(e as unknown as BatchEntry),
    ...(runAfter === undefined ? {} : { runAfter: runAfter as Date }),
  };
}

function matchesError(t: TaskRecord, needle: string): boolean {
  if (!t.error) return false;
  return `${t.error.name}: ${t.error.message}`.toLowerCase().includes(needle);
}

export interface TaskPage {
  tasks: TaskRecord[];
  /** Pass as `cursor` for the next page; null when there is none. */
  nextCursor: string | null;
  /** With `error`: how many tasks were read to fill this page. */
  scanned?: number;
}

/** One page, newest first. Without `error`: one read of limit + 1 rows tells whether more exist. */
async function listPage(
  ratchet: Ratchet,
  filter: Omit<ListFilter, "limit">,
  limit: number,
  errorText: string | undefined,
): Promise<TaskPage> {
  if (errorText === undefined) {
    const rows = await ratchet.list({ ...filter, limit: limit + 1 });
    const tasks = rows.slice(0, limit);
    return { tasks, nextCursor: rows.length > limit ? encodeCursor(tasks.at(-1)!.id) : null };
  }
  const needle = errorText.toLowerCase();
  const tasks: TaskRecord[] = [];
  let before = filter.before;
  let scanned = 0;
  for (;;) {
    const want = Math.min(SCAN_PAGE, MAX_ERROR_SCAN - scanned);
    const rows = await ratchet.list({ ...filter, before, limit: want });
    for (const t of rows) {
      scanned++;
      before = t.id;
      if (matchesError(t, needle)) {
        tasks.push(t);
        // Full: the next page starts below the last task returned (the rest of this read is read again).
        if (tasks.length === limit) return { tasks, nextCursor: encodeCursor(t.id), scanned };
      }
    }
    if (rows.length < want) return { tasks, nextCursor: null, scanned };
    // Budget spent: the page may be short, even empty, and still have a cursor.
    if (scanned >= MAX_ERROR_SCAN) return { tasks, nextCursor: encodeCursor(before!), scanned };
  }
}

export function registerTaskRoutes(app: Hono, ratchet: Ratchet): void {
  app.post("/api/tasks", async (c) => {
    const id = await ratchet.enqueue(...single(toEntry(await readObject(c.req), "task")));
    return c.json({ id }, 201);
  });

  app.post("/api/tasks/batch", async (c) => {
    const body = await readObject(c.req);
    onlyKeys(body, ["entries"], "batch");
    if (!Array.isArray(body.entries)) throw new ValidationError("batch: entries must be an array");
    const entries = body.entries.map((e, i) => toEntry(e, `entries[${i}]`));
    return c.json({ ids: await ratchet.enqueueMany(entries) }, 201);
  });

  app.get("/api/tasks", async (c) => {
    const q = c.req.query();
    onlyKeys(q, ["queue", "status", "outcome", "name", "job", "error", "limit", "cursor"], "query");
    const errorText = q.error;
    if (errorText !== undefined && (errorText.length === 0 || errorText.length > MAX_ERROR_TEXT))
      throw new ValidationError(`error must be 1–${MAX_ERROR_TEXT} characters`);
    const filter: Omit<ListFilter, "limit"> = {
      queue: parseName(q.queue, "queue"),
      status: parseStatus(q.status),
      outcome: parseOutcome(q.outcome),
      name: parseName(q.name, "name"),
      job: parseName(q.job, "job"),
      before: decodeCursor(q.cursor),
    };
    const limit = parseIntParam(q.limit, "limit", 1, MAX_PAGE) ?? DEFAULT_PAGE;
    return c.json(await listPage(ratchet, filter, limit, errorText));
  });

  app.get("/api/tasks/:id", async (c) => c.json(await ratchet.details(parseTaskId(c.req.param("id")))));

  app.get("/api/tasks/:id/tree", async (c) => {
    const limit = parseIntParam(c.req.query("limit"), "limit", 1, 10_000) ?? 1_000;
    return c.json(await ratchet.tree(parseTaskId(c.req.param("id")), { limit }));
  });

  app.get("/api/tasks/:id/explain", async (c) =>
    c.json(await ratchet.explain(parseTaskId(c.req.param("id")))),
  );

  app.post("/api/tasks/:id/retry", async (c) => {
    const id = parseTaskId(c.req.param("id"));
    onlyKeys(await readObject(c.req), [], "retry");
    return c.json({ task: await ratchet.retry(id) });
  });

  app.post("/api/tasks/:id/abort", async (c) => {
    const id = parseTaskId(c.req.param("id"));
    onlyKeys(await readObject(c.req), [], "abort");
    return c.json(await ratchet.abort(id));
  });
}

function single(e: BatchEntry): [BatchEntry["task"], unknown, Omit<BatchEntry, "task" | "input" | "key">] {
  const { task, input, key, ...opts } = e;
  if (key !== undefined) throw new ValidationError("task: key only applies to batch entries");
  return [task, input, opts];
}
