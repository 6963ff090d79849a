/**
 * Extensions (spec §19.23–§19.24): named bundles of tools, system-prompt sections, hooks and task
 * definitions, installed, replaced and removed by name while the process runs.
 *
 * The registry (`createExtensions`) belongs to the process and to the agent it is given to; it is
 * never stored. What is stored is a conversation's *selection*, by name, in its agent configuration
 * (spec §19.22): absent, a conversation uses every installed extension in install order. A stored
 * name that is not installed is skipped, and takes effect again when it is installed again.
 *
 * Each phase takes one snapshot: a turn resolves its extensions once, at its start, for its prompt,
 * its offered tools and its hooks; a tool call resolves its implementation once, when its task
 * starts. A replacement therefore reaches the next turn (or call) and never one that already began.
 * An extension's tasks are registered with every Ratchet the registry is attached to; a replaced
 * definition hands over as the engine's rules say (spec §12.8, §12.9), a removed one's pending tasks
 * wait, unclaimed, until a definition of their name is registered again.
 *
 * Invariant: a snapshot never changes; install, replace and remove publish a new one (spec §19.24).
 */
import type { TaskDefinition } from "../engine/definition.js";
import type { Ratchet } from "../engine/ratchet.js";
import { ConfigError } from "../errors.js";
import type { AgentConfig } from "./config.js";
import type { AgentHooks } from "./hooks.js";
import { defineToolCalls, type ToolCalls } from "./tools/calls.js";
import type { ToolDefinition } from "./tools/define.js";

/** What a section's render reads (spec §19.25). */
export interface SectionInput {
  conversationId: string;
  /** The conversation's working directory (its configuration's, else the agent's). */
  cwd: string;
  /** The conversation's stored agent configuration. */
  config: AgentConfig;
}

/** A named part of the system prompt (spec §19.25). */
export interface PromptSection {
  readonly key: string;
  /** The section's text for this request; undefined leaves it out. Deterministic for equal inputs. */
  render(input: SectionInput): string | undefined | Promise<string | undefined>;
  /** Default true: the text is sent as `<key>\n…\n</key>`. */
  readonly tag?: boolean;
}

export interface ExtensionSpec {
  name: string;
  tools?: readonly ToolDefinition<unknown>[];
  sections?: readonly PromptSection[];
  hooks?: AgentHooks;
  /** Task definitions the extension's tools or hooks start; registered with the engine on install. */
  tasks?: readonly TaskDefinition[];
}

export interface Extension extends Readonly<ExtensionSpec> {
  readonly kind: "ratchet.extension";
}

const NAME = /^[a-z][a-z0-9_.-]{0,63}$/;
export const SECTION_KEY = /^[a-z][a-z0-9_-]{0,63}$/;
/** Keys the agent itself renders (spec §19.25). */
export const RESERVED_SECTIONS = ["instructions", "environment"] as const;

/** spec §19.25: a section; `tag: false` sends its text as it is. */
export function section(
  key: string,
  render: PromptSection["render"],
  opts: { tag?: boolean } = {},
): PromptSection {
  if (typeof key !== "string" || !SECTION_KEY.test(key))
    throw new ConfigError(`a section key must match ${SECTION_KEY} (got ${JSON.stringify(key)})`);
  if (typeof render !== "function") throw new ConfigError(`section "${key}": render must be a function`);
  return Object.freeze({ key, render, ...(opts.tag === false ? { tag: false } : {}) });
}

/** spec §19.23: checks the bundle at once (RATCHET_CONFIG) and freezes it. */
export function defineExtension(spec: ExtensionSpec): Extension {
  if (spec === null || typeof spec !== "object") throw new ConfigError("defineExtension needs a spec object");
  if (typeof spec.name !== "string" || !NAME.test(spec.name))
    throw new ConfigError(`an extension name must match ${NAME} (got ${JSON.stringify(spec.name)})`);
  const where = `extension "${spec.name}"`;
  const unique = (names: string[], what: string) => {
    const seen = new Set<string>();
    for (const n of names) {
      if (seen.has(n)) throw new ConfigError(`${where}: two ${what} are named "${n}"`);
      seen.add(n);
    }
  };
  for (const t of spec.tools ?? [])
    if (t?.kind !== "ratchet.tool") throw new ConfigError(`${where}: tools must be defineTool results`);
  unique(
    (spec.tools ?? []).map((t) => t.name),
    "tools",
  );
  for (const s of spec.sections ?? []) {
    if (typeof s?.key !== "string" || !SECTION_KEY.test(s.key) || typeof s.render !== "function")
      throw new ConfigError(`${where}: sections must be section() results`);
    if ((RESERVED_SECTIONS as readonly string[]).includes(s.key))
      throw new ConfigError(`${where}: the section key "${s.key}" is the agent's own`);
  }
  unique(
    (spec.sections ?? []).map((s) => s.key),
    "sections",
  );
  for (const t of spec.tasks ?? [])
    if (typeof t?.run !== "function" || typeof t.name !== "string")
      throw new ConfigError(`${where}: tasks must be defineTask results`);
  unique(
    (spec.tasks ?? []).map((t) => t.name),
    "tasks",
  );
  if (spec.hooks !== undefined && (spec.hooks === null || typeof spec.hooks !== "object"))
    throw new ConfigError(`${where}: hooks must be an object`);
  return Object.freeze({
    name: spec.name,
    tools: Object.freeze([...(spec.tools ?? [])]),
    sections: Object.freeze([...(spec.sections ?? [])]),
    hooks: spec.hooks ?? {},
    tasks: Object.freeze([...(spec.tasks ?? [])]),
    kind: "ratchet.extension" as const,
  });
}

/** A tool as a turn resolved it: the implementation and the extension it came from (none: the agent's). */
export interface ResolvedTool {
  tool: ToolDefinition<unknown>;
  extension?: string;
}

/** A conversation's extensions, resolved from one snapshot (spec §19.24). */
export interface ResolvedExtensions {
  extensions: readonly Extension[];
  /** Tools by name: the agent's own, then each extension's in order, a later one replacing in place. */
  tools: Map<string, ResolvedTool>;
  sections: PromptSection[];
  hooks: AgentHooks[];
}

/** spec §19.24: the selection (names, in order; absent: every installed one) against a snapshot. */
export function resolveExtensions(
  snapshot: readonly Extension[],
  selected: readonly string[] | undefined,
  own: Iterable<ToolDefinition<unknown>> = [],
): ResolvedExtensions {
  const byName = new Map(snapshot.map((e) => [e.name, e]));
  const names = selected === undefined ? snapshot.map((e) => e.name) : [...new Set(selected)];
  const extensions = names.map((n) => byName.get(n)).filter((e): e is Extension => e !== undefined);
  const tools = new Map<string, ResolvedTool>();
  for (const t of own) tools.set(t.name, { tool: t });
  const sections = new Map<string, PromptSection>();
  for (const e of extensions) {
    for (const t of e.tools ?? []) tools.set(t.name, { tool: t, extension: e.name });
    for (const s of e.sections ?? []) sections.set(s.key, s);
  }
  return { extensions, tools, sections: [...sections.values()], hooks: extensions.map((e) => e.hooks ?? {}) };
}

/**
 * The extensions installed in this process (spec §19.24). `calls` runs the calls of extension tools
 * (and of the agent's own tools, when the agent's ToolCalls was made with `extensions`).
 */
export class Extensions {
  #installed: readonly Extension[] = Object.freeze([]);
  readonly #ratchets = new Set<Ratchet>();
  readonly calls: ToolCalls;

  constructor(initial: readonly Extension[] = [], opts: { callsName?: string } = {}) {
    this.calls = defineToolCalls({
      tools: [],
      extensions: this,
      name: opts.callsName ?? "ratchet.extension-tool-call",
    });
    for (const e of initial) this.install(e);
  }

  /** The installed extensions, in install order: one immutable snapshot. */
  snapshot(): readonly Extension[] {
    return this.#installed;
  }

  get(name: string): Extension | undefined {
    return this.#installed.find((e) => e.name === name);
  }

  /**
   * Installs `ext`, or replaces the installed extension of its name in place (its position kept).
   * A task name another installed extension defines is refused (RATCHET_CONFIG), nothing changed.
   */
  install(ext: Extension): { replaced: boolean } {
    if (ext?.kind !== "ratchet.extension") throw new ConfigError("install needs a defineExtension result");
    const i = this.#installed.findIndex((e) => e.name === ext.name);
    const others = this.#installed.filter((e) => e.name !== ext.name);
    for (const t of ext.tasks ?? [])
      for (const o of others)
        if ((o.tasks ?? []).some((x) => x.name === t.name))
          throw new ConfigError(
            `extension "${ext.name}": task "${t.name}" is already extension "${o.name}"'s`,
          );
    const old = i >= 0 ? this.#installed[i] : undefined;
    const next = [...this.#installed];
    if (i >= 0) next[i] = ext;
    else next.push(ext);
    this.#installed = Object.freeze(next);
    for (const r of this.#ratchets) {
      // spec §19.24: the engine hands a replaced definition over (§12.8, §12.9).
      for (const t of ext.tasks ?? []) r.register(t);
      for (const t of old?.tasks ?? [])
        if (!(ext.tasks ?? []).some((x) => x.name === t.name)) r.unregister(t.name);
    }
    return { replaced: i >= 0 };
  }

  /** Removes the extension of this name; its tools leave the next turn, its tasks are unregistered. */
  remove(name: string): boolean {
    const old = this.get(name);
    if (!old) return false;
    this.#installed = Object.freeze(this.#installed.filter((e) => e !== old));
    for (const r of this.#ratchets) for (const t of old.tasks ?? []) r.unregister(t.name);
    return true;
  }

  /** Registers the call task and every installed extension's tasks with `ratchet`, and later ones too. */
  attach(ratchet: Ratchet): void {
    if (this.#ratchets.has(ratchet)) return;
    this.#ratchets.add(ratchet);
    if (!ratchet.definitions().includes(this.calls.task)) ratchet.register(this.calls.task);
    for (const e of this.#installed) for (const t of e.tasks ?? []) ratchet.register(t);
  }

  /** Stops registering with `ratchet` (e.g. after it closed). */
  detach(ratchet: Ratchet): void {
    this.#ratchets.delete(ratchet);
  }
}

export function createExtensions(
  initial: readonly Extension[] = [],
  opts: { callsName?: string } = {},
): Extensions {
  return new Extensions(initial, opts);
}
