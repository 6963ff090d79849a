/**
 * Pull requests linked from a running session's output (spec §22.11), with the fake adapter and a fake
 * clock, on SQLite and PostgreSQL: the scan's interval, half-printed lines, the settlement's last scan,
 * a failing read, and hostile output.
 */
import { describe, expect, it } from "vitest";
import type { PipelineSpec } from "../../src/core/dispatch/pipeline.js";
import { MAX_REMEMBERED_ATTEMPTS, OUTPUT_SCAN_BYTES, OutputScans } from "../../src/dispatch/runner/output.js";
import { DispatchRunner } from "../../src/dispatch/runner/runner.js";
import type { OutputOutcome } from "../../src/dispatch/workers/adapter.js";
import { type FakeSession, FakeWorker } from "../../src/dispatch/workers/fake.js";
import { pullOps } from "../../src/store/pulls/ops.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { FakeClock } from "../../src/testing/fake-clock.js";
import { type DispatchTestStore, forEachStore } from "../dispatch/stores.js";

const URL7 = "https://github.com/acme/widgets/pull/7";
const URL9 = "https://github.com/acme/widgets/pull/9";
const SCAN = 30_000;

const pipeline: PipelineSpec = {
  name: "p",
  steps: [{ name: "build", worker: "fake", spawn: { command: ["wait"] } }],
};

async function setup(open: (c: FakeClock) => Promise<DispatchTestStore>, worker?: FakeWorker) {
  const clock = new FakeClock();
  const store = await open(clock);
  const w = worker ?? new FakeWorker({ clock, programs: { wait: (s) => s.say("working\n") } });
  const runner = new DispatchRunner({
    store,
    pipelines: [pipeline],
    workers: [w],
    pullHosts: ["github.com"],
    outputScanMs: SCAN,
  });
  const item = await store.dispatch.addItem("p", "build", "{}");
  await runner.pass(); // starts the attempt and moves it to running
  const [a] = await store.dispatch.listAttempts({ itemId: item.id, limit: 1 });
  const session = () => w.session(a!.session!);
  return { clock, store, worker: w, runner, item, attempt: a!, session };
}

async function linkedUrls(store: DispatchTestStore, attemptId: string) {
  const rows = await pullOps(store).list({ attemptId, limit: 100 });
  return rows.map((p) => [p.url, p.links.find((l) => l.attemptId === attemptId)?.source]);
}

const outputReads = (w: FakeWorker) => w.calls.filter((c) => c.op === "output").length;

describe("pull requests linked from live session output", () => {
  forEachStore((open) => {
    it("§22.11 a URL a running session prints is linked while it runs, scanned at most once per outputScanMs", async () => {
      const { clock, store, worker, runner, attempt, session } = await setup(open);
      const reads = outputReads(worker);
      expect(reads).toBe(1); // the first reading of a running session scans at once
      session().say(`opened ${URL7}\n`);
      await runner.pass();
      await runner.pass();
      expect(outputReads(worker)).toBe(reads); // not due yet
      expect(await linkedUrls(store, attempt.id)).toEqual([]);
      clock.advance(SCAN - 1);
      await runner.pass();
      expect(outputReads(worker)).toBe(reads);
      clock.advance(1);
      const report = await runner.pass();
      expect(outputReads(worker)).toBe(reads + 1);
      expect(report.linked).toEqual([{ attempt: attempt.id, url: URL7 }]);
      expect(report.decisions.map((d) => d.action)).not.toContain("settle");
      expect(await linkedUrls(store, attempt.id)).toEqual([[URL7, "url"]]);
      expect((await store.dispatch.getAttempt(attempt.id))!.state).toBe("running");
      clock.advance(SCAN);
      expect((await runner.pass()).linked).toEqual([]); // rescanned; linked already, nothing new
      expect(outputReads(worker)).toBe(reads + 2);
    });

    it("§22.11 a half-printed last line is not linked while the session runs; at its settlement it is", async () => {
      const { clock, store, runner, attempt, session } = await setup(open);
      session().say("opened https://github.com/acme/widgets/pull/7");
      clock.advance(SCAN);
      expect((await runner.pass()).linked).toEqual([]); // `pull/7` may yet become `pull/73`
      session().say("3\nand https://github.com/acme/widgets/pull/9");
      clock.advance(SCAN);
      expect((await runner.pass()).linked.map((l) => l.url)).toEqual([
        "https://github.com/acme/widgets/pull/73",
      ]);
      // Settled before the next scan is due: the settlement scans once more, its last line counting.
      session()
        .closeout({ outcome: "succeeded", summary: `also ${URL7}`, data: null })
        .exit(0);
      const r = await runner.pass();
      expect(r.decisions.map((d) => d.action)).toEqual(["settle"]);
      expect(r.linked).toEqual([{ attempt: attempt.id, url: URL9 }]);
      expect((await linkedUrls(store, attempt.id)).map(([u]) => u)).toEqual([
        "https://github.com/acme/widgets/pull/73",
        URL9,
        URL7,
      ]);
      // The close-out's is linked after the output's: it is the item's pull request (spec §22.7).
      expect((await pullOps(store).ofItem(attempt.itemId))!.url).toBe(URL7);
    });

    it("§22.11 a runner without forge hosts never reads output", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      const worker = new FakeWorker({ clock, programs: { wait: (s) => s.say(`opened ${URL7}\n`) } });
      const runner = new DispatchRunner({ store, pipelines: [pipeline], workers: [worker] });
      await store.dispatch.addItem("p", "build", "{}");
      for (let i = 0; i < 3; i++, clock.advance(SCAN)) await runner.pass();
      expect(outputReads(worker)).toBe(0);
      expect(await pullOps(store).list({ limit: 10 })).toEqual([]);
    });

    it("§22.11 a failing output read is reported and the attempt is reconciled all the same", async () => {
      const { clock, store, worker, runner, attempt, session } = await setup(open);
      session().say(`opened ${URL7}\n`);
      worker.failOutputs = 1;
      clock.advance(SCAN);
      const failed = await runner.pass();
      expect(failed.outputFailed).toEqual([
        { attempt: attempt.id, message: "output: scripted output failure" },
      ]);
      expect(failed.errors).toEqual([]);
      expect(failed.decisions).toHaveLength(1);
      worker.failOutputs = 1;
      session().exit(0); // fails at the settlement too: the attempt settles, the link is missed
      const settled = await runner.pass();
      expect(settled.decisions.map((d) => [d.action, d.applied])).toEqual([["settle", "applied"]]);
      expect(settled.outputFailed).toHaveLength(1);
      expect((await store.dispatch.getAttempt(attempt.id))!.state).toBe("succeeded");
      expect(await linkedUrls(store, attempt.id)).toEqual([]);
    });

    it("§22.11 hostile output (huge, binary, lookalike hosts, a URL cut by the bound) links nothing wrong", async () => {
      const { clock, store, runner, attempt, session } = await setup(open);
      const binary = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) % 256)).toString("latin1");
      const lookalikes = [
        "https://github.com.evil.com/a/b/pull/1",
        "https://github.com@evil.com/a/b/pull/2",
        "https://gіthub.com/a/b/pull/3",
        "http://github.com/a/b/pull/4",
        "https://ghe.example.com/a/b/pull/5",
        "https://evil.com/r?u=https://github.com/a/b/pull/6",
        "https://github.com/a/b/pull/07",
        "\u0000https://github.com/a/b/pull/8",
      ].join(" ");
      const last = `${lookalikes}\n${binary}\nopened ${URL9}\n`;
      // The bound cuts the output right where `xhttps://…` would read as a URL of its own.
      const cutUrl = "https://github.com/evil/cut/pull/5 ";
      const fill = "=".repeat(OUTPUT_SCAN_BYTES - Buffer.byteLength(`${cutUrl}\n${last}`));
      session().say(`${"junk\u202e ".repeat(400_000)}x${cutUrl}${fill}\n${last}`);
      clock.advance(SCAN);
      const r = await runner.pass();
      expect(r.outputFailed).toEqual([]);
      expect(r.linked).toEqual([{ attempt: attempt.id, url: URL9 }]);
      expect(await linkedUrls(store, attempt.id)).toEqual([[URL9, "url"]]);
    });
  });

  it("§22.11 an output read that never answers is given up after its bound; the pass goes on", async () => {
    class Hanging extends FakeWorker {
      override output(): Promise<OutputOutcome> {
        return new Promise(() => {});
      }
    }
    const clock = new FakeClock();
    const worker = new Hanging({ clock, programs: { wait: (s: FakeSession) => s.say("working\n") } });
    const store = new SqliteStore({ path: ":memory:", clock });
    await store.migrate();
    try {
      const runner = new DispatchRunner({
        store,
        pipelines: [pipeline],
        workers: [worker],
        pullHosts: ["github.com"],
      });
      await store.dispatch.addItem("p", "build", "{}");
      const r = await runner.pass();
      expect(r.outputFailed.map((f) => f.message)).toEqual(["output: output read timed out"]);
      expect(r.decisions.map((d) => [d.action, d.applied])).toEqual([["move-to-running", "applied"]]);
    } finally {
      await store.close();
    }
  }, 20_000);
});

describe("the live scan's bounds", () => {
  it("§22.11 outputScanMs is checked (1 s–1 h), and the per-attempt memory is bounded", async () => {
    const clock = new FakeClock();
    const store = new SqliteStore({ path: ":memory:", clock });
    await store.migrate();
    try {
      for (const outputScanMs of [999, 3_600_001, 1.5, Number.NaN]) {
        const build = () =>
          new DispatchRunner({
            store,
            pipelines: [pipeline],
            workers: [new FakeWorker()],
            pullHosts: ["github.com"],
            outputScanMs,
          });
        expect(build, String(outputScanMs)).toThrow(expect.objectContaining({ code: "RATCHET_CONFIG" }));
      }
    } finally {
      await store.close();
    }
    const scans = new OutputScans(1_000);
    for (let i = 0; i <= MAX_REMEMBERED_ATTEMPTS; i++) scans.entry(String(i), 0);
    expect(scans.size).toBe(MAX_REMEMBERED_ATTEMPTS);
    expect(scans.due("0", 1)).toBe(true); // the oldest was forgotten: due again
    expect(scans.due("1", 1)).toBe(false);
    expect(scans.due("1", 1_000)).toBe(true);
  });
});
