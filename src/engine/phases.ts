/**
 * Phase tasks (spec §12.8): the explicit, checkpointed state machine for long
 * loops such as an agent's turns. Each phase returns the next phase and its
 * state (committed as one checkpoint that replaces the previous one), a wait
 * and the phase to resume in, or the outcome. A rerun (crash, wait, sleep)
 * resumes at the last committed checkpoint: the steps of the current turn
 * replay, earlier turns never run again, and their step records are dropped,
 * so a loop of ten thousand turns keeps one checkpoint, not ten thousand steps.
 */
import { toStorableJson } from "../core/json.js";
import { ConfigError, NonRetryableError, NoProgressError, ValidationError } from "../errors.js";
import type { WaitPolicy } from "../store/store.js";
import { turnPrefix } from "../store/tree/keys.js";
import type { ChildOutcome, Invocation, TaskContext } from "./context.js";
import { checkName, defineTask, type TaskDefinition, type TaskSpec } from "./definition.js";

export interface PhaseContext extends TaskContext {
  /** The phase running now. */
  readonly phase: string | null;
  /** How many checkpoints were committed before this phase (0 for the first). */
  readonly turn: number;
  /** Outcomes of the wait that led to this phase, in the order waited for; null when it did not follow a wait. */
  readonly outcomes: ChildOutcome[] | null;
}

export type PhaseResult<S, O> =
  | { next: string; state: S; wait?: readonly number[]; policy?: WaitPolicy }
  | { done: O };

export type PhaseHandler<I, S, O> = (
  ctx: PhaseContext,
  state: S,
  input: I,
) => Promise<PhaseResult<S, O>> | PhaseResult<S, O>;

export interface PhaseSpec<I, S, O> extends Omit<TaskSpec<I, O>, "run"> {
  /** The first phase and state for an input. */
  initial(input: I): { phase: string; state: S };
  phases: Record<string, PhaseHandler<I, S, O>>;
}

interface Checkpoint {
  phase: string;
  state: unknown;
  turn: number;
  wait?: { ids: number[]; policy: WaitPolicy };
}

function isCheckpoint(v: unknown): v is Checkpoint {
  return (
    v !== null &&
    typeof v === "object" &&
    typeof (v as Checkpoint).phase === "string" &&
    Number.isInteger((v as Checkpoint).turn)
  );
}

export function definePhases<I, S, O>(spec: PhaseSpec<I, S, O>): TaskDefinition<I, O> {
  if (spec === null || typeof spec !== "object") throw new ConfigError("definePhases needs an object");
  if (typeof spec.initial !== "function")
    throw new ConfigError(`task "${spec.name}": initial must be a function`);
  if (spec.phases === null || typeof spec.phases !== "object" || Object.keys(spec.phases).length === 0)
    throw new ConfigError(`task "${spec.name}": phases must map at least one phase name to a handler`);
  for (const [p, h] of Object.entries(spec.phases)) {
    checkName(p, "phase name");
    if (typeof h !== "function")
      throw new ConfigError(`task "${spec.name}": phase "${p}" must be a function`);
  }
  const phases = new Map(Object.entries(spec.phases));
  const handler = (phase: string) => {
    const h = phases.get(phase);
    if (!h) throw new NonRetryableError(`task "${spec.name}" has no phase "${phase}"`);
    return h;
  };
  return defineTask<I, O>({
    ...spec,
    async run(ctx, input) {
      const inv = ctx as Invocation;
      let cp: Checkpoint;
      if (isCheckpoint(inv.checkpoint)) cp = inv.checkpoint;
      else {
        const first = spec.initial(input);
        cp = { phase: first.phase, state: first.state ?? null, turn: 0 };
      }
      for (;;) {
        const h = handler(cp.phase);
        inv.phase = cp.phase;
        inv.turn = cp.turn;
        inv.stepPrefix = turnPrefix(cp.turn);
        inv.outcomes = cp.wait ? await inv.waitFor(cp.wait.ids, { policy: cp.wait.policy }) : null;
        const r = await h(inv, cp.state as S, input);
        if (r === null || typeof r !== "object")
          throw new ValidationError(`phase "${cp.phase}" must return { next, state } or { done }`);
        if ("done" in r) return r.done;
        handler(checkName(r.next, "next phase"));
        const next: Checkpoint = { phase: r.next, state: r.state ?? null, turn: cp.turn + 1 };
        if (r.wait !== undefined) {
          if (!Array.isArray(r.wait) || r.wait.length === 0)
            throw new ValidationError("phase wait needs task ids");
          next.wait = { ids: [...r.wait], policy: r.policy ?? "allSettled" };
        }
        const text = toStorableJson(next, `checkpoint of phase "${r.next}"`);
        if (text === JSON.stringify({ ...cp, turn: next.turn })) {
          // spec §12.8: the same phase, state and wait again would loop for ever without progress.
          throw new NoProgressError(`phase "${cp.phase}" returned the checkpoint it started from`);
        }
        // One commit replaces the checkpoint; the effect sandwich is: commit intent, act, commit outcome.
        await inv.saveCheckpoint(text, turnPrefix(next.turn));
        cp = next;
        if (inv.handoverDue()) {
          // A new definition object was registered: the next claim runs it (and migrates if its version is higher).
          return inv.handOver();
        }
      }
    },
  });
}
