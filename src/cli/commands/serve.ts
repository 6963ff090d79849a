/** `ratchet serve`: the HTTP API (docs/http.md) until SIGINT or SIGTERM. */
import { existsSync } from "node:fs";
import type { Command } from "commander";
import { DEFAULT_DISPATCH_CONFIG, readDispatchConfig } from "../../dispatch/config.js";
import { consoleLogger } from "../../engine/options.js";
import { createServer, DEFAULT_HOST, DEFAULT_PORT } from "../../server/server.js";
import { option, parseInteger } from "../args.js";
import { print, printJson } from "../format.js";
import { nextSignal, withSession } from "../session.js";

export function registerServe(program: Command): void {
  program
    .command("serve")
    .description(
      "serve the HTTP API (docs/http.md) until SIGINT or SIGTERM; set RATCHET_TOKEN to require a bearer token (needed to listen beyond loopback)",
    )
    .option(
      "--port <n>",
      `port (default ${DEFAULT_PORT}; 0 picks a free one)`,
      option((t) => parseInteger(t, "--port", 0, 65_535)),
    )
    .option("--host <host>", `address to listen on (default ${DEFAULT_HOST})`)
    .option(
      "--config <file>",
      `dispatch configuration whose pipelines and timeouts explain attempts (default ${DEFAULT_DISPATCH_CONFIG} if present; spec §20.28)`,
    )
    .action(async (o: { port?: number; host?: string; config?: string }, cmd: Command) => {
      const path = o.config ?? DEFAULT_DISPATCH_CONFIG;
      const c = o.config !== undefined || existsSync(path) ? readDispatchConfig(path) : null;
      // Definitions are optional: with --tasks the API can enqueue those tasks by name.
      await withSession(cmd, { mustExist: true, definitions: true, logger: consoleLogger }, async (s) => {
        const server = createServer(s.ratchet, {
          port: o.port ?? DEFAULT_PORT,
          host: o.host ?? DEFAULT_HOST,
          token: process.env.RATCHET_TOKEN,
          logger: consoleLogger,
          dispatch: c ? { pipelines: c.pipelines, timeouts: c.timeouts } : undefined,
        });
        const addr = await server.listen();
        if (s.json) printJson({ event: "listening", url: addr.url, store: s.store });
        else print(`serving ${s.store} on ${addr.url} (Ctrl-C to stop)`);
        const sig = await nextSignal();
        await server.close();
        if (s.json) printJson({ event: "stopped", signal: sig });
        else print(`${sig}: stopped`);
      });
    });
}
