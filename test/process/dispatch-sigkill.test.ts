/**
 * spec §20.20, §20.22: a dispatch runner process is SIGKILLed mid-pass — after
 * it started a session but before it bound it, or after it decided but before
 * it applied. Another runner on the same SQLite file takes the attempt once
 * the dead runner's lease lapsed, finds the session by its spawn name, and
 * finishes the item: nothing is lost and no session is started twice. And two
 * runner processes share one store. On SQLite and on PostgreSQL.
 */
import { readdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { DispatchRunner } from "../../src/dispatch/runner/runner.js";
import { ProcessWorker } from "../../src/dispatch/workers/process.js";
import type { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import type { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { dropSchemas, pgGate } from "../pg-available.js";
import { FixtureProcess, Sandbox, waitUntil } from "./harness.js";
import { openSharedStore } from "./shared-store.js";

const FIXTURE = join(
  resolve(dirname(fileURLToPath(import.meta.url)), "../.."),
  "test/fixtures/dispatch-runner.ts",
);
const COMMAND = [
  "sh",
  "-c",
  'echo working; while [ ! -e "$RATCHET_SESSION_DIR/go" ]; do sleep 0.05; done; ' +
    `printf '{"outcome":"succeeded"}' > "$RATCHET_SESSION_DIR/closeout.json"`,
];

describe.each(["sqlite", "postgres"] as const)(
  "SIGKILL of a dispatch runner mid-pass on %s (spec §20.20)",
  (backend) => {
    let sb: Sandbox;
    let store: SqliteStore | PostgresStore;
    let where: string;
    let children: FixtureProcess[];
    const schemas: string[] = [];
    if (backend === "postgres" && !pgGate(it)) return;

    beforeEach(async () => {
      sb = new Sandbox();
      children = [];
      ({ store, where } = await openSharedStore(backend, sb, schemas));
    });

    afterAll(async () => {
      await dropSchemas(schemas);
    });

    afterEach(async () => {
      for (const c of children) c.kill("SIGKILL");
      await Promise.all(children.map((c) => c.exited));
      const root = sb.path("sessions");
      const w = new ProcessWorker({ root });
      for (const s of readdirSync(root)) await w.forget(s);
      await store.close();
      await sb.cleanup();
    });

    async function killAt(point: "launched" | "decided"): Promise<string> {
      const child = new FixtureProcess([where, sb.path("sessions"), point, JSON.stringify(COMMAND)], FIXTURE);
      children.push(child);
      const paused = await child.waitFor("paused");
      child.kill("SIGKILL");
      expect((await child.exited).signal).toBe("SIGKILL");
      return String(paused.attempt);
    }

    async function takeOver(attemptId: string) {
      const worker = new ProcessWorker({ root: sb.path("sessions") });
      const runner = new DispatchRunner({
        store,
        pipelines: [
          { name: "p", steps: [{ name: "build", worker: "process", spawn: { command: COMMAND } }] },
        ],
        workers: [worker],
        leaseMs: 1_000,
        id: "survivor",
      });
      const bound = await waitUntil("the survivor to bind the session", async () => {
        await runner.pass();
        const a = await store.dispatch.getAttempt(attemptId);
        return a?.session !== null && a?.state === "running" ? a : undefined;
      });
      writeFileSync(join(worker.dirs.dir(bound!.session!), "go"), "");
      return waitUntil("the item to be done", async () => {
        await runner.pass();
        const a = await store.dispatch.getAttempt(attemptId);
        return a?.state === "succeeded" ? a : undefined;
      });
    }

    it("§20.20 killed after starting a session, before binding it: the survivor finds it by name, starts none", async () => {
      const item = await store.dispatch.addItem("p", "build", "{}");
      const attemptId = await killAt("launched");
      const before = (await store.dispatch.getAttempt(attemptId))!;
      expect(before).toMatchObject({
        state: "starting",
        session: null,
        holder: expect.stringMatching(/^fixture-/),
      });
      const done = await takeOver(attemptId);
      expect(done.session).toBe(`ratchet-${attemptId}`);
      expect(readdirSync(sb.path("sessions"))).toEqual([`ratchet-${attemptId}`]);
      expect((await store.dispatch.getItem(item.id))!.state).toBe("done");
      const events = await store.dispatch.events(attemptId, 0, 100);
      expect(events.some((e) => (e.detail as { found?: boolean } | null)?.found === true)).toBe(true);
    });

    it("§20.20 killed after deciding, before applying: the survivor decides again and the item finishes once", async () => {
      const item = await store.dispatch.addItem("p", "build", "{}");
      const attemptId = await killAt("decided");
      const done = await takeOver(attemptId);
      expect(done.state).toBe("succeeded");
      expect((await store.dispatch.listAttempts({ itemId: item.id, limit: 10 })).length).toBe(1);
      const moves = (await store.dispatch.events(attemptId, 0, 100)).filter(
        (e) => (e.detail as { rule?: string } | null)?.rule === "move-to-running",
      );
      expect(moves).toHaveLength(1);
      expect(readdirSync(sb.path("sessions"))).toEqual([`ratchet-${attemptId}`]);
    });

    it("§20.20 two runner processes on one store: every item runs once, each attempt moved by one runner at a time", async () => {
      const quick = [
        "sh",
        "-c",
        `echo hi; printf '{"outcome":"succeeded"}' > "$RATCHET_SESSION_DIR/closeout.json"`,
      ];
      for (let i = 0; i < 6; i++) await store.dispatch.addItem("p", "build", "{}");
      for (let i = 0; i < 2; i++) {
        const c = new FixtureProcess([where, sb.path("sessions"), "-", JSON.stringify(quick)], FIXTURE);
        children.push(c);
      }
      await waitUntil("every item done", async () => {
        const items = await store.dispatch.listItems({ limit: 10 });
        return items.length === 6 && items.every((i) => i.state === "done");
      });
      const attempts = await store.dispatch.listAttempts({ limit: 20 });
      expect(attempts).toHaveLength(6);
      expect(new Set(attempts.map((a) => a.itemId)).size).toBe(6);
      for (const a of attempts) {
        const events = await store.dispatch.events(a.id, 0, 100);
        expect(events.filter((e) => e.kind === "settled")).toHaveLength(1);
      }
      expect(readdirSync(sb.path("sessions")).sort()).toEqual(attempts.map((a) => `ratchet-${a.id}`).sort());
    });
  },
);
