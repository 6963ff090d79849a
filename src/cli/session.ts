/**
 * Opens the engine for one command and closes it afterwards, whatever
 * happens. Commands that only read or steer open without definitions; the
 * ones that run or validate tasks load them first.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { Command } from "commander";
import { Conversations } from "../agent/conversations.js";
import { runsAmong } from "../agent/run.js";
import { type Logger, silentLogger } from "../engine/options.js";
import { Ratchet } from "../engine/ratchet.js";
import { ConfigError } from "../errors.js";
import { type GlobalFlags, loadDefinitions, readConfigFile, resolveStore } from "./config.js";

export interface SessionOptions {
  /** Load definitions from --tasks or the config file. */
  definitions?: boolean;
  /** Fail if loading found none (worker, tick). */
  requireDefinitions?: boolean;
  /** Refuse to create a missing SQLite file (read and steer commands). */
  mustExist?: boolean;
  logger?: Logger;
}

export interface Session {
  ratchet: Ratchet;
  store: string;
  json: boolean;
}

export function globalFlags(cmd: Command): GlobalFlags {
  return cmd.optsWithGlobals() as GlobalFlags;
}

/** The SQLite file a store URL names, or undefined for :memory: and other stores. */
export function sqliteFile(store: string): string | undefined {
  if (!store.startsWith("sqlite:")) return undefined;
  const path = store.slice("sqlite:".length);
  return path === ":memory:" || path.length === 0 ? undefined : resolve(path);
}

export async function withSession<T>(
  cmd: Command,
  opts: SessionOptions,
  fn: (s: Session) => Promise<T>,
): Promise<T> {
  const flags = globalFlags(cmd);
  const file = await readConfigFile();
  const store = resolveStore(flags, file);
  const path = sqliteFile(store);
  if (opts.mustExist && path !== undefined && !existsSync(path)) {
    throw new ConfigError(`there is no database at ${path}; give --store URL or set RATCHET_STORE`);
  }
  const tasks = opts.definitions ? await loadDefinitions(flags, file) : [];
  if (opts.requireDefinitions && tasks.length === 0) {
    throw new ConfigError(
      "no task definitions loaded: give --tasks MODULE (a module exporting defineTask results) or a ratchet.config.js with tasks",
    );
  }
  const ratchet = await Ratchet.open({ store, tasks, logger: opts.logger ?? silentLogger });
  // A conversation's run (spec §17) reaches its conversation through the Conversations of its process.
  for (const run of runsAmong(tasks)) new Conversations(ratchet, { run });
  try {
    return await fn({ ratchet, store, json: flags.json === true });
  } finally {
    await ratchet.close();
  }
}

/** Resolves with the first SIGINT or SIGTERM. */
export function nextSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (sig: NodeJS.Signals) => {
      process.off("SIGINT", on);
      process.off("SIGTERM", on);
      resolve(sig);
    };
    process.on("SIGINT", on);
    process.on("SIGTERM", on);
  });
}
