/**
 * The run the agent tests drive: ordinary task code, no model. The first input says what to do:
 * `park` waits for the signal `go:<taskId>` after its tool round (so a test can queue input while
 * the run is busy), `fail` fails the run without retries, anything else answers at once.
 * The answer lists the texts of every input the run was given, steers included.
 */

import { Conversations, defineRun } from "../../src/agent/index.js";
import type { Ratchet } from "../../src/engine/ratchet.js";
import { NonRetryableError } from "../../src/errors.js";
import type { EntryRecord } from "../../src/store/conversations/types.js";

export interface TestInput {
  text: string;
  park?: boolean;
  fail?: boolean;
}

export function makeRun(name = "agent.echo") {
  return defineRun({
    name,
    maxMs: 30_000,
    retry: { maxAttempts: 1 },
    async run(run, ctx) {
      const inputs = await run.inputs();
      const first = inputs[0]!.input as TestInput;
      if (first.fail) throw new NonRetryableError(`failed on ${first.text}`);
      await run.commit("call", { entries: [{ kind: "tool-call", data: { for: first.text } }] });
      if (first.park) await ctx.waitForEvent(`go:${run.taskId}`);
      const steers = await run.boundary("tools");
      await run.commit("result", { entries: [{ kind: "tool-result", data: { n: steers.length } }] });
      const seen = new Map([...inputs, ...steers].map((s) => [s.id, (s.input as TestInput).text]));
      await run.answer({ kind: "assistant", data: { answered: [...seen.values()] } });
    },
  });
}

export function openConversations(
  ratchet: Ratchet,
  run: ReturnType<typeof makeRun>,
  opts: { steeringMode?: "one" | "all"; followUpMode?: "one" | "all" } = {},
): Conversations {
  return new Conversations(ratchet, { run, ...opts });
}

/** An entry record as a store returns it, for the pure prompt and context rules. */
export function entryRecord(seq: number, kind: EntryRecord["kind"], data: unknown): EntryRecord {
  return { conversationId: "c", seq, kind, name: null, data, taskId: null, submissionId: null, createdAt: 0 };
}
