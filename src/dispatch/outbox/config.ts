/**
 * The `"outbox"` section of the dispatch config file (spec §21.5):
 *
 * ```json
 * "outbox": {
 *   "destinations": [
 *     { "name": "hooks", "types": ["*"],
 *       "sink": { "type": "webhook", "url": "https://example.test/hook", "secretsEnv": ["HOOK_SECRET", "HOOK_SECRET_OLD"] } },
 *     { "name": "log", "types": ["attempt.*", "item.*"], "sink": { "type": "file", "path": "facts.jsonl" } },
 *     { "name": "people", "types": ["notice.*"],
 *       "sink": { "type": "notifier", "url": "https://example.test/notices", "secretsEnv": ["NOTICE_SECRET"] } }
 *   ],
 *   "retentionHours": 168, "leaseMs": 60000
 * }
 * ```
 *
 * Secrets are never written in the file: a webhook names the environment
 * variables that hold them (`secretsEnv`, several during a rotation).
 */
import { resolve } from "node:path";
import { ConfigError } from "../../errors.js";
import { noticeSink, WebhookNotifier } from "./notices.js";
import type { Destination, SenderOptions } from "./sender.js";
import { FileSink, StdoutSink, WebhookSink } from "./sinks.js";
import type { Sink } from "./types.js";

export interface SinkConfig {
  type: "webhook" | "notifier" | "file" | "stdout";
  url?: string;
  secretsEnv?: string[];
  path?: string;
}

export interface OutboxConfig {
  destinations: Array<Omit<Destination, "sink"> & { sink: SinkConfig }>;
  retentionHours?: number;
  leaseMs?: number;
  pollMs?: number;
}

function secretsOf(what: string, names: unknown, env: NodeJS.ProcessEnv): string[] {
  if (!Array.isArray(names) || names.length === 0 || !names.every((n) => typeof n === "string"))
    throw new ConfigError(`${what}: "secretsEnv" must list the environment variables holding its secrets`);
  return names.map((n) => {
    const v = env[n];
    if (!v) throw new ConfigError(`${what}: the environment variable ${n} is not set`);
    return v;
  });
}

function sinkOf(what: string, s: SinkConfig, dir: string, env: NodeJS.ProcessEnv): Sink {
  switch (s?.type) {
    case "webhook":
      return new WebhookSink({ url: String(s.url), secrets: secretsOf(what, s.secretsEnv, env) });
    case "notifier":
      return noticeSink(
        new WebhookNotifier({ url: String(s.url), secrets: secretsOf(what, s.secretsEnv, env) }),
      );
    case "file":
      if (typeof s.path !== "string" || s.path === "")
        throw new ConfigError(`${what}: a file sink needs "path"`);
      return new FileSink({ path: resolve(dir, s.path) });
    case "stdout":
      return new StdoutSink();
    default:
      throw new ConfigError(`${what}: "sink.type" must be webhook, notifier, file or stdout`);
  }
}

/** The sender options of a config's outbox section (null without one); `dir` resolves file paths. */
export function outboxOptionsOf(
  c: { outbox?: OutboxConfig },
  dir: string,
  env: NodeJS.ProcessEnv = process.env,
): Omit<SenderOptions, "store"> | null {
  const o = c.outbox;
  if (o === undefined) return null;
  if (typeof o !== "object" || o === null || !Array.isArray(o.destinations))
    throw new ConfigError('"outbox" must be an object with a "destinations" list');
  if (o.retentionHours !== undefined && !(o.retentionHours >= 0 && o.retentionHours <= 24 * 365))
    throw new ConfigError('"outbox.retentionHours" must be 0–8760');
  const destinations = o.destinations.map((d, i) => {
    const what = `outbox destination ${typeof d?.name === "string" ? d.name : i + 1}`;
    return { ...d, sink: sinkOf(what, d.sink, dir, env) };
  });
  return {
    destinations,
    leaseMs: o.leaseMs,
    pollMs: o.pollMs,
    retentionMs: o.retentionHours === undefined ? undefined : Math.round(o.retentionHours * 3_600_000),
  };
}
