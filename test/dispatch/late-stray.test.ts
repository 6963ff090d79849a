/**
 * A stray whose spawn lands after its attempt was forgotten (spec §20.26): the
 * runner still looks for it by its spawn name, until `strayWatchHours` after
 * its attempt ended, and stops and forgets it — with the fake adapter and a
 * fake clock, and with the process adapter for real, on SQLite and PostgreSQL.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { SpawnRequest } from "../../src/core/dispatch/route.js";
import type { StartOutcome } from "../../src/core/dispatch/sessions.js";
import { DispatchRunner } from "../../src/dispatch/runner/runner.js";
import type { WorkerAdapter } from "../../src/dispatch/workers/adapter.js";
import { FakeWorker } from "../../src/dispatch/workers/fake.js";
import { ProcessWorker } from "../../src/dispatch/workers/process.js";
import { FakeClock } from "../../src/testing/fake-clock.js";
import { waitUntil } from "../process/harness.js";
import { type DispatchTestStore, forEachStore } from "./stores.js";

const MIN = 60_000;
const H = 60 * MIN;

/** A process adapter whose starts are refused while `holding`: the spawn "lands" when the test says. */
class HeldProcessWorker extends ProcessWorker {
  holding = true;
  override async start(req: SpawnRequest): Promise<StartOutcome> {
    if (this.holding) return { kind: "refused", cause: "other", message: "held by the test" };
    return super.start(req);
  }
}

/**
 * An item whose attempt never saw its session: closed, it settles as a stray after spawnLostMinutes,
 * and is forgotten failedSessionHours later. Returns the forgotten attempt and its spawn request.
 */
async function forgottenStray(store: DispatchTestStore, clock: FakeClock, worker: WorkerAdapter) {
  const pipelines = [
    {
      name: "fix",
      steps: [{ name: "build", worker: worker.kind, spawn: { command: ["sh", "-c", "echo hi; sleep 600"] } }],
    },
  ];
  const runner = new DispatchRunner({ store, pipelines, workers: [worker] });
  const item = await store.dispatch.addItem("fix", "build", "{}");
  await runner.pass(); // claimed; every spawn refused: reconciling, no session
  await store.dispatch.closeItem(item.id);
  const [a0] = await store.dispatch.listAttempts({ itemId: item.id, limit: 1 });
  clock.set(a0!.claimedAt + 10 * MIN);
  await runner.pass(); // closing, no session ever seen, after spawnLostMinutes: a stray
  const settled = (await store.dispatch.getAttempt(a0!.id))!;
  expect(settled).toMatchObject({
    state: "failed",
    forced: "item-closed",
    sessionStopped: false,
    session: null,
  });
  clock.set(settled.endedAt! + 72 * H);
  await runner.pass(); // forgotten without asking the worker (no session)
  const forgotten = (await store.dispatch.getAttempt(a0!.id))!;
  expect(forgotten.forgotten).toBe(true);
  const { request } = JSON.parse(forgotten.spawn) as { request: SpawnRequest };
  return { runner, attempt: forgotten, request, get: async () => (await store.dispatch.getAttempt(a0!.id))! };
}

describe("strays that land after their attempt was forgotten (spec §20.26)", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  forEachStore((open) => {
    it("§20.26 a forgotten stray's late spawn is found by its spawn name, stopped and forgotten, until strayWatchHours after its attempt ended", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs: { sh: (s) => s.say("hi\n") } });
      worker.refuseNext = { cause: "other", count: 1_000 };
      const t = await forgottenStray(store, clock, worker);
      worker.refuseNext = null;
      clock.set(t.attempt.endedAt! + 168 * H - 1);
      expect((await worker.start(t.request)).kind).toBe("started"); // the spawn lands, late
      await t.runner.pass();
      expect(await t.get()).toMatchObject({ session: t.request.name, sessionStopped: false });
      expect((await worker.read(t.request.name)).kind).toBe("ended"); // stopped
      const r = await t.runner.pass();
      expect(await t.get()).toMatchObject({ sessionStopped: true, forgotten: true });
      expect(await worker.find(t.request.name)).toBeNull(); // and forgotten
      expect(r.errors).toEqual([]);
      const kinds = (await store.dispatch.events(t.attempt.id, 0, 100)).map((e) => e.kind);
      expect(kinds).toEqual(expect.arrayContaining(["stray-found", "stray-stopped"]));
    });

    it("§20.26 a forgotten stray is no longer looked for strayWatchHours after its attempt ended", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs: { sh: (s) => s.say("hi\n") } });
      worker.refuseNext = { cause: "other", count: 1_000 };
      const t = await forgottenStray(store, clock, worker);
      worker.refuseNext = null;
      clock.set(t.attempt.endedAt! + 168 * H);
      await worker.start(t.request);
      await t.runner.pass();
      expect(await t.get()).toMatchObject({ session: null, sessionStopped: false });
      expect((await worker.read(t.request.name)).kind).toBe("running");
    });

    it("§20.26 with the process adapter: a session spawned after its attempt was forgotten is found and stopped", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const root = mkdtempSync(join(tmpdir(), "ratchet-late-stray-"));
      dirs.push(root);
      const worker = new HeldProcessWorker({ kind: "proc", root });
      const t = await forgottenStray(store, clock, worker);
      worker.holding = false;
      try {
        expect((await worker.start(t.request)).kind).toBe("started");
        expect((await worker.read(t.request.name)).kind).toBe("running");
        await t.runner.pass(); // found by its spawn name, bound, stopped
        expect((await t.get()).session).toBe(t.request.name);
        await waitUntil("the stray seen stopped and forgotten", async () => {
          await t.runner.pass();
          return (await t.get()).sessionStopped === true;
        });
        expect(await worker.find(t.request.name)).toBeNull();
      } finally {
        await worker.stop(t.request.name);
        await worker.forget(t.request.name);
      }
    });
  });
});
