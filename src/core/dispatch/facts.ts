/**
 * The facts the dispatch layer reports (spec §21.4): pure builders from the
 * rows a change wrote and the decision that made it. The store's dispatch
 * programs append `attempt.moved` and `item.moved` for every state change they
 * write; the runner derives notices from its decisions and hands them to the
 * move that carries them out, so a notice commits with its move or not at all.
 */
import type { FactInput } from "../outbox.js";
import type { Decision } from "./actions.js";
import type { AttemptMode, AttemptState, ClosingCause } from "./model.js";
import type { ItemState } from "./sessions.js";

/** The attempt fields an `attempt.moved` fact carries. */
export interface AttemptFacts {
  readonly id: string;
  readonly itemId: string;
  readonly pipeline: string;
  readonly phase: string;
  readonly worker: string;
  readonly mode: AttemptMode;
  readonly state: AttemptState;
  readonly closing: ClosingCause | null;
  readonly forced?: string | null;
  readonly session: string | null;
}

/** spec §21.4: an attempt's state changed from `from` (null: it was just created) to its state now. */
export function attemptMoved(a: AttemptFacts, from: AttemptState | null): FactInput {
  return {
    type: "attempt.moved",
    subject: `attempt:${a.id}`,
    data: {
      attempt: a.id,
      item: a.itemId,
      pipeline: a.pipeline,
      phase: a.phase,
      worker: a.worker,
      mode: a.mode,
      from,
      to: a.state,
      closing: a.closing,
      forced: a.forced ?? null,
      session: a.session,
    },
  };
}

/** The item fields an `item.moved` fact carries. */
export interface ItemFacts {
  readonly id: string;
  readonly pipeline: string;
  readonly step: string;
  readonly state: ItemState;
}

/** spec §21.4: an item's step or state changed (`from` null: it was just added). */
export function itemMoved(i: ItemFacts, from: { step: string; state: ItemState } | null): FactInput {
  return {
    type: "item.moved",
    subject: `item:${i.id}`,
    data: { item: i.id, pipeline: i.pipeline, from, to: { step: i.step, state: i.state } },
  };
}

/** The attempt fields a notice names. */
export type NoticeAttempt = Pick<AttemptFacts, "id" | "itemId" | "pipeline" | "phase" | "worker" | "mode">;

/**
 * The notices a decision raises (spec §21.16): an attempt waiting for its
 * owner needs attention (the waiting-for-owner bound puts it to sleep after
 * it waited `afterIdleMinutes`, or an attended attempt nobody attended is put
 * to sleep); a close for a usage limit; a
 * close for a stall. Everything else raises none.
 */
export function decisionNotices(a: NoticeAttempt, d: Decision): FactInput[] {
  const act = d.action;
  const about = { attempt: a.id, item: a.itemId, pipeline: a.pipeline, phase: a.phase, worker: a.worker };
  const notice = (kind: string, title: string, extra: Record<string, unknown> = {}): FactInput[] => [
    {
      type: `notice.${kind}`,
      subject: `attempt:${a.id}`,
      data: { ...about, title, rule: d.rule, ...extra },
    },
  ];
  // Below its threshold the waiting-for-owner bound only binds (no write, so no notice could commit).
  if (
    (d.rule === "bound:waiting-for-owner" && act.kind === "sleep-if-idle") ||
    act.kind === "sleep-unattended"
  )
    return notice("attention", `attempt ${a.id} (${a.pipeline}/${a.phase}) is waiting for its owner`);
  if (act.kind === "close" && act.cause === "usage-limit")
    return notice(
      "usage-limit",
      `attempt ${a.id} (${a.pipeline}/${a.phase}) hit a usage limit of ${a.worker}`,
      {
        resetsAt: act.resetsAt,
      },
    );
  if (act.kind === "close" && act.cause === "stalled")
    return notice("stalled", `attempt ${a.id} (${a.pipeline}/${a.phase}) stalled and is being closed`);
  return [];
}
