/**
 * Step names the engine writes for its own bookkeeping. They begin with a
 * control character, which user step names may not contain (definition.ts
 * checkName), so they can never collide with a user's step.
 */
export const ENGINE_PREFIX = "\u0001";

/** The durable deadline of ctx.waitForEvent(name). */
export function eventStepKey(name: string): string {
  return `${ENGINE_PREFIX}event-deadline:${name}`;
}

/** The memoized result of ctx.waitForEvent(name). */
export function eventResultKey(name: string): string {
  return `${ENGINE_PREFIX}event:${name}`;
}

/** First character of a phase task's turn-prefixed step keys. */
export const TURN_MARK = "\u0002";

export function turnPrefix(turn: number): string {
  return `${TURN_MARK}${turn}:`;
}
