/** Tool calls as durable child tasks (spec §19.10–§19.12), on SQLite and PostgreSQL. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineToolCalls, type ToolCallOutcome } from "../../src/agent/tools/calls.js";
import { defineTool } from "../../src/agent/tools/define.js";
import type { TaskContext } from "../../src/engine/context.js";
import { defineTask } from "../../src/index.js";
import {
  deferred,
  drain,
  FakeClock,
  forEachBackend,
  openRatchet,
  sharedStoreOptions,
  until,
} from "../engine/helpers.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function scratch(): string {
  const d = mkdtempSync(join(tmpdir(), "ratchet-calls-"));
  dirs.push(d);
  return d;
}

forEachBackend(() => {
  describe("tool calls (spec §19.10–§19.12)", () => {
    it("§19.11 a round runs each call as a child task named by its call id; parallel calls together, a sequential one alone; results in call order", async () => {
      const log: string[] = [];
      const echo = defineTool({
        name: "echo",
        description: "echo",
        schema: z.object({ text: z.string() }),
        replay: "safe",
        execute: (ctx, a) => {
          log.push(`echo ${a.text}`);
          ctx.output(`said ${a.text}`);
          return a.text.toUpperCase();
        },
      });
      const commit = defineTool({
        name: "commit",
        description: "commit",
        schema: z.object({}),
        replay: "unsafe",
        sequential: true,
        execute: () => {
          log.push("commit");
          return "committed";
        },
      });
      const calls = defineToolCalls({ tools: [echo, commit] });
      const cwd = scratch();
      const turn = defineTask({
        name: "turn",
        run: (ctx: TaskContext) =>
          calls.runRound(
            ctx,
            [
              { callId: "c1", tool: "echo", args: { text: "a" } },
              { callId: "c2", tool: "echo", args: { text: "b" } },
              { callId: "c3", tool: "commit", args: {} },
              { callId: "c4", tool: "echo", args: { text: 5 } },
              { callId: "c5", tool: "nope", args: {} },
            ],
            { cwd },
          ),
      });
      const r = await openRatchet([turn, calls.task]);
      const id = await r.enqueue(turn);
      await until(async () => {
        await drain(r);
        return (await r.get(id))?.status === "terminal";
      }, "the turn to end");
      const out = (await r.get(id))!.result as ToolCallOutcome[];
      expect(out.map((o) => [o.callId, o.result.content, o.result.isError ?? false])).toEqual([
        ["c1", "A", false],
        ["c2", "B", false],
        ["c3", "committed", false],
        ["c4", expect.stringMatching(/^invalid arguments for echo: text: /), true],
        ["c5", expect.stringMatching(/^unknown tool "nope"/), true],
      ]);
      // The sequential call ran after both parallel ones and before the one after it.
      expect(log.indexOf("commit")).toBe(2);
      const children = await r.store.children(id);
      expect(children.map((c) => c.spawnName).sort()).toEqual([
        "tool:c1",
        "tool:c2",
        "tool:c3",
        "tool:c4",
        "tool:c5",
      ]);
      const c1 = children.find((c) => c.spawnName === "tool:c1")!;
      const chunks: unknown[] = [];
      for await (const c of r.readStream(c1.id, "output", { follow: false })) chunks.push(c.data);
      expect(chunks).toEqual(["said a"]);
    });

    it("§19.10 a call whose worker lost it mid-run: a safe tool runs again, an unsafe one is interrupted with its output so far", async () => {
      const clock = new FakeClock();
      const release = deferred();
      let safeRuns = 0;
      let unsafeRuns = 0;
      const hang = async (ctx: { output(t: string): void; signal: AbortSignal }, what: string, n: number) => {
        ctx.output(`${what} partial output`);
        if (n === 1) await release.promise; // the first run hangs until the end of the test
        return `${what} done on run ${n}`;
      };
      const safe = defineTool({
        name: "fetch",
        description: "f",
        schema: z.object({}),
        replay: "safe",
        execute: (ctx) => hang(ctx, "fetch", ++safeRuns),
      });
      const unsafe = defineTool({
        name: "deploy",
        description: "d",
        schema: z.object({}),
        replay: "unsafe",
        execute: (ctx) => hang(ctx, "deploy", ++unsafeRuns),
      });
      const calls = defineToolCalls({ tools: [safe, unsafe], maxMs: 1_000 });
      const cwd = scratch();
      const turn = defineTask({
        name: "turn",
        run: (ctx: TaskContext) =>
          calls.runRound(
            ctx,
            [
              { callId: "s", tool: "fetch", args: {} },
              { callId: "u", tool: "deploy", args: {} },
            ],
            { cwd },
          ),
      });
      const shared = sharedStoreOptions();
      const first = await openRatchet([turn, calls.task], { ...shared, clock, streamIntervalMs: 10 });
      const second = await openRatchet([turn, calls.task], { ...shared, clock });
      const id = await first.enqueue(turn);
      const ticking = first.tick({ budgetMs: 3_600_000, concurrency: 4 });
      // Both calls hang in the first worker, their partial output committed.
      await until(async () => safeRuns === 1 && unsafeRuns === 1, "both calls to start");
      const kids = await until(async () => {
        const c = await first.store.children(id);
        return c.length === 2 ? c : null;
      }, "both call tasks");
      const callOf = (n: string) => kids.find((k) => k.spawnName === `tool:${n}`)!.id;
      await until(
        async () => (await first.streams(callOf("u")))[0]?.length === 1,
        "the unsafe call's output",
      );
      clock.advance(1_000 + 10_000 + 1);
      await until(async () => {
        await drain(second);
        return (await second.get(id))?.status === "terminal";
      }, "the second worker to finish the round");
      const out = (await second.get(id))!.result as ToolCallOutcome[];
      expect(out[0]).toEqual({ callId: "s", tool: "fetch", result: { content: "fetch done on run 2" } });
      expect(out[1]!.interrupted).toBe(true);
      expect(out[1]!.result.isError).toBe(true);
      expect(out[1]!.result.content).toMatch(
        /deploy was interrupted: .*not safe to run again; its output so far:\ndeploy partial output/,
      );
      expect([safeRuns, unsafeRuns]).toEqual([2, 1]);
      release.resolve();
      await ticking;
      // The first worker's late answers changed nothing.
      expect(((await second.get(id))!.result as ToolCallOutcome[])[0]!.result.content).toBe(
        "fetch done on run 2",
      );
    });

    it("§19.12 aborting the turn aborts its running calls: the tool's signal fires, and the call's answer is its output so far", async () => {
      const started = deferred();
      const slow = defineTool({
        name: "slow",
        description: "s",
        schema: z.object({}),
        replay: "safe",
        execute: async (ctx) => {
          ctx.output("working…");
          started.resolve();
          await new Promise((res) => ctx.signal.addEventListener("abort", res, { once: true }));
          return "never seen";
        },
      });
      const calls = defineToolCalls({ tools: [slow] });
      const cwd = scratch();
      const turn = defineTask({
        name: "turn",
        run: (ctx: TaskContext) => calls.runRound(ctx, [{ callId: "x", tool: "slow", args: {} }], { cwd }),
      });
      const r = await openRatchet([turn, calls.task], { maintenanceIntervalMs: 20, streamIntervalMs: 10 });
      const id = await r.enqueue(turn);
      await r.start({ concurrency: 4 });
      await started.promise;
      const kid = await until(async () => (await r.store.children(id))[0], "the call task");
      await until(async () => (await r.streams(kid.id))[0]?.length === 1, "the call's output");
      await r.abort(id);
      const call = await r.waitFor(kid.id, { timeoutMs: 20_000 });
      expect(call.outcome).toBe("aborted");
      const res = call.result as ToolCallOutcome;
      expect(res.interrupted).toBe(true);
      expect(res.result.content).toMatch(
        /slow was interrupted: the call was aborted; its output so far:\nworking…/,
      );
      expect((await r.waitFor(id, { timeoutMs: 20_000 })).outcome).toBe("aborted");
      await r.stop();
    });

    it("§19.11 bad rounds are refused before any call is spawned", async () => {
      const calls = defineToolCalls({ tools: [] });
      const errors: string[] = [];
      const turn = defineTask({
        name: "turn",
        async run(ctx: TaskContext) {
          for (const [round, cwd] of [
            [[], "/tmp"],
            [[{ callId: "a b", tool: "x", args: {} }], "/tmp"],
            [
              [
                { callId: "a", tool: "x", args: {} },
                { callId: "a", tool: "x", args: {} },
              ],
              "/tmp",
            ],
            [[{ callId: "a", tool: "x", args: {} }], "relative"],
          ] as const)
            await calls
              .runRound(ctx, round as never, { cwd })
              .catch((e: { code: string }) => errors.push(e.code));
          return (await ctx.children()).length;
        },
      });
      const r = await openRatchet([turn, calls.task]);
      const id = await r.enqueue(turn);
      await drain(r);
      expect(errors).toEqual(Array(4).fill("RATCHET_INVALID_INPUT"));
      expect((await r.get(id))!.result).toBe(0);
      expect(() => defineToolCalls({ tools: [{ name: "x" } as never] })).toThrow(/defineTool/);
    });
  });
});
