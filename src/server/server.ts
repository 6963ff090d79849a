/**
 * The HTTP server of `ratchet serve`: a JSON API over one Ratchet instance,
 * Server-Sent Events, Prometheus metrics and an OpenAPI document. See
 * docs/http.md for the endpoints; auth.ts for who may call; errors.ts for
 * how failures are answered.
 *
 * Lifecycle: createServer() checks the configuration (a token, or a loopback
 * host) and builds the routes; listen() binds; close() ends every open
 * stream, stops accepting, and waits (bounded) for requests in flight. The
 * Ratchet instance belongs to the caller: close() does not close it.
 *
 * Invariant: no endpoint runs code from a request (task names are looked up
 * in the registry, never loaded), every body is at most `maxBodyBytes`, and
 * every list and wait is bounded.
 */
import type { AddressInfo } from "node:net";
import { type ServerType, serve } from "@hono/node-server";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { outboxStatus } from "../dispatch/outbox/status.js";
import { type Logger, silentLogger } from "../engine/options.js";
import type { Ratchet } from "../engine/ratchet.js";
import { ConfigError } from "../errors.js";
import { bearerCheck, checkAuthConfig, checkLoopbackHost } from "./auth.js";
import { defaultDashboardDir, registerDashboard } from "./dashboard.js";
import { HttpError, toErrorResponse } from "./errors.js";
import { EndingsRecorder, renderMetrics } from "./metrics.js";
import { OPENAPI } from "./openapi.js";
import { registerConversationRoutes } from "./routes/conversations.js";
import {
  type DispatchExplainConfig,
  registerDispatchRoutes,
  resolveExplainConfig,
} from "./routes/dispatch.js";
import { registerModelRoutes } from "./routes/models.js";
import { registerOperationRoutes } from "./routes/operations.js";
import { registerStreamRoutes } from "./routes/streams.js";
import { registerTaskRoutes } from "./routes/tasks.js";
import { registerStream } from "./stream.js";

export const DEFAULT_PORT = 4680;
export const DEFAULT_HOST = "127.0.0.1";
const MiB = 1024 * 1024;

export interface ServerOptions {
  /** Default 4680; 0 picks a free port (tests). */
  port?: number;
  /** Default 127.0.0.1. Anything but loopback needs a token. */
  host?: string;
  /** Bearer token for /api/* and /metrics; at least 16 characters. `ratchet serve` reads RATCHET_TOKEN. */
  token?: string;
  /** Largest request body; default 1 MiB. Larger: 413. */
  maxBodyBytes?: number;
  /** Interval of /api/stream reads; default 1000 ms, in [50, 60000]. */
  streamIntervalMs?: number;
  /** Open /api/stream connections at once; default 32. */
  maxStreams?: number;
  /**
   * The built dashboard served at `/` and `/assets/*` (no token needed for these files): a folder
   * holding index.html and assets/. Default: dist/dashboard of this package; false serves none.
   */
  dashboard?: string | false;
  /**
   * What `GET /api/dispatch/attempts/{id}/why` explains attempts with (spec §20.28): the runner's
   * pipelines (each checked here, spec §20.10) and timeouts (spec §20.8). Default none: the default
   * timeouts and step timeout. `ratchet serve` passes its dispatch configuration file's.
   */
  dispatch?: DispatchExplainConfig;
  logger?: Logger;
}

export interface RatchetServer {
  /** The routes, callable without a socket: `app.request("/api/stats")`. */
  readonly app: Hono;
  /** Binds; resolves with the address actually bound. */
  listen(): Promise<{ host: string; port: number; url: string }>;
  /** Ends streams, stops listening, waits up to `timeoutMs` (default 5 s) for requests in flight. */
  close(opts?: { timeoutMs?: number }): Promise<void>;
}

/** The request target as sent on the wire (@hono/node-server's env); undefined without a socket. */
function requestTarget(env: unknown): string | undefined {
  const url = (env as { incoming?: { url?: unknown } } | undefined)?.incoming?.url;
  return typeof url === "string" ? url : undefined;
}

function checkRange(v: number, what: string, min: number, max: number): number {
  if (!Number.isInteger(v) || v < min || v > max)
    throw new ConfigError(`${what} must be an integer in [${min}, ${max}] (got ${v})`);
  return v;
}

export function createServer(ratchet: Ratchet, opts: ServerOptions = {}): RatchetServer {
  const host = opts.host ?? DEFAULT_HOST;
  const port = checkRange(opts.port ?? DEFAULT_PORT, "port", 0, 65_535);
  const token = opts.token === "" ? undefined : opts.token;
  const maxBodyBytes = checkRange(opts.maxBodyBytes ?? MiB, "maxBodyBytes", 1024, 64 * MiB);
  const intervalMs = checkRange(opts.streamIntervalMs ?? 1_000, "streamIntervalMs", 50, 60_000);
  const maxStreams = checkRange(opts.maxStreams ?? 32, "maxStreams", 1, 10_000);
  const logger = opts.logger ?? silentLogger;
  checkAuthConfig(host, token);
  const dispatch = resolveExplainConfig(opts.dispatch);
  const log = (msg: string, err: unknown) => logger.error(msg, err);
  const authorize = token === undefined ? undefined : bearerCheck(token);

  const app = new Hono();
  app.onError((err, c) => {
    const { status, body } = toErrorResponse(err, log);
    return c.json(body, status as 400);
  });
  app.notFound((c) =>
    c.json({ error: { code: "RATCHET_NOT_FOUND", message: `no route ${c.req.method} ${c.req.path}` } }, 404),
  );

  // Order matters: refuse the caller (host, token) before reading anything they sent.
  app.use("*", async (c, next) => {
    if (!authorize) checkLoopbackHost(c.req.header("host"), requestTarget(c.env));
    const guarded = c.req.path.startsWith("/api/") || c.req.path === "/metrics";
    if (authorize && guarded) authorize(c.req.header("authorization"));
    c.header("Cache-Control", "no-store");
    c.header("X-Content-Type-Options", "nosniff");
    await next();
  });
  app.use(
    "*",
    bodyLimit({
      maxSize: maxBodyBytes,
      onError: () => {
        throw new HttpError(
          413,
          "RATCHET_PAYLOAD_TOO_LARGE",
          `request body is larger than ${maxBodyBytes} bytes`,
        );
      },
    }),
  );

  registerTaskRoutes(app, ratchet);
  registerOperationRoutes(app, ratchet);
  registerDispatchRoutes(app, ratchet, dispatch);
  registerModelRoutes(app, ratchet);
  const streams = new Set<() => void>();
  registerStream(app, ratchet, { intervalMs, maxStreams, maxWatch: 100, log }, streams);
  registerStreamRoutes(app, ratchet, { maxStreams, log }, streams);
  registerConversationRoutes(app, ratchet, { maxStreams, log }, streams);
  const recorder = new EndingsRecorder();
  app.get("/metrics", async (c) => {
    const text = await renderMetrics(ratchet, recorder);
    return c.text(text, 200, { "Content-Type": "text/plain; version=0.0.4; charset=utf-8" });
  });
  // spec §21.12: each outbox destination's status and lag (the store keeps no secret to leak).
  app.get("/api/outbox", async (c) => c.json(await outboxStatus(ratchet.store.outbox)));
  app.get("/openapi.json", (c) => c.json(OPENAPI));
  if (opts.dashboard !== false) registerDashboard(app, opts.dashboard ?? defaultDashboardDir());

  let server: ServerType | undefined;
  return {
    app,
    async listen() {
      if (server) throw new ConfigError("this server is already listening");
      const s = serve({ fetch: app.fetch, port, hostname: host });
      server = s;
      await new Promise<void>((resolve, reject) => {
        s.once("listening", resolve);
        s.once("error", (err) =>
          reject(new ConfigError(`cannot listen on ${host}:${port}: ${(err as Error).message}`)),
        );
      });
      const addr = s.address() as AddressInfo;
      const shown = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
      if (token === undefined)
        logger.warn(
          `no RATCHET_TOKEN: serving unauthenticated, on loopback only (http://${shown}:${addr.port})`,
        );
      return { host: addr.address, port: addr.port, url: `http://${shown}:${addr.port}` };
    },
    async close({ timeoutMs = 5_000 } = {}) {
      for (const end of [...streams]) end();
      const s = server;
      server = undefined;
      if (!s) return;
      let done = false;
      const closed = new Promise<void>((resolve) =>
        s.close(() => {
          done = true;
          resolve();
        }),
      );
      // Streams end at their next wake-up, and a keep-alive socket only closes once idle: sweep until closed.
      const deadline = performance.now() + timeoutMs;
      while (!done && performance.now() < deadline) {
        if ("closeIdleConnections" in s) s.closeIdleConnections();
        await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 20))]);
      }
      if (!done && "closeAllConnections" in s) s.closeAllConnections();
      await closed;
    },
  };
}
