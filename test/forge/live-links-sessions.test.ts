/**
 * Pull requests linked from the live output of REAL sessions (spec §22.11): a local process and a tmux
 * session print a pull-request URL mid-run and are linked before they end, on SQLite and PostgreSQL.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { PipelineSpec } from "../../src/core/dispatch/pipeline.js";
import { DispatchRunner } from "../../src/dispatch/runner/runner.js";
import { until } from "../../src/dispatch/testing/worker-contract.js";
import type { WorkerAdapter } from "../../src/dispatch/workers/adapter.js";
import { ProcessWorker } from "../../src/dispatch/workers/process.js";
import type { SessionDirs } from "../../src/dispatch/workers/session-dir.js";
import { TmuxWorker } from "../../src/dispatch/workers/tmux.js";
import { pullOps } from "../../src/store/pulls/ops.js";
import { FakeClock } from "../../src/testing/fake-clock.js";
import { type DispatchTestStore, forEachStore } from "../dispatch/stores.js";

const URL = "https://github.com/acme/widgets/pull/314";
// Says a line, then the URL mid-run, then waits to be released (the `go` file) and ends.
const SCRIPT = `D="$RATCHET_SESSION_DIR"; echo working; echo "opened ${URL} for review"; echo more; while [ ! -e "$D/go" ]; do sleep 0.05; done; exit 0`;

const root = mkdtempSync(join(tmpdir(), "ratchet-live-links-"));
const socket = `ratchet-live-${process.pid}`;
let n = 0;
afterAll(async () => {
  await new Promise((r) => execFile("tmux", ["-L", socket, "kill-server"], () => r(null)));
  rmSync(join(process.env.TMUX_TMPDIR ?? "/tmp", `tmux-${process.getuid?.() ?? 0}`, socket), { force: true });
  rmSync(root, { recursive: true, force: true });
});

type DirWorker = WorkerAdapter & { dirs: SessionDirs };

async function linksWhileRunning(store: DispatchTestStore, clock: FakeClock, worker: DirWorker) {
  const pipeline: PipelineSpec = {
    name: "live",
    steps: [{ name: "build", worker: worker.kind, spawn: { command: ["sh", "-c", SCRIPT] } }],
  };
  const runner = new DispatchRunner({
    store,
    pipelines: [pipeline],
    workers: [worker],
    pullHosts: ["github.com"],
    outputScanMs: 1_000,
  });
  const item = await store.dispatch.addItem("live", "build", "{}");
  const pulls = pullOps(store);
  const pass = async () => {
    clock.advance(1_000);
    const r = await runner.pass();
    expect(r.errors).toEqual([]);
    expect(r.outputFailed).toEqual([]);
    return r;
  };
  const linked = await until(
    "the URL linked from the live output",
    async () => {
      await pass();
      const [p] = await pulls.list({ itemId: item.id, limit: 10 });
      return p ?? null;
    },
    20_000,
  );
  const [a] = await store.dispatch.listAttempts({ itemId: item.id, limit: 1 });
  expect(linked).toMatchObject({ url: URL, links: [{ attemptId: a!.id, source: "url" }] });
  // Linked before it ended: the attempt still runs, its session still waits to be released.
  expect((await store.dispatch.getAttempt(a!.id))!.state).toBe("running");
  expect(await worker.read(a!.session!)).toMatchObject({ kind: "running" });
  writeFileSync(join(worker.dirs.dir(a!.session!), "go"), "");
  await until(
    "the attempt's settlement",
    async () => {
      await pass();
      return (await store.dispatch.getAttempt(a!.id))!.state === "succeeded";
    },
    20_000,
  );
  expect(await pulls.list({ limit: 10 })).toHaveLength(1);
  await worker.forget(a!.session!);
}

describe("pull requests linked from real sessions' live output", () => {
  forEachStore((open) => {
    it("§22.11 a process session that prints a pull-request URL mid-run is linked before it ends", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      await linksWhileRunning(store, clock, new ProcessWorker({ root: join(root, `p${++n}`), clock }));
    }, 60_000);

    it("§22.11 a tmux session that prints a pull-request URL mid-run is linked before it ends", async () => {
      const clock = new FakeClock();
      const store = await open(clock);
      await linksWhileRunning(store, clock, new TmuxWorker({ root: join(root, `t${++n}`), socket, clock }));
    }, 60_000);
  });
});
