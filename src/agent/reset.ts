/**
 * Reset and handoff (spec §19.26–§19.27): a `reset` entry starts a fresh context — what the model
 * sees begins at the newest reset or compaction (spec §17.3) — optionally carrying a note; a handoff
 * is a reset whose note is the next agent's task, written together with a change of the
 * conversation's agent configuration, after which the run goes on under the new configuration.
 *
 * Both travel as inputs (`{ type: "reset" }`, `{ type: "handoff" }`), so they have request ids and
 * queue like other submissions: idle, the input starts a run that applies it at once; busy, it waits
 * as a steer and is applied at the run's next boundary (spec §17.6), never in the middle of a turn.
 * A tool result's `control.handoff` hands off after its round.
 *
 * Invariant: a reset or handoff is one keyed commit — its entry, the configuration it sets and the
 * copies of later inputs placed with it — so a rerun applies it once (spec §19.26).
 */
import { ValidationError } from "../errors.js";
import type { SubmissionRecord } from "../store/conversations/types.js";
import { AGENT_CONFIG_KEY, type AgentConfig, agentConfigOf, checkAgentConfig } from "./config.js";
import type { Conversations } from "./conversations.js";
import type { RunContext } from "./run.js";
import type { Submission } from "./submission.js";

/** What a reset entry holds: the note the fresh context starts with, and why it was written. */
export interface ResetData {
  text: string;
  reason: "reset" | "handoff";
  /** For a handoff: the configuration fields it set (spec §19.22). */
  config?: AgentConfig;
  /** For a handoff asked by a tool result: the tool. */
  by?: string;
  /** For a tool's handoff whose configuration was refused: why (spec §19.27); nothing of it was applied. */
  configRefused?: string;
}

/** A reset or handoff as an input (the user entry it is placed as stays before the fresh context). */
export interface ControlInput {
  type: "reset" | "handoff";
  note?: string;
  config?: AgentConfig;
}

export const MAX_NOTE_CHARS = 100_000;

function checkNote(note: unknown, required: boolean): string {
  if (note === undefined && !required) return "";
  if (typeof note !== "string" || note.length > MAX_NOTE_CHARS || (required && note.length === 0))
    throw new ValidationError(
      `a ${required ? "handoff" : "reset"} note must be a string of ${required ? 1 : 0}–${MAX_NOTE_CHARS} characters`,
    );
  return note;
}

/**
 * spec §19.26: starts a fresh context, at once when the conversation is idle, else at its run's next
 * boundary. A repeated `requestId` returns the first submission.
 */
export function reset(
  conversations: Conversations,
  id: string,
  opts: { note?: string; requestId?: string } = {},
): Promise<Submission> {
  const note = checkNote(opts.note, false);
  return conversations.submit(id, { type: "reset", ...(note ? { note } : {}) } satisfies ControlInput, {
    whenBusy: "steer",
    ...(opts.requestId === undefined ? {} : { requestId: opts.requestId }),
  });
}

/**
 * spec §19.27: hands the conversation to another configuration (fields given replace the stored
 * ones) with a fresh context whose first message is `note`; the run goes on under the new one.
 */
export function handoff(
  conversations: Conversations,
  id: string,
  opts: { note: string; config?: AgentConfig; requestId?: string },
): Promise<Submission> {
  const note = checkNote(opts?.note, true);
  const config = opts.config === undefined ? undefined : checkAgentConfig(opts.config);
  return conversations.submit(
    id,
    { type: "handoff", note, ...(config ? { config } : {}) } satisfies ControlInput,
    {
      whenBusy: "steer",
      ...(opts.requestId === undefined ? {} : { requestId: opts.requestId }),
    },
  );
}

export function controlOf(input: unknown): ControlInput | null {
  const t = (input as { type?: unknown } | null)?.type;
  return t === "reset" || t === "handoff" ? (input as ControlInput) : null;
}

/** What a run does after applying placed inputs: nothing to apply, end with the reset, or go on. */
export type Applied = { kind: "none" } | { kind: "ended" } | { kind: "continue" };

/**
 * spec §19.26–§19.27: applies the newest reset or handoff among inputs just placed together (a run's
 * first inputs, or steers placed at a boundary). Inputs placed after it are copied after the new head
 * so the fresh context keeps them. A reset with nothing after it ends the run, its entry the answer;
 * a handoff, or a reset followed by inputs, goes on.
 */
export async function applyControl(
  rc: RunContext,
  placed: readonly SubmissionRecord[],
  name: string,
): Promise<Applied> {
  const parsed = placed.map((s) => ({ s, c: controlOf(s.input) }));
  let last = -1;
  parsed.forEach((p, i) => {
    if (p.c) last = i;
  });
  if (last < 0) return { kind: "none" };
  const control = parsed[last]!.c!;
  const later = parsed.slice(last + 1).map((p) => ({ kind: "user" as const, data: p.s.input }));
  const data: ResetData =
    control.type === "handoff"
      ? { text: control.note ?? "", reason: "handoff", ...(control.config ? { config: control.config } : {}) }
      : { text: control.note ?? "", reason: "reset" };
  if (control.type === "reset" && later.length === 0) {
    await rc.answer({ kind: "reset", data });
    return { kind: "ended" };
  }
  await commitHead(rc, name, data, later);
  return { kind: "continue" };
}

/** A handoff a tool result asked for (`control.handoff`), applied after its round. */
export async function handoffFromTool(
  rc: RunContext,
  name: string,
  tool: string,
  h: string | { note: string; config?: AgentConfig },
): Promise<void> {
  const note = typeof h === "string" ? h : h.note;
  let config: AgentConfig | undefined;
  let refused: string | undefined;
  try {
    config = typeof h === "string" || h.config === undefined ? undefined : checkAgentConfig(h.config);
  } catch (e) {
    // A tool's bad configuration is not applied; the handoff still happens, and its entry says why.
    refused = (e instanceof Error ? e.message : String(e)).slice(0, 500);
  }
  const data: ResetData = { text: String(note ?? ""), reason: "handoff", by: tool };
  if (config) data.config = config;
  if (refused !== undefined) data.configRefused = refused;
  await commitHead(rc, name, data, []);
}

async function commitHead(
  rc: RunContext,
  name: string,
  data: ResetData,
  later: { kind: "user"; data: unknown }[],
): Promise<void> {
  const state = data.config
    ? { [AGENT_CONFIG_KEY]: { ...agentConfigOf(await rc.state()), ...data.config } }
    : undefined;
  await rc.commit(name, { entries: [{ kind: "reset", data }, ...later], ...(state ? { state } : {}) });
}
