/**
 * Where an item goes when an attempt settles (spec §20.11), and how a step's
 * spawn template becomes a spawn request (spec §20.12). Pure.
 */
import type { ForcedFailure } from "./model.js";
import type { EdgeKey, Pipeline, SpawnTemplate } from "./pipeline.js";
import type { PrWait } from "./pulls.js";

/** A JSON value as parsed from an item's stored input. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [k: string]: JsonValue };

/** `wait`: the edge's pull-request wait (spec §22.7), absent when it has none. */
export type Route =
  | {
      readonly kind: "step";
      readonly to: string;
      readonly resume: boolean;
      readonly edge: string;
      readonly wait?: PrWait;
    }
  | {
      readonly kind: "end";
      readonly state: "done" | "closed";
      readonly edge: string | null;
      readonly wait?: PrWait;
    };

/**
 * The route of a settled attempt: its forced failure's own edge, else
 * `failed` for any failure, else the default (succeeded → done, failed →
 * closed). An edge with `max` that this item took `max` times already ends
 * the item `closed`. `taken` counts the item's earlier takes by edge id
 * (`step:key`). spec §20.11.
 * Invariant: every outcome of every step has a route, and a bounded edge is
 * taken at most `max` times per item (which is why a pipeline whose cycles
 * all hold a bounded edge ends).
 */
export function routeOf(
  pipeline: Pipeline,
  phase: string,
  succeeded: boolean,
  forced: ForcedFailure | null,
  taken: Readonly<Record<string, number>>,
): Route {
  const step = pipeline.steps.get(phase);
  const keys: EdgeKey[] = succeeded ? ["succeeded"] : forced ? [forced, "failed"] : ["failed"];
  for (const key of keys) {
    const edge = step?.on[key];
    if (!edge) continue;
    const id = `${phase}:${key}`;
    const wait = edge.waitFor ? { wait: edge.waitFor } : {};
    if ("end" in edge) return { kind: "end", state: edge.end, edge: id, ...wait };
    if (edge.max !== undefined && (taken[id] ?? 0) >= edge.max)
      return { kind: "end", state: "closed", edge: id };
    return { kind: "step", to: edge.to, resume: edge.resume === true, edge: id, ...wait };
  }
  return { kind: "end", state: succeeded ? "done" : "closed", edge: null };
}

/** What a worker adapter is asked to start (spec §20.12). */
export interface SpawnRequest {
  /** A name unique to the attempt (`ratchet-<attempt id>`), by which a stray session can be found again. */
  readonly name: string;
  readonly command: readonly string[];
  readonly prompt: string | null;
  readonly cwd: string | null;
  readonly env: Readonly<Record<string, string>>;
}

export interface SpawnContext {
  readonly itemId: string;
  readonly attemptId: string;
  readonly step: string;
  readonly input: JsonValue;
}

function lookup(ctx: SpawnContext, path: string): string {
  if (path === "item.id") return ctx.itemId;
  if (path === "attempt.id") return ctx.attemptId;
  if (path === "step") return ctx.step;
  let v: JsonValue | undefined = ctx.input;
  for (const key of path.split(".").slice(1)) {
    v = v !== null && typeof v === "object" && !Array.isArray(v) ? v[key] : undefined;
  }
  if (v === undefined || v === null) return "";
  return typeof v === "string" ? v : JSON.stringify(v);
}

const render = (text: string, ctx: SpawnContext) =>
  text.replace(/\{\{\s*([^{}]*?)\s*\}\}/g, (_m, path: string) => lookup(ctx, path));

/**
 * Fills a step's template from the item. A missing input path renders as
 * the empty string; objects render as JSON. spec §20.12.
 * Invariant: only the placeholders definePipeline accepted are replaced.
 */
export function renderSpawn(t: SpawnTemplate, ctx: SpawnContext): SpawnRequest {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(t.env ?? {})) env[k] = render(v, ctx);
  return {
    name: `ratchet-${ctx.attemptId}`,
    command: t.command.map((a) => render(a, ctx)),
    prompt: t.prompt === undefined ? null : render(t.prompt, ctx),
    cwd: t.cwd === undefined ? null : render(t.cwd, ctx),
    env,
  };
}
