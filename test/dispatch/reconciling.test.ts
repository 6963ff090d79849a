/**
 * The `reconciling` live state (spec §20.1): a `starting` attempt read with no
 * session bound is adopted as `reconciling`, and every reading moves it on as
 * the table says (spec §20.4), with the fake adapter and a fake clock, on
 * SQLite and PostgreSQL.
 */
import { describe, expect, it } from "vitest";
import { DispatchRunner } from "../../src/dispatch/runner/runner.js";
import { type FakeProgram, FakeWorker } from "../../src/dispatch/workers/fake.js";
import type { AttemptRow } from "../../src/store/dispatch/ops.js";
import { FakeClock } from "../../src/testing/fake-clock.js";
import { type DispatchTestStore, forEachStore } from "./stores.js";

const MIN = 60_000;
const programs: Record<string, FakeProgram> = {
  wait: (s) => s.say("working\n"),
  exit0: (s) => s.say("done\n").exit(0),
  nap: (s) => s.say("zz\n").hostSuspend(),
};

async function setup(open: (c: FakeClock) => Promise<DispatchTestStore>, program: string) {
  const clock = new FakeClock();
  const store = await open(clock);
  const worker = new FakeWorker({ clock, programs });
  const pipelines = [
    { name: "fix", steps: [{ name: "build", worker: "fake", spawn: { command: [program] } }] },
  ];
  const runner = (debug?: ConstructorParameters<typeof DispatchRunner>[0]["debug"]) =>
    new DispatchRunner({ store, pipelines, workers: [worker], leaseMs: 30_000, debug });
  const item = await store.dispatch.addItem("fix", "build", "{}");
  const only = async (): Promise<AttemptRow> =>
    (await store.dispatch.listAttempts({ itemId: item.id, limit: 10 }))[0]!;
  const moves = async () =>
    (await store.dispatch.events((await only()).id, 0, 100))
      .filter((e) => e.kind === "move")
      .map(
        (e) =>
          (e.detail as { to?: string; action?: { kind: string } }).to ??
          (e.detail as { action?: { kind: string } }).action?.kind ??
          "bind",
      );
  return { clock, store, worker, runner, item, only, moves };
}

describe("the reconciling state (spec §20.1)", () => {
  forEachStore((open) => {
    it("§20.1 a starting attempt whose spawn was refused is adopted as reconciling; the respawn binds it there, and its running reading moves it to running", async () => {
      const t = await setup(open, "wait");
      t.worker.refuseNext = { cause: "other", count: 1 };
      const r = t.runner();
      await r.pass();
      expect(await t.only()).toMatchObject({
        state: "reconciling",
        session: expect.any(String),
        startedAt: null,
      });
      expect((await r.pass()).decisions).toEqual([
        expect.objectContaining({
          rule: "move-to-running",
          action: "move-to-running",
          applied: "applied",
        }),
      ]);
      expect(await t.only()).toMatchObject({ state: "running", startedAt: t.clock.now() });
    });

    it("§20.1 a runner that dies between the spawn and the bind leaves starting; the next runner adopts it as reconciling, finds the session by its spawn name, and it runs", async () => {
      const t = await setup(open, "wait");
      let died!: () => void;
      const dead = new Promise<void>((res) => {
        died = res;
      });
      void t
        .runner(async (point) => {
          if (point === "launched") {
            died();
            await new Promise<never>(() => {}); // killed here: never resumes
          }
        })
        .pass();
      await dead;
      expect(await t.only()).toMatchObject({ state: "starting", session: null });
      t.clock.advance(30_000); // its lease lapses
      const seen: string[] = [];
      const r2 = t.runner(async (point, id) => {
        if (point === "decided") seen.push((await t.store.dispatch.getAttempt(id))!.state);
      });
      await r2.pass();
      expect(seen).toEqual(["reconciling"]);
      expect(t.worker.sessions).toHaveLength(1); // found, not spawned again
      expect(await t.only()).toMatchObject({ state: "running", session: t.worker.sessions[0]!.id });
    });

    it("§20.1 reconciling with its session ended settles by the exit code", async () => {
      const t = await setup(open, "exit0");
      t.worker.refuseNext = { cause: "other", count: 1 };
      const r = t.runner();
      await r.pass();
      expect((await t.only()).state).toBe("reconciling");
      await r.pass();
      expect(await t.only()).toMatchObject({ state: "succeeded", forced: null });
      expect((await t.store.dispatch.getItem(t.item.id))!.state).toBe("done");
    });

    it("§20.1 reconciling with its session suspended unasked sleeps, with a wake requested", async () => {
      const t = await setup(open, "nap");
      t.worker.refuseNext = { cause: "other", count: 1 };
      const r = t.runner();
      await r.pass();
      expect((await t.only()).state).toBe("reconciling");
      await r.pass();
      expect(await t.only()).toMatchObject({ state: "sleeping", wakeRequestedAt: t.clock.now() });
    });

    it("§20.1 reconciling with no session is respawned until spawnLostMinutes after the claim, then fails spawn-lost", async () => {
      const t = await setup(open, "wait");
      t.worker.refuseNext = { cause: "other", count: 1_000 };
      const r = t.runner();
      await r.pass();
      const claimed = (await t.only()).claimedAt;
      t.clock.set(claimed + 10 * MIN - 1);
      await r.pass();
      expect(await t.only()).toMatchObject({ state: "reconciling", session: null });
      t.clock.set(claimed + 10 * MIN);
      await r.pass();
      expect(await t.only()).toMatchObject({ state: "failed", forced: "spawn-lost" });
      expect(await t.moves()).toContain("reconciling");
    });

    it("§20.1 a reconciling attempt whose item is closed moves to closing for item-closed", async () => {
      const t = await setup(open, "wait");
      t.worker.refuseNext = { cause: "other", count: 1_000 };
      await t.runner().pass();
      expect((await t.only()).state).toBe("reconciling");
      await t.store.dispatch.closeItem(t.item.id);
      expect(await t.only()).toMatchObject({ state: "closing", closing: "item-closed" });
    });

    it("§20.1 an attempt bound at its launch goes from starting to running without reconciling", async () => {
      const t = await setup(open, "wait");
      await t.runner().pass();
      expect((await t.only()).state).toBe("running");
      expect(await t.moves()).not.toContain("reconciling");
    });
  });
});
