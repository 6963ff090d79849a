/**
 * The dispatch API (spec §20.27): items, attempts with their timelines,
 * close-outs, wakes, seats, and the board of items by pipeline step. Every
 * route calls the store's dispatch operations (src/store/dispatch/ops.ts),
 * which check their input; lists are bounded (at most 1,000).
 */
import type { Hono } from "hono";
import { explainAttempt, explainItemStuck, stepTimeoutOf } from "../../core/dispatch/explain.js";
import { definePipeline, type Pipeline, type PipelineSpec } from "../../core/dispatch/pipeline.js";
import { type DispatchTimeouts, resolveTimeouts } from "../../core/dispatch/timeouts.js";
import { toStorableJson } from "../../core/json.js";
import { parseCloseout } from "../../dispatch/workers/adapter.js";
import type { Ratchet } from "../../engine/ratchet.js";
import { ConfigError, NotFoundError, ValidationError } from "../../errors.js";
import type { DispatchCapable, DispatchOps, ItemRow } from "../../store/dispatch/ops.js";
import { pullOps } from "../../store/pulls/ops.js";
import { onlyKeys, parseBoolean, parseIntParam, readObject } from "../params.js";

const ITEM_STATES = ["open", "running", "done", "closed", "archived"] as const;

function opsOf(ratchet: Ratchet): DispatchOps {
  const ops = (ratchet.store as unknown as Partial<DispatchCapable>).dispatch;
  if (!ops) throw new NotFoundError("dispatch operations on this store");
  return ops;
}

function itemState(text: string | undefined): ItemRow["state"] | null {
  if (text === undefined) return null;
  if (!(ITEM_STATES as readonly string[]).includes(text))
    throw new ValidationError(`state must be one of ${ITEM_STATES.join(", ")}`);
  return text as ItemRow["state"];
}

const str = (v: unknown, what: string): string => {
  if (typeof v !== "string") throw new ValidationError(`${what} must be a string`);
  return v;
};

/** The configuration the "why" view explains with: the runner's pipelines and timeouts. */
export interface DispatchExplainConfig {
  readonly pipelines?: readonly PipelineSpec[];
  readonly timeouts?: Partial<DispatchTimeouts>;
}

interface ExplainWith {
  readonly pipelines: ReadonlyMap<string, Pipeline>;
  readonly timeouts: DispatchTimeouts;
}

/**
 * Checks the explain configuration when the server is built, so a bad pipeline or timeout fails
 * createServer (PipelineError, ConfigError) rather than a request. spec §20.10, §20.8.
 */
export function resolveExplainConfig(c: DispatchExplainConfig = {}): ExplainWith {
  const pipelines = new Map<string, Pipeline>();
  for (const spec of c.pipelines ?? []) {
    const p = definePipeline(spec);
    if (pipelines.has(p.name)) throw new ConfigError(`pipeline ${p.name} is listed twice`);
    pipelines.set(p.name, p);
  }
  return { pipelines, timeouts: resolveTimeouts(c.timeouts) };
}

export function registerDispatchRoutes(app: Hono, ratchet: Ratchet, explain: ExplainWith): void {
  registerItemRoutes(app, ratchet, explain);
  registerAttemptRoutes(app, ratchet);
  // Why an attempt is where it is: the CLI's `ratchet dispatch why`, from the row alone (spec §20.28).
  app.get("/api/dispatch/attempts/:id/why", async (c) => {
    const a = await opsOf(ratchet).getAttempt(c.req.param("id"));
    if (!a) throw new NotFoundError(`attempt ${c.req.param("id")}`);
    const why = explainAttempt({
      attempt: a,
      stepTimeoutMinutes: stepTimeoutOf(explain.pipelines, a),
      timeouts: explain.timeouts,
    });
    return c.json({ attempt: a.id, ...why });
  });
  app.get("/api/dispatch/seats", async (c) => c.json({ seats: await opsOf(ratchet).seats() }));
  // Linked pull requests (spec §22.9): read-only, from the store; nothing here calls a forge or has a token.
  app.get("/api/dispatch/prs", async (c) => {
    const pulls = pullOps({ dispatch: opsOf(ratchet), now: () => ratchet.store.now() });
    const limit = parseIntParam(c.req.query("limit"), "limit", 1, 1_000) ?? 100;
    const f = {
      itemId: c.req.query("item"),
      attemptId: c.req.query("attempt"),
      after: c.req.query("after"),
      limit,
    };
    return c.json({ prs: await pulls.list(f) });
  });
  app.get("/api/dispatch/prs/:id", async (c) => {
    const pr = await pullOps({ dispatch: opsOf(ratchet), now: () => ratchet.store.now() }).get(
      c.req.param("id"),
    );
    if (!pr) throw new NotFoundError(`pull request ${c.req.param("id")}`);
    return c.json({ pr });
  });

  // The board: a pipeline's items that are not archived, by step, each with its live attempt (if any).
  app.get("/api/dispatch/board", async (c) => {
    const ops = opsOf(ratchet);
    const pipeline = c.req.query("pipeline");
    const items = (await ops.listItems({ pipeline, limit: 1_000 })).filter((i) => i.state !== "archived");
    const live = await ops.listAttempts({ live: true, limit: 1_000 });
    const byItem = new Map(live.map((a) => [a.itemId, a]));
    const steps: Record<string, unknown[]> = {};
    for (const i of items) {
      steps[i.step] ??= [];
      steps[i.step]!.push({ ...i, attempt: byItem.get(i.id) ?? null });
    }
    return c.json({ pipeline: pipeline ?? null, steps });
  });
}

function registerItemRoutes(app: Hono, ratchet: Ratchet, explain: ExplainWith): void {
  app.get("/api/dispatch/items", async (c) => {
    const limit = parseIntParam(c.req.query("limit"), "limit", 1, 1_000) ?? 100;
    const q = {
      state: itemState(c.req.query("state")),
      pipeline: c.req.query("pipeline"),
      after: c.req.query("after"),
    };
    return c.json({ items: await opsOf(ratchet).listItems({ ...q, limit }) });
  });

  app.get("/api/dispatch/items/:id", async (c) => {
    const ops = opsOf(ratchet);
    const item = await ops.getItem(c.req.param("id"));
    if (!item) throw new NotFoundError(`item ${c.req.param("id")}`);
    const attempts = await ops.listAttempts({ itemId: item.id, limit: 1_000 });
    // spec §20.30: stuck at a step its pipeline no longer has, judged by the server's pipelines (if any).
    const stuck = explain.pipelines.size > 0 ? explainItemStuck(item, explain.pipelines) : null;
    return c.json({ item, attempts, stuck });
  });

  // spec §20.30: move an open item to a step its pipeline has, guarded on the step it was read at.
  app.post("/api/dispatch/items/:id/move", async (c) => {
    const body = await readObject(c.req);
    onlyKeys(body, ["step"], "move item");
    const step = str(body.step, "step");
    const ops = opsOf(ratchet);
    const item = await ops.getItem(c.req.param("id"));
    if (item?.state !== "open") throw new NotFoundError(`open item ${c.req.param("id")}`);
    const p = explain.pipelines.get(item.pipeline);
    if (!p) throw new ValidationError(`the server has no pipeline "${item.pipeline}" configured`);
    if (!p.steps.has(step))
      throw new ValidationError(
        `pipeline "${p.name}" has no step "${step}" (its steps: ${[...p.steps.keys()].join(", ")})`,
      );
    const moved = await ops.moveItem(item.id, item.step, step);
    if (!moved) throw new NotFoundError(`open item ${item.id} at step ${item.step} (it changed meanwhile)`);
    return c.json({ item: moved });
  });

  app.post("/api/dispatch/items", async (c) => {
    const body = await readObject(c.req);
    onlyKeys(body, ["pipeline", "step", "input"], "add item");
    const input = toStorableJson(body.input ?? null, "the item's input");
    const item = await opsOf(ratchet).addItem(str(body.pipeline, "pipeline"), str(body.step, "step"), input);
    return c.json({ item }, 201);
  });

  app.post("/api/dispatch/items/:id/close", async (c) => {
    onlyKeys(await readObject(c.req), [], "close item");
    const r = await opsOf(ratchet).closeItem(c.req.param("id"));
    if (!r) throw new NotFoundError(`open or running item ${c.req.param("id")}`);
    return c.json(r);
  });
}

function registerAttemptRoutes(app: Hono, ratchet: Ratchet): void {
  app.get("/api/dispatch/attempts", async (c) => {
    const limit = parseIntParam(c.req.query("limit"), "limit", 1, 1_000) ?? 100;
    const live = parseBoolean(c.req.query("live"), "live") ?? false;
    const f = {
      itemId: c.req.query("item"),
      state: c.req.query("state"),
      after: c.req.query("after"),
      live,
      limit,
    };
    return c.json({ attempts: await opsOf(ratchet).listAttempts(f) });
  });

  app.get("/api/dispatch/attempts/:id", async (c) => {
    const ops = opsOf(ratchet);
    const attempt = await ops.getAttempt(c.req.param("id"));
    if (!attempt) throw new NotFoundError(`attempt ${c.req.param("id")}`);
    const after = parseIntParam(c.req.query("after"), "after", 0, Number.MAX_SAFE_INTEGER) ?? 0;
    return c.json({ attempt, events: await ops.events(attempt.id, after, 1_000) });
  });

  app.post("/api/dispatch/attempts/:id/closeout", async (c) => {
    const body = await readObject(c.req);
    onlyKeys(body, ["outcome", "summary", "data"], "close-out");
    const checked = parseCloseout(toStorableJson(body, "the close-out", 256 * 1024));
    if (checked.outcome !== body.outcome) throw new ValidationError(`bad close-out: ${checked.summary}`);
    const a = await opsOf(ratchet).recordCloseout(c.req.param("id"), JSON.stringify(checked));
    if (!a) throw new NotFoundError(`live attempt ${c.req.param("id")}`);
    return c.json({ attempt: a });
  });

  app.post("/api/dispatch/attempts/:id/wake", async (c) => {
    onlyKeys(await readObject(c.req), [], "wake");
    const a = await opsOf(ratchet).requestWake(c.req.param("id"), "operator");
    if (!a) throw new NotFoundError(`sleeping attempt ${c.req.param("id")} without a wake requested`);
    return c.json({ attempt: a });
  });
}
