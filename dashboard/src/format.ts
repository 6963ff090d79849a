/** How values are shown. Everything ends up as text in JSX, which Preact escapes. */
import type { TaskRecord } from "./types.js";

/** "terminal" is shown as its outcome; "completing" with the outcome it holds. */
export function stateOf(t: Pick<TaskRecord, "status" | "outcome"> & { heldOutcome?: string | null }): string {
  if (t.status === "terminal") return t.outcome ?? "terminal";
  if (t.status === "completing" && t.heldOutcome) return `completing (${t.heldOutcome})`;
  return t.status;
}

export function time(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  const d = new Date(ms);
  const pad = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "—";
  const a = Math.abs(ms);
  if (a < 1_000) return `${Math.round(ms)} ms`;
  if (a < 60_000) return `${(ms / 1_000).toFixed(a < 10_000 ? 2 : 1)} s`;
  if (a < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((a % 60_000) / 1_000)} s`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/** JSON on one line, cut to `max` characters. */
export function short(v: unknown, max = 120): string {
  let s: string;
  try {
    s = JSON.stringify(v) ?? "undefined";
  } catch {
    s = String(v);
  }
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

export function pretty(v: unknown): string {
  try {
    return JSON.stringify(v, null, 2) ?? "undefined";
  } catch {
    return String(v);
  }
}

export function percent(p: number | null | undefined): string {
  return p === null || p === undefined ? "—" : `${Math.round(p * 100)}%`;
}

/**
 * Step names as shown: the engine's own bookkeeping steps start with a
 * control character (src/store/tree/keys.ts) and phase steps with a turn
 * mark; both are spelled out instead of printed raw.
 */
export function stepName(name: string): string {
  if (name.startsWith("\u0001")) return `engine: ${name.slice(1)}`;
  if (name.startsWith("\u0002")) {
    const colon = name.indexOf(":");
    if (colon > 1) return `turn ${name.slice(1, colon)}: ${name.slice(colon + 1)}`;
  }
  return name;
}
