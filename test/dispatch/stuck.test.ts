/** Items stuck at a step their pipeline no longer has (spec §20.30), with the runner, on SQLite and PostgreSQL. */
import { describe, expect, it } from "vitest";
import { explainItemStuck } from "../../src/core/dispatch/explain.js";
import { definePipeline } from "../../src/core/dispatch/pipeline.js";
import { DispatchRunner } from "../../src/dispatch/runner/runner.js";
import { FakeWorker } from "../../src/dispatch/workers/fake.js";
import { FakeClock } from "../../src/testing/fake-clock.js";
import { forEachStore } from "./stores.js";

const pipeline = {
  name: "fix",
  steps: [{ name: "build", worker: "fake", spawn: { command: ["wait"] } }],
};

describe("stuck items (spec §20.30)", () => {
  forEachStore((open) => {
    it("§20.30 an item at a step its pipeline no longer has starts nothing until it is moved to a step it has", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs: { wait: (s) => s.say("hi\n") } });
      const r = new DispatchRunner({ store, pipelines: [pipeline], workers: [worker] });
      const item = await store.dispatch.addItem("fix", "triage", "{}");
      expect((await r.pass()).started).toEqual([]);
      const read = (await store.dispatch.getItem(item.id))!;
      expect(read).toMatchObject({ state: "open", step: "triage" });
      expect(explainItemStuck(read, new Map([["fix", definePipeline(pipeline)]]))?.kind).toBe("unknown_step");

      expect(await store.dispatch.moveItem(item.id, read.step, "build")).toMatchObject({ step: "build" });
      const [started] = (await r.pass()).started;
      expect((await store.dispatch.getAttempt(started!))?.phase).toBe("build");
      // The runner holds it now: a move decided from the old read changes nothing.
      expect(await store.dispatch.moveItem(item.id, "build", "triage")).toBeNull();
      expect(await store.dispatch.getItem(item.id)).toMatchObject({ state: "running", step: "build" });
    });
  });
});
