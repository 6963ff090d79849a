/**
 * Hash routes, so the server needs to serve only `/`:
 * `#/` overview, `#/tasks?status=…` the list with its filters, `#/tasks/42` one task,
 * `#/conversations` and `#/conversations/ID` (spec §17), `#/dispatch` and
 * `#/dispatch/attempts/ID` (spec §20.27), `#/providers` (spec §18.9).
 */
import { useEffect, useState } from "preact/hooks";

export type Route =
  | { view: "overview" }
  | { view: "tasks"; filters: Record<string, string> }
  | { view: "task"; id: number }
  | { view: "conversations" }
  | { view: "conversation"; id: string }
  | { view: "dispatch" }
  | { view: "providers" }
  | { view: "attempt"; id: string };

export function parseRoute(hash: string): Route {
  const [path = "", q = ""] = hash.replace(/^#/, "").split("?");
  const one = /^\/tasks\/(\d{1,16})$/.exec(path);
  if (one) return { view: "task", id: Number(one[1]) };
  const conv = /^\/conversations\/(.{1,600})$/.exec(path);
  if (conv) {
    try {
      return { view: "conversation", id: decodeURIComponent(conv[1]!) };
    } catch {
      return { view: "conversations" };
    }
  }
  if (path === "/conversations") return { view: "conversations" };
  const attempt = /^\/dispatch\/attempts\/([1-9][0-9]{0,17})$/.exec(path);
  if (attempt) return { view: "attempt", id: attempt[1]! };
  if (path === "/dispatch") return { view: "dispatch" };
  if (path === "/providers") return { view: "providers" };
  if (path === "/tasks") return { view: "tasks", filters: Object.fromEntries(new URLSearchParams(q)) };
  return { view: "overview" };
}

export function useRoute(): Route {
  const [route, set] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const on = () => set(parseRoute(location.hash));
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return route;
}

export function taskHref(id: number): string {
  return `#/tasks/${id}`;
}

export function listHref(filters: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
  const s = q.toString();
  return `#/tasks${s ? `?${s}` : ""}`;
}
