/**
 * Whole pipelines on real sessions (spec §20.22, §20.13, §20.15, §20.5): the
 * `process` and the `tmux` adapters run a script that works, asks to be
 * resumed after a failed review, is revived in its kept session with the
 * review's message, exits; and a script that stalls and is stopped. The
 * store and the adapters share a fake clock; sessions run in real time, so
 * the test waits on conditions. On SQLite and PostgreSQL.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { PipelineSpec } from "../../src/core/dispatch/pipeline.js";
import { DispatchRunner } from "../../src/dispatch/runner/runner.js";
import type { WorkerAdapter } from "../../src/dispatch/workers/adapter.js";
import { ProcessWorker } from "../../src/dispatch/workers/process.js";
import type { SessionDirs } from "../../src/dispatch/workers/session-dir.js";
import { TmuxWorker } from "../../src/dispatch/workers/tmux.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { FakeClock } from "../../src/testing/fake-clock.js";
import { dropSchemas, newSchemaName, PG_URL, pgGate } from "../pg-available.js";
import { waitUntil } from "../process/harness.js";

const base = mkdtempSync(join(tmpdir(), "ratchet-dispatch-e2e-"));
const socket = `ratchet-e2e-${process.pid}`;
afterAll(async () => {
  await new Promise((r) => execFile("tmux", ["-L", socket, "kill-server"], () => r(null)));
  // tmux leaves its socket file behind after kill-server.
  rmSync(join(process.env.TMUX_TMPDIR ?? "/tmp", `tmux-${process.getuid?.() ?? 0}`, socket), { force: true });
  rmSync(base, { recursive: true, force: true });
});

/** build: works, reports its agent session, closes out; revived, it logs the message it was given. */
const BUILD = `D="$RATCHET_SESSION_DIR"; echo "building"; printf agent-1 > "$D/agent-session";
if [ -n "$RATCHET_RESUME" ]; then echo "$RATCHET_RESUME_MESSAGE" >> "$1/resumed"; fi
printf '{"outcome":"succeeded","summary":"built"}' > "$D/closeout.json"; exit 0`;
/** review: fails the first time, passes the second. */
const REVIEW = `echo x >> "$1/reviews"; n=$(wc -l < "$1/reviews");
if [ "$n" -lt 2 ]; then printf '{"outcome":"failed","summary":"two bugs"}' > "$RATCHET_SESSION_DIR/closeout.json"; exit 1; fi
printf '{"outcome":"succeeded"}' > "$RATCHET_SESSION_DIR/closeout.json"; exit 0`;
/** hang: says one thing, then is silent for ever. */
const HANG = `echo "thinking"; touch "$RATCHET_SESSION_DIR/printed"; while true; do sleep 0.05; done`;

function pipelines(kind: string): PipelineSpec[] {
  const sh = (script: string) => ({
    command: ["sh", "-c", script, "sh", "{{input.dir}}"],
    prompt: "fix item {{item.id}}",
  });
  return [
    {
      name: "fix",
      steps: [
        { name: "build", worker: kind, spawn: sh(BUILD), on: { succeeded: { to: "review" } } },
        {
          name: "review",
          worker: kind,
          spawn: sh(REVIEW),
          on: { failed: { to: "build", resume: true, max: 2 } },
        },
      ],
    },
    { name: "hang", steps: [{ name: "think", worker: kind, spawn: sh(HANG) }] },
  ];
}

type Adapter = WorkerAdapter & { dirs: SessionDirs };
const ADAPTERS: [string, (root: string, clock: FakeClock) => Adapter][] = [
  ["process", (root, clock) => new ProcessWorker({ root, clock })],
  ["tmux", (root, clock) => new TmuxWorker({ root, clock, socket })],
];

const BACKENDS = ["sqlite", "postgres"] as const;
const CASES = ADAPTERS.flatMap(([kind, make]) => BACKENDS.map((b) => [kind, b, make] as const));
const schemas: string[] = [];
afterAll(() => dropSchemas(schemas));

describe.each(CASES)("a whole pipeline on the %s adapter, %s (spec §20.22)", (kind, backend, make) => {
  if (backend === "postgres" && !pgGate(it)) return;
  async function setup() {
    const dir = mkdtempSync(join(base, `${kind}-`));
    const clock = new FakeClock();
    let store: SqliteStore | PostgresStore;
    if (backend === "sqlite") store = new SqliteStore({ path: join(dir, "d.db"), clock });
    else {
      const schema = newSchemaName();
      schemas.push(schema);
      store = new PostgresStore({ connectionString: PG_URL, schema, clock });
    }
    await store.migrate();
    const worker = make(join(dir, "sessions"), clock);
    const runner = new DispatchRunner({ store, pipelines: pipelines(kind), workers: [worker] });
    return { dir, clock, store, worker, runner };
  }

  it("§20.13 §20.15 build, a failed review, the build revived in its kept session with the message, a passing review", async () => {
    const { dir, store, runner, worker } = await setup();
    const item = await store.dispatch.addItem("fix", "build", JSON.stringify({ dir }));
    try {
      await waitUntil("the item to be done", async () => {
        await runner.pass();
        return (await store.dispatch.getItem(item.id))!.state === "done";
      });
      const attempts = await store.dispatch.listAttempts({ itemId: item.id, limit: 10 });
      expect(attempts.map((a) => [a.phase, a.state])).toEqual([
        ["build", "succeeded"],
        ["review", "failed"],
        ["build", "succeeded"],
        ["review", "succeeded"],
      ]);
      expect(attempts[2]!.session).toBe(attempts[0]!.session);
      expect(readFileSync(join(dir, "resumed"), "utf8").trim()).toBe(`fix item ${item.id}`);
      // The item is done, so its kept session was due and forgotten in the same pass (spec §20.14).
      expect((await store.dispatch.getItem(item.id))!.kept).toBeNull();
      expect(attempts[2]!.forgotten).toBe(true);
      expect(await worker.read(attempts[2]!.session!)).toEqual({ kind: "absent" });
    } finally {
      for (const a of await store.dispatch.listAttempts({ limit: 10 }))
        if (a.session) await worker.forget(a.session);
      await store.close();
    }
  });

  it("§20.5 §20.7 a session that stalls is closed, stopped after its grace, and settled stalled; §21.16 §21.4 its notice and its moves are facts", async () => {
    const { dir, clock, store, runner, worker } = await setup();
    const item = await store.dispatch.addItem("hang", "think", JSON.stringify({ dir }));
    try {
      const a = await waitUntil("the session to print", async () => {
        await runner.pass();
        const x = (await store.dispatch.listAttempts({ itemId: item.id, limit: 1 }))[0];
        return x?.session && existsSync(join(worker.dirs.dir(x.session), "printed")) ? x : undefined;
      });
      await runner.pass(); // the output is seen as activity at this clock time
      clock.advance(30 * 60_000);
      expect((await runner.pass()).decisions.map((d) => d.rule)).toEqual(["bound:stall"]);
      clock.advance(120_000);
      await waitUntil("the attempt to settle", async () => {
        await runner.pass();
        return (await store.dispatch.getAttempt(a.id))!.state === "failed";
      });
      expect(await store.dispatch.getAttempt(a.id)).toMatchObject({
        forced: "stalled",
        sessionStopped: true,
      });
      expect((await store.dispatch.getItem(item.id))!.state).toBe("closed");
      // The stall's notice rode with the close; every move of the attempt was reported, in order.
      const facts = await store.outbox.facts("0", 1_000);
      expect(facts.filter((f) => f.type === "notice.stalled").map((f) => f.subject)).toEqual([
        `attempt:${a.id}`,
      ]);
      const moves = facts.filter((f) => f.type === "attempt.moved" && f.subject === `attempt:${a.id}`);
      expect(moves.map((f) => (f.data as { to: string }).to)).toEqual([
        "starting",
        "running",
        "closing",
        "failed",
      ]);
    } finally {
      for (const a of await store.dispatch.listAttempts({ limit: 10 }))
        if (a.session) await worker.forget(a.session);
      await store.close();
    }
  });
});
