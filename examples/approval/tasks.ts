/**
 * The approval example's one definition, `release.publish`: prepare a draft,
 * wait for a human's answer on `approve:<release>` (spec §12.7), then publish
 * it or roll it back. The wait parks the task (no worker slot); when the
 * answer or the timeout arrives the task runs again from the top, the
 * `prepare` step replays, and `waitForEvent` returns the stored outcome.
 */
import { defineTask } from "../../src/index.js";

export interface Decision {
  approved: boolean;
  by: string;
  reason?: string;
}

export interface ReleaseInput {
  release: string;
  timeoutMs: number;
}

export interface ReleaseResult {
  release: string;
  decision: "approved" | "rejected" | "timed out";
  by: string | null;
  action: "published" | "rolled back";
}

/** What happened in this process, per release: invocations of `run`, and step bodies that ran. */
export interface ApprovalWorld {
  runs: Map<string, number>;
  bodies: string[];
  note(text: string): void;
}

export function approvalTasks(w: ApprovalWorld) {
  const publish = defineTask({
    name: "release.publish",
    retry: { maxAttempts: 1 },
    async run(ctx, input: ReleaseInput): Promise<ReleaseResult> {
      const { release } = input;
      w.runs.set(release, (w.runs.get(release) ?? 0) + 1);
      const draft = await ctx.step("prepare", () => {
        w.bodies.push(`${release}:prepare`);
        w.note(`${release}: prepared draft, waiting for approve:${release}`);
        return { draftId: `draft-${release}` };
      });
      const answer = await ctx.waitForEvent<Decision>(`approve:${release}`, { timeoutMs: input.timeoutMs });
      const decision =
        answer.kind === "timeout" ? "timed out" : answer.payload.approved ? "approved" : "rejected";
      const by = answer.kind === "signal" ? answer.payload.by : null;
      if (decision === "approved") {
        await ctx.step("publish", () => {
          w.bodies.push(`${release}:publish`);
          w.note(`${release}: ${decision} by ${by}; published ${draft.draftId}`);
          return true;
        });
        return { release, decision, by, action: "published" };
      }
      await ctx.step("rollback", () => {
        w.bodies.push(`${release}:rollback`);
        w.note(`${release}: ${decision}${by ? ` by ${by}` : ""}; deleted ${draft.draftId}`);
        return true;
      });
      return { release, decision, by, action: "rolled back" };
    },
  });
  return { publish };
}
