/**
 * Shared pieces of the HTTP API tests: task definitions, a server on an
 * ephemeral port (closed after the test), and a fetch wrapper. Stores come
 * from test/engine/helpers.ts, so `forEachBackend` runs a file on SQLite and
 * PostgreSQL.
 */
import { z } from "zod";
import { defineTask } from "../../src/engine/definition.js";
import type { Ratchet } from "../../src/engine/ratchet.js";
import { createServer, type RatchetServer, type ServerOptions } from "../../src/server/server.js";
import { onCleanup } from "../engine/helpers.js";

export const TOKEN = "test-token-0123456789abcdef";

export const greet = defineTask({
  name: "greet",
  schema: z.object({ name: z.string().min(1) }),
  run: (_ctx, input: { name: string }) => ({ hi: input.name }),
});

export const boom = defineTask({
  name: "boom",
  retry: { maxAttempts: 1 },
  run: () => {
    throw new Error("kaboom: the widget broke");
  },
});

/** Reports progress, then waits for a signal before it completes. */
export const slow = defineTask({
  name: "slow",
  async run(ctx, input: { gate: string }) {
    await ctx.progress(0.5, "half");
    const e = await ctx.waitForEvent(input.gate, { timeoutMs: 60_000 });
    return { signalled: e.kind === "signal" };
  },
});

export const TASKS = [greet, boom, slow];

export interface Running {
  server: RatchetServer;
  url: string;
  /** fetch relative to the server, with the token (unless `token: null`) and JSON content type for bodies. */
  call(path: string, init?: RequestInit & { token?: string | null; json?: unknown }): Promise<Response>;
}

export async function startServer(ratchet: Ratchet, opts: ServerOptions = {}): Promise<Running> {
  const server = createServer(ratchet, { port: 0, ...opts });
  const { url } = await server.listen();
  onCleanup(() => server.close({ timeoutMs: 1_000 }));
  const token = opts.token;
  return {
    server,
    url,
    call(path, init = {}) {
      const { token: t = token, json, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (t) headers.set("authorization", `Bearer ${t}`);
      if (json !== undefined) headers.set("content-type", "application/json");
      return fetch(url + path, {
        ...rest,
        headers,
        ...(json !== undefined ? { body: JSON.stringify(json), method: rest.method ?? "POST" } : {}),
      });
    },
  };
}

/** The error body of a failed response, with its status. */
export async function errorOf(res: Response): Promise<{ status: number; code: string; message: string }> {
  const body = (await res.json()) as { error: { code: string; message: string } };
  return { status: res.status, code: body.error.code, message: body.error.message };
}
