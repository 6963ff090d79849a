/** The pull-request watcher against the local GitHub mock, on SQLite and PostgreSQL (spec §22.5–§22.7). */
import { afterEach, describe, expect, it } from "vitest";
import { findPullUrls } from "../../src/core/dispatch/links.js";
import type { PipelineSpec } from "../../src/core/dispatch/pipeline.js";
import { ForgeModel } from "../../src/dispatch/forge/fake.js";
import type { Forge } from "../../src/dispatch/forge/forge.js";
import { GitHubForge } from "../../src/dispatch/forge/github.js";
import { PullWatcher } from "../../src/dispatch/forge/watcher.js";
import { DispatchRunner } from "../../src/dispatch/runner/runner.js";
import { type GitHubMock, startGitHubMock } from "../../src/dispatch/testing/github-mock.js";
import { started } from "../../src/dispatch/testing/store-kit.js";
import { FakeWorker } from "../../src/dispatch/workers/fake.js";
import { pullOps } from "../../src/store/pulls/ops.js";
import { q } from "../../src/store/tree/program.js";
import { FakeClock } from "../../src/testing/fake-clock.js";
import { type DispatchTestStore, forEachStore } from "../dispatch/stores.js";

const R = { owner: "acme", repo: "widgets" };
const URL7 = "https://github.com/acme/widgets/pull/7";
const mocks: GitHubMock[] = [];
afterEach(async () => {
  for (const m of mocks.splice(0)) await m.close();
});

async function setup(open: (c: FakeClock) => Promise<DispatchTestStore>) {
  const clock = new FakeClock();
  const store = await open(clock);
  const model = new ForgeModel("github.com", clock);
  const mock = await startGitHubMock(model, { token: "t0ken-for-tests" });
  mocks.push(mock);
  const forge = new GitHubForge({ apiUrl: mock.url, token: "t0ken-for-tests", clock });
  const policy = { intervalMs: 60_000, maxBackoffMs: 600_000 };
  const watcher = (f: Forge = forge, concurrency = 4) =>
    new PullWatcher({ store, forges: [f], policy, clock, random: () => 0.5, concurrency });
  return { clock, store, model, mock, forge, watcher, pulls: pullOps(store) };
}

async function linked(store: DispatchTestStore, url = URL7) {
  const r = await started(store.dispatch);
  await pullOps(store).link(r.attempt.id, findPullUrls(url)[0]!, "url");
  return r.attempt;
}

async function factTypes(store: DispatchTestStore): Promise<string[]> {
  const rows = await store.dispatch.run(() =>
    q<{ type: string }>("SELECT type FROM {s}.ratchet_outbox WHERE type LIKE 'pr.%' ORDER BY seq"),
  );
  return rows.map((r) => r.type);
}

describe("the pull-request watcher", () => {
  forEachStore((open) => {
    it("§22.6 a state change emits its facts once; an unchanged pull request emits nothing", async () => {
      const { clock, store, model, watcher } = await setup(open);
      model.addPull(R, { number: 7, headSha: "h1" });
      model.setChecks("h1", ["pending"]);
      await linked(store);
      const w = watcher();
      const first = await w.pass();
      expect(first.looks).toEqual([
        { kind: "changed", pull: expect.any(String), facts: ["pr.state", "pr.checks"] },
      ]);
      expect((await w.pass()).looks).toEqual([]); // not due yet
      clock.advance(60_000);
      expect((await w.pass()).looks.map((l) => l.kind)).toEqual(["unchanged"]);
      model.setChecks("h1", ["success"]);
      model.merge({ ...R, number: 7 });
      clock.advance(60_000);
      expect((await w.pass()).looks[0]).toMatchObject({
        kind: "changed",
        facts: ["pr.state", "pr.merged", "pr.checks"],
      });
      clock.advance(3_600_000);
      expect((await w.pass()).looks).toEqual([]); // final: never looked at again
      expect(await factTypes(store)).toEqual([
        "pr.linked",
        "pr.state",
        "pr.checks",
        "pr.state",
        "pr.merged",
        "pr.checks",
      ]);
    });

    it("§22.5 a rate limit puts the pull request and its host off until the reset, without more calls", async () => {
      const { clock, store, model, watcher, pulls } = await setup(open);
      model.addPull(R, { number: 7 });
      model.addPull(R, { number: 8 });
      await linked(store);
      await linked(store, "https://github.com/acme/widgets/pull/8");
      model.failNext({ status: 403, resetAt: clock.now() + 900_000 });
      const w = watcher(undefined, 1); // one call at a time: the second look comes after the first's 403
      const r = await w.pass();
      expect(r.looks.map((l) => l.kind)).toEqual(["failed", "failed"]);
      expect(model.calls).toBe(1); // the second was put off without a call
      for (const p of await pulls.list({ limit: 10 })) {
        expect(p.failures).toBe(1);
        expect(p.nextCheckAt).toBeGreaterThanOrEqual(clock.now() + 900_000 - 1_000);
      }
      clock.advance(600_000);
      expect((await w.pass()).looks).toEqual([]);
      clock.advance(300_000);
      expect((await w.pass()).looks.map((l) => l.kind)).toEqual(["changed", "changed"]);
      expect((await pulls.list({ limit: 10 })).map((p) => p.failures)).toEqual([0, 0]);
    });

    it("§22.5 forge errors back off, longer with each failure in a row", async () => {
      const { clock, store, model, watcher, pulls } = await setup(open);
      model.addPull(R, { number: 7 });
      await linked(store);
      const w = watcher();
      const delays: number[] = [];
      for (let i = 0; i < 3; i++) {
        model.failNext({ status: 502 });
        const r = await w.pass();
        expect(r.looks[0]!.kind).toBe("failed");
        delays.push((r.looks[0] as { retryInMs: number }).retryInMs);
        clock.set((await pulls.list({ limit: 1 }))[0]!.nextCheckAt);
      }
      expect(delays[0]).toBeGreaterThanOrEqual(60_000);
      expect(delays[2]!).toBeGreaterThan(delays[0]!);
      expect((await pulls.list({ limit: 1 }))[0]).toMatchObject({
        failures: 3,
        lastError: expect.stringContaining("HTTP 502"),
      });
    });

    it("§22.5 two watchers at once look at each pull request once and emit its facts once", async () => {
      const { store, model, watcher } = await setup(open);
      for (const n of [7, 8, 9, 10]) {
        model.addPull(R, { number: n, state: "closed", merged: true });
        await linked(store, `https://github.com/acme/widgets/pull/${n}`);
      }
      const [a, b] = await Promise.all([watcher().pass(), watcher().pass()]);
      expect(a.looks.length + b.looks.length).toBe(4);
      expect((await factTypes(store)).filter((t) => t === "pr.merged")).toHaveLength(4);
    });

    it("§22.5 a watcher that stalls past its lease writes nothing once another has written", async () => {
      const { clock, store, model, watcher, forge } = await setup(open);
      model.addPull(R, { number: 7, state: "closed", merged: true });
      await linked(store);
      let release!: () => void;
      const gate = new Promise<void>((ok) => (release = ok));
      let entered!: () => void;
      const inside = new Promise<void>((ok) => (entered = ok));
      const slow: Forge = {
        host: "github.com",
        pull: async (ref) => {
          entered();
          await gate;
          return forge.pull(ref);
        },
        commits: (ref, n) => forge.commits(ref, n),
      };
      const stalled = watcher(slow).pass();
      await inside;
      clock.advance(60_000);
      const other = await watcher().pass();
      expect(other.looks.map((l) => l.kind)).toEqual(["changed"]);
      release();
      expect((await stalled).looks.map((l) => l.kind)).toEqual(["stale"]);
      expect((await factTypes(store)).filter((t) => t === "pr.merged")).toHaveLength(1);
    });

    it("§22.2 the attempts a pull request's commit trailers name are linked to it", async () => {
      const { store, model, watcher, pulls } = await setup(open);
      const first = await linked(store);
      const other = await started(store.dispatch);
      const item2 = other.item;
      model.addPull(R, {
        number: 7,
        commits: [
          { sha: "c1", message: `Build it\n\nRatchet-Attempt: ${first.id}` },
          {
            sha: "c2",
            message: `Fix review\n\nBody.\n\nratchet-attempt: ${other.attempt.id}\nRatchet-Attempt: 999999`,
          },
        ],
      });
      const r = await watcher().pass();
      expect(r.linked).toEqual([{ attempt: other.attempt.id, pull: expect.any(String) }]);
      const [p] = await pulls.list({ itemId: item2.id, limit: 10 });
      expect(p!.links.map((l) => [l.attemptId, l.source])).toEqual([
        [first.id, "url"],
        [other.attempt.id, "trailer"],
      ]);
    });

    it("§22.7 an edge waiting on merged moves the item on only after the forge reports merged", async () => {
      const { clock, store, model, watcher } = await setup(open);
      const worker = new FakeWorker({
        clock,
        programs: {
          pr: (s) => s.closeout({ outcome: "succeeded", summary: `Opened ${URL7}`, data: null }).exit(0),
          ok: (s) => s.closeout({ outcome: "succeeded", summary: null, data: null }).exit(0),
        },
      });
      const pipeline: PipelineSpec = {
        name: "ship",
        steps: [
          {
            name: "build",
            worker: "fake",
            spawn: { command: ["pr"] },
            on: { succeeded: { to: "cleanup", waitFor: "pr-merged" } },
          },
          { name: "cleanup", worker: "fake", spawn: { command: ["ok"] } },
        ],
      };
      const runner = new DispatchRunner({
        store,
        pipelines: [pipeline],
        workers: [worker],
        pullHosts: ["github.com"],
      });
      model.addPull(R, { number: 7, headSha: "h1" });
      const item = await store.dispatch.addItem("ship", "build", "{}");
      await runner.pass();
      await runner.pass();
      expect(await store.dispatch.getItem(item.id)).toMatchObject({
        state: "open",
        step: "cleanup",
        prWait: { for: "pr-merged" },
      });
      const w = watcher();
      await w.pass();
      for (let i = 0; i < 3; i++) await runner.pass();
      expect(worker.sessions).toHaveLength(1); // cleanup has not started: the pull request is open
      model.merge({ ...R, number: 7 });
      clock.advance(60_000);
      await w.pass();
      expect((await store.dispatch.getItem(item.id))!.prWait).toBeNull();
      await runner.pass();
      await runner.pass();
      expect(await store.dispatch.getItem(item.id)).toMatchObject({ state: "done", step: "cleanup" });
      expect(worker.sessions.map((s) => s.request.command[0])).toEqual(["pr", "ok"]);
    });
  });
});
