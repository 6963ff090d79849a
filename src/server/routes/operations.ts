/**
 * Routes beyond single tasks: jobs, queue stats, live-task inspection,
 * scopes, signals, schedules, run-time concurrency limits and the tick
 * driver. Each calls the public Ratchet method of the same name.
 */
import type { Hono } from "hono";
import type { Ratchet } from "../../engine/ratchet.js";
import { ValidationError } from "../../errors.js";
import { onlyKeys, parseIntParam, readObject } from "../params.js";

/**
 * Bounds of POST /api/tick. 15 minutes is the longest kill limit of the common serverless
 * platforms; a request that asks for more is a mistake, not a longer drain.
 */
export const MAX_HTTP_TICK_MS = 900_000;
export const MAX_HTTP_TICK_CONCURRENCY = 1_000;

function boundedInt(v: unknown, what: string, min: number, max: number): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max)
    throw new ValidationError(
      `tick: ${what} must be an integer in [${min}, ${max}] (got ${JSON.stringify(v)})`,
    );
  return v;
}

export function registerOperationRoutes(app: Hono, ratchet: Ratchet): void {
  app.get("/api/jobs/:job", async (c) => c.json(await ratchet.jobStatus(c.req.param("job"))));

  app.get("/api/stats", async (c) => c.json({ queues: await ratchet.stats() }));

  app.get("/api/inspect", async (c) => {
    const limit = parseIntParam(c.req.query("limit"), "limit", 1, 10_000) ?? 200;
    return c.json(await ratchet.inspect({ limit }));
  });

  app.post("/api/scopes/:scope/abort", async (c) => {
    const body = await readObject(c.req);
    onlyKeys(body, ["background"], "abort scope");
    const background = body.background ?? false;
    if (typeof background !== "boolean") throw new ValidationError("background must be a boolean");
    const scope = c.req.param("scope");
    return c.json({ scope, ...(await ratchet.abortScope(scope, { background })) });
  });

  app.post("/api/signals/:name", async (c) => {
    const body = await readObject(c.req);
    onlyKeys(body, ["payload"], "signal");
    return c.json(await ratchet.signal(c.req.param("name"), body.payload ?? null));
  });

  app.get("/api/schedules", async (c) => c.json({ schedules: await ratchet.schedules() }));

  // spec §8.3, §8.12: the HTTP driver. Runs this server's registered definitions (never code from
  // the request) for at most budgetMs, beside any other driver on the store (§8.5), and answers
  // with the tick's report.
  app.post("/api/tick", async (c) => {
    const body = await readObject(c.req);
    onlyKeys(body, ["budgetMs", "concurrency"], "tick");
    if (!("budgetMs" in body)) throw new ValidationError("tick: budgetMs is required");
    const budgetMs = boundedInt(body.budgetMs, "budgetMs", 0, MAX_HTTP_TICK_MS);
    const concurrency =
      body.concurrency === undefined
        ? undefined
        : boundedInt(body.concurrency, "concurrency", 1, MAX_HTTP_TICK_CONCURRENCY);
    return c.json(await ratchet.tick(concurrency === undefined ? { budgetMs } : { budgetMs, concurrency }));
  });

  app.get("/api/concurrency", async (c) => c.json(await ratchet.concurrencyLimits()));

  app.put("/api/concurrency/:group", async (c) => {
    const body = await readObject(c.req);
    onlyKeys(body, ["limit", "key"], "concurrency");
    if (!("limit" in body))
      throw new ValidationError("concurrency: limit is required (a number, or null to clear)");
    if (body.key !== undefined && typeof body.key !== "string")
      throw new ValidationError("concurrency: key must be a string");
    const woken = await ratchet.setConcurrencyLimit(
      c.req.param("group"),
      body.limit as number | null,
      body.key === undefined ? {} : { key: body.key },
    );
    return c.json({ woken });
  });
}
