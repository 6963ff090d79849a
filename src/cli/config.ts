/**
 * Where the CLI's store and task definitions come from.
 *
 * Precedence, highest first: command-line flags, the RATCHET_STORE
 * environment variable (store only), `ratchet.config.js` / `.mjs` in the
 * working directory, then the default `sqlite:./ratchet.db`.
 */
import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { defineTask, type TaskDefinition } from "../engine/definition.js";
import { ConfigError, RatchetError } from "../errors.js";

export const DEFAULT_STORE = "sqlite:./ratchet.db";
const CONFIG_FILES = ["ratchet.config.js", "ratchet.config.mjs"];

export interface GlobalFlags {
  store?: string;
  tasks?: string;
  json?: boolean;
}

export interface FileConfig {
  store?: string;
  /** A module path (relative to the config file) or definitions. */
  tasks?: string | readonly unknown[];
  /** The config file's directory, for resolving a relative `tasks` path. */
  dir: string;
}

/** Reads ratchet.config.js or .mjs from `cwd`; undefined when there is none. */
export async function readConfigFile(cwd = process.cwd()): Promise<FileConfig | undefined> {
  for (const name of CONFIG_FILES) {
    const path = resolve(cwd, name);
    if (!existsSync(path)) continue;
    const mod = await importModule(path, "config file");
    const raw = (mod.default ?? mod) as Record<string, unknown>;
    if (raw === null || typeof raw !== "object") throw new ConfigError(`${name} must export an object`);
    const { store, tasks } = raw;
    if (store !== undefined && typeof store !== "string")
      throw new ConfigError(`${name}: store must be a string such as sqlite:./ratchet.db`);
    if (tasks !== undefined && typeof tasks !== "string" && !Array.isArray(tasks))
      throw new ConfigError(`${name}: tasks must be a module path or an array of task definitions`);
    return { store, tasks, dir: dirname(path) };
  }
  return undefined;
}

export function resolveStore(flags: GlobalFlags, file: FileConfig | undefined): string {
  return flags.store ?? process.env.RATCHET_STORE ?? file?.store ?? DEFAULT_STORE;
}

/** The definitions named by --tasks, else by the config file; [] when neither names any. */
export async function loadDefinitions(
  flags: GlobalFlags,
  file: FileConfig | undefined,
): Promise<TaskDefinition[]> {
  if (flags.tasks !== undefined)
    return definitionsOf(await importModule(resolve(flags.tasks), "tasks module"));
  if (file?.tasks === undefined) return [];
  if (typeof file.tasks === "string") {
    return definitionsOf(await importModule(resolve(file.dir, file.tasks), "tasks module"));
  }
  return collect(file.tasks, "ratchet.config tasks");
}

async function importModule(path: string, what: string): Promise<Record<string, unknown>> {
  if (!existsSync(path)) throw new ConfigError(`${what} ${path} does not exist`);
  try {
    return (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (e) {
    if (e instanceof RatchetError) throw e;
    throw new ConfigError(`cannot load ${what} ${path}: ${(e as Error)?.message ?? String(e)}`);
  }
}

/** Something shaped like a definition: a `name` string and a `run` function. */
function looksLikeDefinition(v: unknown): v is { name: string; run: unknown } {
  return (
    v !== null &&
    typeof v === "object" &&
    typeof (v as { name?: unknown }).name === "string" &&
    typeof (v as { run?: unknown }).run === "function"
  );
}

/**
 * A module's definitions: a default export that is an array (or a single
 * definition), plus every named export that looks like a definition.
 */
export function definitionsOf(mod: Record<string, unknown>): TaskDefinition[] {
  const found: unknown[] = [];
  const def = mod.default;
  if (Array.isArray(def)) found.push(...def);
  else if (looksLikeDefinition(def)) found.push(def);
  for (const [key, value] of Object.entries(mod)) {
    if (key !== "default" && looksLikeDefinition(value)) found.push(value);
  }
  return collect(found, "tasks module");
}

function collect(items: readonly unknown[], what: string): TaskDefinition[] {
  const byName = new Map<string, TaskDefinition>();
  for (const item of items) {
    if (!looksLikeDefinition(item)) {
      throw new ConfigError(`${what}: every task must be a definition made by defineTask (name and run)`);
    }
    // defineTask is idempotent on its own output and fills defaults for plain specs.
    const d = defineTask(item as Parameters<typeof defineTask>[0]);
    const seen = byName.get(d.name);
    if (seen && seen.run !== d.run) throw new ConfigError(`${what}: two definitions are named "${d.name}"`);
    byName.set(d.name, d);
  }
  return [...byName.values()];
}
