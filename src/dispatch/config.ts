/**
 * A dispatch configuration file (spec §20.25): JSON with the pipelines, the
 * worker adapters to build, seats, timeouts and the runner's lease and
 * interval. Read by `ratchet dispatch run` and `ratchet item add`; the
 * default file is `ratchet.dispatch.json` in the working directory.
 *
 * ```json
 * { "pipelines": [{ "name": "fix", "steps": [{ "name": "build", "worker": "tmux",
 *     "spawn": { "command": ["claude", "{{input.title}}"] } }] }],
 *   "workers": [{ "kind": "tmux", "type": "tmux", "root": ".ratchet/sessions" }],
 *   "seats": { "tmux": 4 }, "timeouts": { "stallMinutes": 45 } }
 * ```
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { PipelineSpec } from "../core/dispatch/pipeline.js";
import type { DispatchTimeouts } from "../core/dispatch/timeouts.js";
import { ConfigError } from "../errors.js";
import { type ForgeConfig, forgeConfigsOf } from "./forge/config.js";
import type { OutboxConfig } from "./outbox/config.js";
import type { WorkerAdapter } from "./workers/adapter.js";
import { ProcessWorker } from "./workers/process.js";
import { TmuxWorker } from "./workers/tmux.js";

export const DEFAULT_DISPATCH_CONFIG = "ratchet.dispatch.json";
const MAX_CONFIG_BYTES = 1024 * 1024;

export interface WorkerConfig {
  kind: string;
  type: "process" | "tmux";
  /** Session directories (relative paths are from the config file's directory). */
  root: string;
  socket?: string;
  maxSessions?: number;
}

export interface DispatchConfig {
  pipelines: PipelineSpec[];
  workers: WorkerConfig[];
  seats?: Record<string, number>;
  timeouts?: Partial<DispatchTimeouts>;
  leaseMs?: number;
  intervalMs?: number;
  /** Destinations of the outbox, run by `ratchet dispatch run` and `ratchet outbox send` (spec §21.5). */
  outbox?: OutboxConfig;
  /** The forge(s) whose pull requests `ratchet dispatch run` links and watches (spec §22.4, §22.5). */
  forge?: ForgeConfig | ForgeConfig[];
}

function fail(path: string, msg: string): never {
  throw new ConfigError(`${path}: ${msg}`);
}

/** Reads and checks the file's shape; the pipelines are checked when the runner is built (spec §20.10). */
export function readDispatchConfig(path: string): DispatchConfig & { dir: string } {
  const full = resolve(path);
  let text: string;
  try {
    text = readFileSync(full, "utf8");
  } catch (e) {
    fail(full, `cannot read it (${(e as Error).message}); give --config FILE`);
  }
  if (text.length > MAX_CONFIG_BYTES) fail(full, "larger than 1 MiB");
  let c: DispatchConfig;
  try {
    c = JSON.parse(text) as DispatchConfig;
  } catch (e) {
    fail(full, `not JSON (${(e as Error).message})`);
  }
  if (typeof c !== "object" || c === null) fail(full, "must be a JSON object");
  if (!Array.isArray(c.pipelines)) fail(full, '"pipelines" must be a list');
  if (!Array.isArray(c.workers)) fail(full, '"workers" must be a list');
  for (const w of c.workers) {
    if (
      typeof w?.kind !== "string" ||
      (w.type !== "process" && w.type !== "tmux") ||
      typeof w.root !== "string"
    )
      fail(full, 'each worker needs "kind", "type" ("process" or "tmux") and "root"');
  }
  forgeConfigsOf(full, c.forge); // spec §22.5: a bad forge entry fails here, not at the first look
  return { ...c, dir: resolve(full, "..") };
}

/** Builds the configured adapters. */
export function buildWorkers(c: DispatchConfig & { dir: string }): WorkerAdapter[] {
  return c.workers.map((w) => {
    const root = resolve(c.dir, w.root);
    return w.type === "process"
      ? new ProcessWorker({ kind: w.kind, root, maxSessions: w.maxSessions })
      : new TmuxWorker({ kind: w.kind, root, socket: w.socket, maxSessions: w.maxSessions });
  });
}
