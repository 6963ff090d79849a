/** Shared pieces of the dispatch store conformance cases: a holder, a lease, a started attempt, a refusal check. */
import type { RatchetError } from "../../errors.js";
import type { DispatchOps, StartSpec } from "../../store/dispatch/ops.js";
import type { DispatchEnv } from "./store-contract.js";

export type Define = (title: string, fn: (env: DispatchEnv) => Promise<void>) => void;

export const HOLDER = "runner-a";
export const LEASE = 30_000;

export function spec(itemId: string, over: Partial<StartSpec> = {}): StartSpec {
  return {
    itemId,
    phase: "build",
    worker: "w",
    mode: "agent",
    defaultSeats: null,
    holder: HOLDER,
    leaseMs: LEASE,
    spawnFor: (id) => JSON.stringify({ name: `ratchet-${id}` }),
    ...over,
  };
}

export async function started(ops: DispatchOps, over: Partial<StartSpec> = {}) {
  const item = await ops.addItem("p", "build", '{"title":"t"}');
  const r = await ops.startAttempt(spec(item.id, over));
  if (r.kind !== "started") throw new Error(`not started: ${r.kind}`);
  return r;
}

export async function rejects(env: DispatchEnv, p: Promise<unknown>, code: string) {
  try {
    await p;
  } catch (e) {
    env.expect((e as RatchetError).code).toBe(code);
    return;
  }
  throw new Error("expected a refusal");
}
