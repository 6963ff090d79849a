/**
 * Views of task trees (spec §12.10): the derived state of every live task
 * (never stored), and the ownership tree below a task. Pure functions over
 * rows the store returned; nothing here writes or runs task code.
 */
import type { StoredError } from "../core/json.js";
import type { Outcome, Status } from "../core/model.js";
import type { BlockedReason, InspectRows, TaskId, TaskRecord } from "../store/store.js";
import type { TaskDefinition } from "./definition.js";
import { type Reason, reasonFor } from "./explain.js";

export type DerivedState =
  | { state: "ready"; migrates: boolean }
  | { state: "running"; holder: string | null; abortHandler: boolean }
  | { state: "waiting"; on: WaitingOn }
  | { state: "completing"; outcome: Outcome }
  | { state: "blocked"; reason: BlockedReason; error?: StoredError };

export type WaitingOn =
  | { kind: "tasks"; ids: TaskId[]; policy: string }
  | { kind: "event"; name: string; until: number | null }
  | { kind: "owned_work"; ids: TaskId[] }
  | { kind: "needs"; count: number }
  | { kind: "timer"; until: number | null }
  | { kind: "seat"; seat: string }
  | { kind: "rate"; until: number | null };

export interface InspectedTask {
  id: TaskId;
  name: string;
  queue: string;
  scope: string;
  ownerId: TaskId | null;
  background: boolean;
  abortRequested: boolean;
  status: Status;
  derived: DerivedState;
}

export interface Inspection {
  scheduling: "paused" | "running" | "closing";
  at: number;
  tasks: InspectedTask[];
  /** More live tasks exist than were listed. */
  truncated: boolean;
}

export function inspection(
  rows: InspectRows,
  registry: ReadonlyMap<string, TaskDefinition>,
  ctx: { scheduling: Inspection["scheduling"]; now: number },
): Inspection {
  const live = new Set(rows.tasks.map((t) => t.id));
  const isLive = (id: TaskId) => live.has(id) || rows.truncated;
  const members = new Map<TaskId, TaskId[]>();
  for (const w of rows.waits) {
    const list = members.get(w.waiter) ?? [];
    list.push(w.member);
    members.set(w.waiter, list);
  }
  const kids = new Map<TaskId, TaskId[]>();
  for (const t of rows.tasks) {
    if (t.ownerId === null || t.background) continue;
    const list = kids.get(t.ownerId) ?? [];
    list.push(t.id);
    kids.set(t.ownerId, list);
  }
  const stored = new Map(rows.definitions.map((d) => [d.name, d]));
  const derive = (t: TaskRecord): DerivedState =>
    derivedOf(
      reasonFor(t, {
        liveMembers: (members.get(t.id) ?? []).filter(isLive),
        liveChildren: kids.get(t.id) ?? [],
        liveNeeds: [],
        ahead: 0,
        local: registry.get(t.name),
        stored: stored.get(t.name) ?? null,
      }),
    );
  return {
    scheduling: ctx.scheduling,
    at: ctx.now,
    truncated: rows.truncated,
    tasks: rows.tasks.map((t) => ({
      id: t.id,
      name: t.name,
      queue: t.queue,
      scope: t.scope ?? String(t.id),
      ownerId: t.ownerId,
      background: t.background,
      abortRequested: t.abortRequested,
      status: t.status,
      derived: derive(t),
    })),
  };
}

/** inspect()'s shape of a live task's reason (the classification itself is reasonFor's). */
function derivedOf(r: Reason): DerivedState {
  switch (r.kind) {
    case "running":
      return { state: "running", holder: r.holder, abortHandler: r.abortHandler };
    case "completing":
      return { state: "completing", outcome: r.outcome };
    case "blocked":
      return { state: "blocked", reason: r.reason, ...(r.error ? { error: r.error } : {}) };
    case "no_definition":
      return { state: "blocked", reason: "missing_definition" };
    case "queued":
      return { state: "ready", migrates: r.migrates };
    case "tasks":
      return { state: "waiting", on: { kind: "tasks", ids: r.ids, policy: r.policy } };
    case "event":
      return { state: "waiting", on: { kind: "event", name: r.name, until: r.until } };
    case "draining":
      return { state: "waiting", on: { kind: "owned_work", ids: r.children } };
    case "needs":
      return { state: "waiting", on: { kind: "needs", count: r.count } };
    case "seat":
      return { state: "waiting", on: { kind: "seat", seat: r.seat } };
    case "rate":
      return { state: "waiting", on: { kind: "rate", until: r.until } };
    case "not_due":
    case "sleeping":
    case "backoff":
    case "abort_retry":
      return { state: "waiting", on: { kind: "timer", until: r.until } };
    case "ended":
      throw new Error("inspect lists live tasks only");
  }
}

export interface TaskTree {
  task: TaskRecord;
  children: TaskTree[];
}

/** Nests a subtree listing (owner before owned: ids grow with creation) under its first row. */
export function buildTree(rows: readonly TaskRecord[], limit: number): TaskTree & { truncated: boolean } {
  const nodes = new Map<TaskId, TaskTree>();
  for (const r of rows) nodes.set(r.id, { task: r, children: [] });
  const root = nodes.get(rows[0]!.id)!;
  for (const r of rows.slice(1)) {
    const parent = r.ownerId === null ? undefined : nodes.get(r.ownerId);
    parent?.children.push(nodes.get(r.id)!);
  }
  return { ...root, truncated: rows.length >= limit };
}

/** One line per task, indented by depth (CLI `ratchet tree`). */
export function renderTree(t: TaskTree, depth = 0, out: string[] = []): string[] {
  const s = t.task;
  const state =
    s.status === "terminal"
      ? s.outcome
      : s.status === "completing"
        ? `completing(${s.heldOutcome})`
        : s.status;
  const flags = [
    s.background ? "background" : "",
    s.abortRequested && s.status !== "terminal" ? "abort-marked" : "",
  ]
    .filter(Boolean)
    .join(", ");
  out.push(
    `${"  ".repeat(depth)}${depth ? "└ " : ""}#${s.id} ${s.name}${s.spawnName ? ` "${s.spawnName}"` : ""} ${state}${flags ? ` [${flags}]` : ""}`,
  );
  for (const c of t.children) renderTree(c, depth + 1, out);
  return out;
}
