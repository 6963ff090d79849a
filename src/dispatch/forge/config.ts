/**
 * The forge part of a dispatch configuration file (spec §22.5, §22.10):
 *
 * ```json
 * "forge": { "type": "github", "host": "github.com", "tokenEnv": "GITHUB_TOKEN", "intervalMs": 60000 }
 * ```
 * (`outputScanMs`, the first forge's, is how often the runner scans a running
 * session's output for pull-request URLs, spec §22.11.)
 * or a list of them (one per host, e.g. github.com and a GitHub Enterprise
 * host with its `apiUrl`). The token is never in the file: `tokenEnv` names
 * the environment variable that holds it (default `GITHUB_TOKEN`), read when
 * the forges are built. A forge that is configured but has no token in the
 * environment works unauthenticated (public repositories, a low rate limit).
 */
import type { WatchPolicy } from "../../core/dispatch/pulls.js";
import { ConfigError } from "../../errors.js";
import type { Forge } from "./forge.js";
import { GitHubForge } from "./github.js";

export interface ForgeConfig {
  type: "github";
  /** The host pull-request URLs name (default `github.com`). */
  host?: string;
  /** The REST API's base URL (default `https://api.github.com`, or `https://HOST/api/v3`). */
  apiUrl?: string;
  /** The environment variable holding the token (default `GITHUB_TOKEN`). */
  tokenEnv?: string;
  intervalMs?: number;
  maxBackoffMs?: number;
  concurrency?: number;
  /** How often a running session's output is scanned for pull-request URLs (spec §22.11, default 30 s). */
  outputScanMs?: number;
}

const HOST_RE = /^[a-z0-9.-]{1,253}(:[0-9]{1,5})?$/;
const ENV_RE = /^[A-Za-z_][A-Za-z0-9_]{0,99}$/;

/** The configured forges as a list, checked (`RATCHET_CONFIG` on a bad entry). */
export function forgeConfigsOf(where: string, v: unknown): ForgeConfig[] {
  if (v === undefined) return [];
  const list = Array.isArray(v) ? v : [v];
  if (list.length > 10) throw new ConfigError(`${where}: at most 10 forges`);
  const hosts = new Set<string>();
  return list.map((f: ForgeConfig) => {
    if (typeof f !== "object" || f === null || f.type !== "github")
      throw new ConfigError(`${where}: each forge needs "type": "github"`);
    const host = (f.host ?? "github.com").toLowerCase();
    if (!HOST_RE.test(host)) throw new ConfigError(`${where}: forge host "${host}" is not a host name`);
    if (hosts.has(host)) throw new ConfigError(`${where}: two forges for host "${host}"`);
    hosts.add(host);
    if (f.apiUrl !== undefined && (typeof f.apiUrl !== "string" || !/^https?:\/\//.test(f.apiUrl)))
      throw new ConfigError(`${where}: forge apiUrl must be an http(s) URL`);
    if (f.tokenEnv !== undefined && (typeof f.tokenEnv !== "string" || !ENV_RE.test(f.tokenEnv)))
      throw new ConfigError(`${where}: forge tokenEnv must name an environment variable`);
    return { ...f, host };
  });
}

export interface BuiltForges {
  readonly forges: Forge[];
  readonly hosts: string[];
  readonly policy: Partial<WatchPolicy>;
  readonly concurrency: number | undefined;
  readonly outputScanMs: number | undefined;
}

/** Builds the forges, their tokens read from the environment (spec §22.10). */
export function buildForges(
  configs: readonly ForgeConfig[],
  env: NodeJS.ProcessEnv = process.env,
): BuiltForges {
  const forges = configs.map(
    (f) =>
      new GitHubForge({
        host: f.host,
        apiUrl: f.apiUrl,
        token: env[f.tokenEnv ?? "GITHUB_TOKEN"] || undefined,
      }),
  );
  const first = configs[0];
  return {
    forges,
    hosts: forges.map((f) => f.host),
    policy: {
      ...(first?.intervalMs !== undefined ? { intervalMs: first.intervalMs } : {}),
      ...(first?.maxBackoffMs !== undefined ? { maxBackoffMs: first.maxBackoffMs } : {}),
    },
    concurrency: first?.concurrency,
    outputScanMs: first?.outputScanMs,
  };
}
