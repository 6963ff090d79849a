/** Human output: aligned tables, ISO times and shortened JSON. */
import type { TaskRecord } from "../store/store.js";

export function iso(ms: number | null | undefined): string {
  return ms === null || ms === undefined ? "-" : new Date(ms).toISOString();
}

/** One-line JSON, cut to `max` characters. */
export function short(value: unknown, max = 60): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  text = text.replace(/\s+/g, " ");
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** "terminal:failed" style state for a record. */
export function stateOf(t: Pick<TaskRecord, "status" | "outcome">): string {
  return t.status === "terminal" ? (t.outcome ?? "terminal") : t.status;
}

/** Columns padded to their widest cell; the last column is not padded. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)].join("\n");
}

/** "label  value" lines with the labels padded. */
export function pairs(entries: readonly (readonly [string, string])[]): string {
  const w = Math.max(0, ...entries.map(([k]) => k.length));
  return entries.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join("\n");
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export function print(text: string): void {
  process.stdout.write(`${text}\n`);
}
