/**
 * `defineTool` (spec §19.6): a tool the model can call — its name, what it does, the schema of its
 * arguments (any Standard Schema; the JSON Schema the model sees is derived from it), whether a
 * rerun after a crash is safe, and its code.
 *
 * `runTool` is how a call runs: the arguments are validated first, and a validation failure, a
 * throw or a refusal of the environment become an error result the model reads (`isError`), never a
 * failed run. Results are bounded before the model sees them (spec §19.7).
 *
 * Invariant: a tool's code never sees arguments its schema refused (spec §19.6).
 */

import type { TaskContext } from "../../engine/context.js";
import type { StandardSchemaV1 } from "../../engine/definition.js";
import { ConfigError } from "../../errors.js";
import type { AgentConfig } from "../config.js";
import type { ExecutionEnv } from "../env/types.js";
import { type TruncateLimits, truncateText } from "./truncate.js";

/** What a tool's code gets besides its arguments. */
export interface ToolContext {
  /** The call's id, as the model gave it. */
  readonly callId: string;
  readonly env: ExecutionEnv;
  /** Fires when the call is aborted (the run was aborted, or the call's task lost its claim). */
  readonly signal: AbortSignal;
  /** Output as it is produced (the call's durable stream, spec §16); optional for the code. */
  output(text: string): void;
  /** The call's own task, when it runs as a tool call (runRound): for tools that spawn or wait. */
  readonly task?: TaskContext;
  /** The conversation the round belongs to, when the round said (spec §19.11). */
  readonly conversationId?: string;
}

/** What the model reads back. */
export interface ToolResult {
  /** Text for the model; an image as `{ type: "image", mimeType, data }` (base64). */
  content: string | { type: "image"; mimeType: string; data: string };
  isError?: boolean;
  /** For the application and the UI, not sent to the model. */
  details?: unknown;
  /**
   * `terminate`: end the run after this round, its answer the turn's text (spec §19.21). `handoff`:
   * after this round, start a fresh context whose first message is the note, under the configuration
   * fields given (spec §19.27).
   */
  control?: {
    terminate?: boolean;
    handoff?: string | { note: string; config?: AgentConfig };
  };
}

export interface ToolSpec<A> {
  name: string;
  description: string;
  schema: StandardSchemaV1<unknown, A>;
  /** The JSON Schema the model sees; derived from `schema` when it can say (zod 4 can). */
  parameters?: Record<string, unknown>;
  /**
   * "safe": a call whose task died is run again (reads, idempotent writes). "unsafe": it settles as
   * an `interrupted` error result with the output committed so far (spec §19.6).
   */
  replay: "safe" | "unsafe";
  /** Run alone, after the other calls of its round (default: in parallel with them). */
  sequential?: boolean;
  execute(ctx: ToolContext, args: A): Promise<ToolResult | string> | ToolResult | string;
  /** Limits of the result the model sees (defaults: 30,000 characters, 2,000 lines). */
  limits?: TruncateLimits;
}

export interface ToolDefinition<A = unknown> extends Readonly<ToolSpec<A>> {
  readonly parameters: Record<string, unknown>;
  readonly kind: "ratchet.tool";
}

const NAME = /^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/;

/** spec §19.6. Misconfiguration fails here, with RATCHET_CONFIG. */
export function defineTool<A>(spec: ToolSpec<A>): ToolDefinition<A> {
  if (spec === null || typeof spec !== "object") throw new ConfigError("defineTool needs a spec object");
  if (typeof spec.name !== "string" || !NAME.test(spec.name))
    throw new ConfigError(`tool name must match ${NAME} (got ${JSON.stringify(spec.name)})`);
  if (
    typeof spec.description !== "string" ||
    spec.description.length === 0 ||
    spec.description.length > 8_000
  )
    throw new ConfigError(`tool "${spec.name}": description must be a string of 1–8000 characters`);
  if (spec.replay !== "safe" && spec.replay !== "unsafe")
    throw new ConfigError(`tool "${spec.name}": replay must be "safe" or "unsafe"`);
  if (typeof spec.execute !== "function")
    throw new ConfigError(`tool "${spec.name}": execute must be a function`);
  const std = (spec.schema as { "~standard"?: StandardSchemaV1["~standard"] } | undefined)?.["~standard"];
  if (!std || typeof std.validate !== "function")
    throw new ConfigError(`tool "${spec.name}": schema must be a Standard Schema (zod, valibot, arktype, …)`);
  const parameters = spec.parameters ?? jsonSchemaOf(spec.name, std);
  return Object.freeze({ ...spec, parameters, kind: "ratchet.tool" as const });
}

/** The Standard JSON Schema of a schema that offers one (zod 4 does), as the model's parameters. */
function jsonSchemaOf(name: string, std: StandardSchemaV1["~standard"]): Record<string, unknown> {
  const js = (std as { jsonSchema?: { input?: (o: { target: string }) => unknown } }).jsonSchema;
  if (typeof js?.input !== "function")
    throw new ConfigError(
      `tool "${name}": its schema (${std.vendor}) cannot say its JSON Schema; give parameters explicitly`,
    );
  const out = js.input({ target: "draft-2020-12" }) as Record<string, unknown>;
  const { $schema: _drop, ...rest } = out;
  return rest;
}

/** A call's result as the model sees it: validated, caught, bounded (spec §19.6–§19.7). */
export async function runTool<A>(
  def: ToolDefinition<A>,
  ctx: ToolContext,
  args: unknown,
): Promise<ToolResult> {
  const checked = await def.schema["~standard"].validate(args);
  if (checked.issues) {
    const why = checked.issues
      .slice(0, 10)
      .map((i) => `${pathOf(i.path)}${i.message}`)
      .join("; ");
    return { content: `invalid arguments for ${def.name}: ${why}`, isError: true };
  }
  let out: ToolResult | string;
  try {
    out = await def.execute(ctx, checked.value as A);
  } catch (e) {
    const err = e as { message?: string; kind?: string; code?: string };
    const label = err.kind ? `${err.kind}: ` : "";
    return { content: `${def.name} failed: ${label}${err.message ?? String(e)}`, isError: true };
  }
  const result: ToolResult = typeof out === "string" ? { content: out } : out;
  if (typeof result.content === "string") {
    const t = truncateText(result.content, def.limits);
    if (t.truncated)
      return { ...result, content: t.text, details: { ...(result.details as object), truncated: t } };
  }
  return result;
}

function pathOf(path: readonly unknown[] | undefined): string {
  if (!path || path.length === 0) return "";
  const key = (p: unknown) => (p !== null && typeof p === "object" && "key" in p ? String(p.key) : String(p));
  return `${path.map(key).join(".")}: `;
}
