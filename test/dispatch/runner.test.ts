/** The runner end to end with the fake adapter and a fake clock, on SQLite and PostgreSQL (spec §20.22). */
import { describe, expect, it } from "vitest";
import type { PipelineSpec } from "../../src/core/dispatch/pipeline.js";
import { DispatchRunner } from "../../src/dispatch/runner/runner.js";
import { FakeWorker } from "../../src/dispatch/workers/fake.js";
import { FakeClock } from "../../src/testing/fake-clock.js";
import { forEachStore } from "./stores.js";

const MIN = 60_000;
const programs = {
  ok: (s: import("../../src/dispatch/workers/fake.js").FakeSession) =>
    s.say("done\n").closeout({ outcome: "succeeded", summary: null, data: null }).exit(0),
  bad: (s: import("../../src/dispatch/workers/fake.js").FakeSession) => s.say("no\n").exit(3),
  wait: (s: import("../../src/dispatch/workers/fake.js").FakeSession) => s.say("working\n"),
};
const step = (name: string, command: string, on: PipelineSpec["steps"][number]["on"] = {}) => ({
  name,
  worker: "fake",
  spawn: { command: [command, "{{input.title}}"], prompt: "do {{item.id}}" },
  on,
});

async function passes(r: DispatchRunner, n: number) {
  const reports = [];
  for (let i = 0; i < n; i++) reports.push(await r.pass());
  return reports;
}

describe("the dispatch runner (spec §20.22)", () => {
  forEachStore((open) => {
    it("§20.22 an item goes through its pipeline: each step an attempt, settled by its close-out, routed by its edge", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs });
      const pipeline = {
        name: "fix",
        steps: [step("build", "ok", { succeeded: { to: "review" } }), step("review", "ok")],
      };
      const r = new DispatchRunner({ store, pipelines: [pipeline], workers: [worker] });
      const item = await store.dispatch.addItem("fix", "build", '{"title":"t1"}');
      await passes(r, 3);
      expect(await store.dispatch.getItem(item.id)).toMatchObject({ state: "done", step: "review" });
      const attempts = await store.dispatch.listAttempts({ itemId: item.id, limit: 10 });
      expect(attempts.map((a) => [a.phase, a.state])).toEqual([
        ["build", "succeeded"],
        ["review", "succeeded"],
      ]);
      expect(worker.sessions[0]!.request).toMatchObject({
        name: `ratchet-${attempts[0]!.id}`,
        command: ["ok", "t1"],
        prompt: `do ${item.id}`,
      });
    });

    it("§20.5 a quiet agent session is stall-closed, given its stop grace, stopped, and settled stalled", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs });
      const r = new DispatchRunner({
        store,
        pipelines: [{ name: "p", steps: [step("build", "wait")] }],
        workers: [worker],
      });
      const item = await store.dispatch.addItem("p", "build", "{}");
      const first = await r.pass();
      expect(first.decisions.map((d) => d.rule)).toEqual(["move-to-running"]);
      clock.advance(30 * MIN - 1);
      expect((await r.pass()).decisions.map((d) => d.rule)).toEqual(["bound:default"]);
      clock.advance(1);
      expect((await r.pass()).decisions.map((d) => d.action)).toEqual(["close"]);
      expect((await r.pass()).decisions.map((d) => d.action)).toEqual(["nothing"]);
      clock.advance(120_000);
      expect((await r.pass()).decisions.map((d) => d.action)).toEqual(["stop"]);
      expect((await r.pass()).decisions.map((d) => d.action)).toEqual(["settle"]);
      const [a] = await store.dispatch.listAttempts({ itemId: item.id, limit: 10 });
      expect(a).toMatchObject({ state: "failed", forced: "stalled", sessionStopped: true });
      expect((await store.dispatch.getItem(item.id))!.state).toBe("closed");
      const kinds = (await store.dispatch.events(a!.id, 0, 100)).map((e) => e.kind);
      expect(kinds[0]).toBe("claimed");
      expect(kinds.at(-1)).toBe("settled");
    });

    it("§20.13 §20.15 a resume edge revives the kept session; a capacity refusal does not fall back to a fresh spawn", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs });
      const pipeline = {
        name: "p",
        steps: [
          step("build", "ok", { succeeded: { to: "review" } }),
          step("review", "bad", { failed: { to: "build", resume: true, max: 1 } }),
        ],
      };
      const r = new DispatchRunner({ store, pipelines: [pipeline], workers: [worker] });
      const item = await store.dispatch.addItem("p", "build", "{}");
      await passes(r, 2);
      const kept = (await store.dispatch.getItem(item.id))!;
      expect(kept).toMatchObject({ state: "open", step: "build", resumeNext: true });
      expect(kept.kept).toMatchObject({ worker: "fake" });
      worker.refuseNext = { cause: "capacity", count: 1 };
      await r.pass();
      expect(worker.calls.filter((c) => c.op === "resumeKept")).toHaveLength(1);
      const starts = worker.calls.filter((c) => c.op === "start").length;
      clock.advance(10_000); // past the first capacity backoff (under 5 s), not past spawnLostMinutes
      await passes(r, 2);
      expect(worker.calls.filter((c) => c.op === "start").length).toBe(starts);
      const attempts = await store.dispatch.listAttempts({ itemId: item.id, limit: 10 });
      expect(attempts[2]).toMatchObject({
        phase: "build",
        session: kept.kept!.session,
        resumeFallback: false,
      });
    });

    it("§20.15 a revival refused for cause other falls back to a fresh spawn and records it", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs });
      const pipeline = {
        name: "p",
        steps: [
          step("build", "ok", { succeeded: { to: "review" } }),
          step("review", "bad", { failed: { to: "build", resume: true, max: 1 } }),
        ],
      };
      const r = new DispatchRunner({ store, pipelines: [pipeline], workers: [worker] });
      const item = await store.dispatch.addItem("p", "build", "{}");
      await passes(r, 2);
      const kept = (await store.dispatch.getItem(item.id))!.kept!;
      await worker.forget(kept.session);
      await r.pass();
      const attempts = await store.dispatch.listAttempts({ itemId: item.id, limit: 10 });
      expect(attempts[2]).toMatchObject({
        phase: "build",
        resumeFallback: true,
        session: `ratchet-${attempts[2]!.id}`,
      });
    });

    it("§20.6 a host-slept session frees its seat; its wake waits for one, then goes over the cap after seatlessSeconds", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs });
      const r = new DispatchRunner({
        store,
        pipelines: [{ name: "p", steps: [step("build", "wait")] }],
        workers: [worker],
        seats: { fake: 1 },
      });
      await store.dispatch.addItem("p", "build", "{}");
      await store.dispatch.addItem("p", "build", "{}");
      expect((await r.pass()).started).toHaveLength(1);
      const [first] = worker.sessions;
      first!.hostSuspend();
      expect((await r.pass()).decisions.map((d) => d.action)).toEqual(["sleep"]);
      expect((await r.pass()).started).toHaveLength(1);
      const a = (await store.dispatch.listAttempts({ limit: 10 }))[0]!;
      expect(a).toMatchObject({ state: "sleeping" });
      expect(a.wakeRequestedAt).not.toBeNull();
      clock.advance(300_000 - 1);
      await r.pass();
      expect((await store.dispatch.getAttempt(a.id))!.state).toBe("sleeping");
      clock.advance(1);
      await r.pass();
      expect((await store.dispatch.getAttempt(a.id))!.state).toBe("waking");
      expect(worker.calls.filter((c) => c.op === "resume" && c.session === first!.id)).toHaveLength(1);
      await r.pass();
      expect((await store.dispatch.getAttempt(a.id))!.state).toBe("running");
      expect((await store.dispatch.seats()).length).toBe(0);
    });

    it("§20.20 two runners passing at once on one store: every item done once, each attempt moved by one runner at a time", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs });
      const pipelines = [{ name: "p", steps: [step("build", "ok")] }];
      const one = new DispatchRunner({ store, pipelines, workers: [worker], id: "r1" });
      const two = new DispatchRunner({ store, pipelines, workers: [worker], id: "r2" });
      for (let i = 0; i < 6; i++) await store.dispatch.addItem("p", "build", "{}");
      for (let i = 0; i < 3; i++) {
        const [x, y] = await Promise.all([one.pass(), two.pass()]);
        expect([...x.errors, ...y.errors]).toEqual([]);
      }
      const items = await store.dispatch.listItems({ limit: 10 });
      expect(items.map((i) => i.state)).toEqual(Array(6).fill("done"));
      const attempts = await store.dispatch.listAttempts({ limit: 20 });
      expect(attempts).toHaveLength(6);
      for (const a of attempts) {
        const ev = await store.dispatch.events(a.id, 0, 100);
        expect(ev.filter((e) => e.kind === "settled")).toHaveLength(1);
      }
      expect(new Set(worker.calls.filter((c) => c.op === "start").map((c) => c.session)).size).toBe(6);
    });

    it("§20.14 a forget the worker does not confirm changes nothing and is tried again on the next pass", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs });
      const r = new DispatchRunner({
        store,
        pipelines: [{ name: "p", steps: [step("build", "ok")] }],
        workers: [worker],
      });
      await store.dispatch.addItem("p", "build", "{}");
      await r.pass();
      const [a] = await store.dispatch.listAttempts({ limit: 1 });
      expect(a!.state).toBe("succeeded");
      clock.advance(72 * 3_600_000 - 1);
      expect((await r.pass()).forgotten).toEqual([]);
      clock.advance(1);
      worker.refuseForgets = 1;
      expect(await r.pass()).toMatchObject({ forgotten: [], failed: [a!.session] });
      expect((await store.dispatch.getAttempt(a!.id))!.forgotten).toBe(false);
      expect(await r.pass()).toMatchObject({ forgotten: [a!.session], failed: [] });
      expect((await store.dispatch.getAttempt(a!.id))!.forgotten).toBe(true);
      expect(await worker.read(a!.session!)).toEqual({ kind: "absent" });
    });

    it("§20.24 a close-out reported to the store closes the attempt; after its grace the session is stopped and it settles by it", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs });
      const r = new DispatchRunner({
        store,
        pipelines: [{ name: "p", steps: [step("build", "wait")] }],
        workers: [worker],
      });
      const item = await store.dispatch.addItem("p", "build", "{}");
      await r.pass();
      const [a] = await store.dispatch.listAttempts({ limit: 1 });
      await store.dispatch.recordCloseout(a!.id, '{"outcome":"succeeded","summary":"reported"}');
      expect((await r.pass()).decisions.map((d) => d.action)).toEqual(["nothing"]);
      clock.advance(120_000);
      expect((await r.pass()).decisions.map((d) => d.action)).toEqual(["stop"]);
      expect((await r.pass()).decisions.map((d) => d.action)).toEqual(["settle"]);
      expect(await store.dispatch.getAttempt(a!.id)).toMatchObject({ state: "succeeded", forced: null });
      expect((await store.dispatch.getItem(item.id))!.state).toBe("done");
    });

    it("§20.26 a session that ignores stop is given up on, settled unstopped, and stopped later as a stray", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs });
      const r = new DispatchRunner({
        store,
        pipelines: [{ name: "p", steps: [step("build", "wait")] }],
        workers: [worker],
      });
      await store.dispatch.addItem("p", "build", "{}");
      await r.pass();
      const s = worker.sessions[0]!;
      s.stubborn = true;
      clock.advance(30 * MIN);
      await r.pass(); // close: stalled
      clock.advance(29 * MIN);
      expect((await r.pass()).decisions.map((d) => d.action)).toEqual(["stop"]);
      clock.advance(MIN);
      expect((await r.pass()).decisions.map((d) => d.action)).toEqual(["settle"]);
      const [a] = await store.dispatch.listAttempts({ limit: 1 });
      expect(a).toMatchObject({ state: "failed", forced: "stalled", sessionStopped: false });
      const stops = () => worker.calls.filter((c) => c.op === "stop").length;
      const before = stops();
      await r.pass();
      expect(stops()).toBe(before + 1);
      s.stubborn = false;
      await r.pass(); // stopped now
      await r.pass(); // seen ended
      expect((await store.dispatch.getAttempt(a!.id))!.sessionStopped).toBe(true);
      expect((await store.dispatch.events(a!.id, 0, 100)).map((e) => e.kind)).toContain("stray-stopped");
      expect(await store.dispatch.strays(10)).toEqual([]);
    });

    it("§20.6 an operator's wake of a sleeping attempt takes a free seat and resumes its session", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs });
      const r = new DispatchRunner({
        store,
        pipelines: [{ name: "p", steps: [step("build", "wait")] }],
        workers: [worker],
      });
      await store.dispatch.addItem("p", "build", "{}");
      await r.pass();
      worker.sessions[0]!.attention("waiting");
      clock.advance(30 * MIN);
      expect((await r.pass()).decisions.map((d) => d.action)).toEqual(["sleep-if-idle"]);
      expect((await r.pass()).decisions.map((d) => d.action)).toEqual(["sleep"]);
      const [a] = await store.dispatch.listAttempts({ limit: 1 });
      expect(a).toMatchObject({ state: "sleeping", wakeRequestedAt: null });
      expect(await store.dispatch.requestWake(a!.id, "operator")).toMatchObject({
        wakeRequestedAt: clock.now(),
      });
      expect(await store.dispatch.requestWake(a!.id, "operator")).toBeNull();
      await r.pass();
      expect((await store.dispatch.getAttempt(a!.id))!.state).toBe("waking");
      await r.pass();
      expect((await store.dispatch.getAttempt(a!.id))!.state).toBe("running");
    });

    it("§20.5 attended: a quiet session stays awake while its owner visits, and sleeps once they stay away", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs });
      const attended = { ...step("pair", "wait"), mode: "attended" as const };
      const r = new DispatchRunner({
        store,
        pipelines: [{ name: "p", steps: [attended] }],
        workers: [worker],
      });
      await store.dispatch.addItem("p", "pair", "{}");
      await r.pass();
      const s = worker.sessions[0]!;
      for (let i = 0; i < 6; i++) {
        clock.advance(10 * MIN);
        s.owner();
        expect((await r.pass()).decisions.map((d) => d.action)).toEqual(["bind-only"]);
      }
      clock.advance(30 * MIN);
      expect((await r.pass()).decisions.map((d) => d.action)).toEqual(["sleep-if-idle"]);
      expect(worker.calls.filter((c) => c.op === "suspend")).toHaveLength(1);
    });

    it("§20.22 items a full seat holds back do not keep later items of another kind from starting", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const a = new FakeWorker({ kind: "a", clock, programs });
      const b = new FakeWorker({ kind: "b", clock, programs });
      const pipelines = [
        { name: "pa", steps: [{ ...step("s", "wait"), worker: "a" }] },
        { name: "pb", steps: [{ ...step("s", "wait"), worker: "b" }] },
      ];
      const r = new DispatchRunner({ store, pipelines, workers: [a, b], seats: { a: 0 }, batch: 2 });
      for (let i = 0; i < 3; i++) await store.dispatch.addItem("pa", "s", "{}");
      const late = await store.dispatch.addItem("pb", "s", "{}");
      const report = await r.pass();
      expect(report.started).toHaveLength(1);
      expect((await store.dispatch.getItem(late.id))!.state).toBe("running");
    });

    it("§20.15 §20.20 a revival whose answer was lost is found running and bound, not revived again or replaced", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const revivable = {
        ...programs,
        // The first run succeeds and ends; a revival (it got a message) works on.
        build: (s: import("../../src/dispatch/workers/fake.js").FakeSession) =>
          s.messages.length > 0 ? s.say("again\n") : programs.ok(s),
      };
      const worker = new FakeWorker({ clock, programs: revivable });
      const pipeline = {
        name: "p",
        steps: [
          step("build", "build", { succeeded: { to: "review" } }),
          step("review", "bad", { failed: { to: "build", resume: true, max: 1 } }),
        ],
      };
      let dieAfterLaunch = false;
      const r = new DispatchRunner({
        store,
        pipelines: [pipeline],
        workers: [worker],
        debug: async (point) => {
          if (point === "launched" && dieAfterLaunch) throw new Error("killed here");
        },
      });
      const item = await store.dispatch.addItem("p", "build", "{}");
      await passes(r, 2);
      const kept = (await store.dispatch.getItem(item.id))!.kept!;
      dieAfterLaunch = true;
      const died = await r.pass();
      expect(died.errors.map((e) => e.message)).toEqual([`item ${item.id}: killed here`]);
      dieAfterLaunch = false;
      await r.pass();
      const third = (await store.dispatch.listAttempts({ itemId: item.id, limit: 10 }))[2]!;
      expect(third).toMatchObject({
        phase: "build",
        state: "running",
        session: kept.session,
        resumeFallback: false,
      });
      expect(worker.calls.filter((c) => c.op === "resumeKept")).toHaveLength(1);
      expect(worker.calls.filter((c) => c.op === "start").map((c) => c.session)).not.toContain(
        `ratchet-${third.id}`,
      );
    });

    it("§20.5 §20.7 a session at its usage limit is closed usage-limit, stopped, and settled with that forced failure", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs });
      const r = new DispatchRunner({
        store,
        pipelines: [{ name: "p", steps: [step("build", "wait")] }],
        workers: [worker],
      });
      await store.dispatch.addItem("p", "build", "{}");
      await r.pass();
      worker.sessions[0]!.usageLimit(clock.now() + 3_600_000);
      expect((await r.pass()).decisions.map((d) => d.rule)).toEqual(["bound:usage-limit"]);
      clock.advance(120_000);
      expect((await r.pass()).decisions.map((d) => d.action)).toEqual(["stop"]);
      await r.pass();
      expect((await store.dispatch.listAttempts({ limit: 1 }))[0]).toMatchObject({
        state: "failed",
        forced: "usage-limit",
      });
    });

    it("§20.29 an item whose attempt hit its usage limit waits for the reset before its next attempt", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs });
      const retry = { ...step("build", "wait"), on: { "usage-limit": { to: "build", max: 2 } } };
      const r = new DispatchRunner({ store, pipelines: [{ name: "p", steps: [retry] }], workers: [worker] });
      const item = await store.dispatch.addItem("p", "build", "{}");
      await r.pass();
      const resetsAt = clock.now() + 3_600_000;
      worker.sessions[0]!.usageLimit(resetsAt);
      await r.pass(); // close: usage-limit
      clock.advance(120_000);
      await r.pass(); // stop
      await r.pass(); // settle, routed back to build, not before the reset
      expect(await store.dispatch.getItem(item.id)).toMatchObject({ state: "open", notBefore: resetsAt });
      clock.set(resetsAt - 1);
      expect((await r.pass()).started).toEqual([]);
      clock.set(resetsAt);
      expect((await r.pass()).started).toHaveLength(1);
    });
  });
});
