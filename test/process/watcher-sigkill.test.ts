/**
 * spec §22.5, §22.6: two pull-request watcher OS processes share one store (a SQLite file, a
 * PostgreSQL schema) and the local GitHub mock. While the mock's pull requests are merged one by one,
 * one watcher is SIGKILLed at a random point of its passes (a random number of forge requests after a
 * random merge). The survivor records every later merge, and each change is reported exactly once in
 * the outbox: per pull request `pr.linked`, then `pr.state` (to open) with `pr.checks`, then
 * `pr.state` (to merged) with `pr.merged`, nothing twice.
 */
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { systemClock } from "../../src/core/clock.js";
import { findPullUrls } from "../../src/core/dispatch/links.js";
import { ForgeModel } from "../../src/dispatch/forge/fake.js";
import { type GitHubMock, startGitHubMock } from "../../src/dispatch/testing/github-mock.js";
import { started } from "../../src/dispatch/testing/store-kit.js";
import type { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { pullOps } from "../../src/store/pulls/ops.js";
import type { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { seededRandom } from "../../src/testing/fake-clock.js";
import { dropSchemas, pgGate } from "../pg-available.js";
import { FixtureProcess, Sandbox, waitUntil } from "./harness.js";
import { openSharedStore } from "./shared-store.js";

const FIXTURE = join(
  resolve(dirname(fileURLToPath(import.meta.url)), "../.."),
  "test/fixtures/pull-watcher.ts",
);
const R = { owner: "acme", repo: "widgets" };
const PULLS = 6;

/** A seeded generator of integers below n (the fake clock's mulberry32), so a failure names its seed. */
function seeded(seed: number): (n: number) => number {
  const next = seededRandom(seed);
  return (n) => Math.floor(next() * n);
}

describe.each(["sqlite", "postgres"] as const)(
  "SIGKILL of one of two pull-request watchers on %s (spec §22.5, §22.6)",
  (backend) => {
    let sb: Sandbox;
    let store: SqliteStore | PostgresStore;
    let where: string;
    let mock: GitHubMock;
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
      await mock?.close();
      await store.close();
      await sb.cleanup();
    });

    it("§22.6 each state change is reported exactly once and the survivor records every merge", async () => {
      const seed = Number(process.env.RATCHET_TEST_SEED ?? Date.now() % 1_000_000);
      const rand = seeded(seed);
      const why = `seed ${seed} (RATCHET_TEST_SEED)`;
      const model = new ForgeModel("github.com", systemClock);
      mock = await startGitHubMock(model, { token: "fixture-token" });
      const pulls = pullOps(store);
      for (let n = 1; n <= PULLS; n++) {
        model.addPull(R, { number: n, headSha: `h${n}` });
        const a = await started(store.dispatch);
        await pulls.link(a.attempt.id, findPullUrls(`https://github.com/acme/widgets/pull/${n}`)[0]!, "url");
      }
      const watchers = [0, 1].map(() => new FixtureProcess([where, mock.url], FIXTURE));
      children.push(...watchers);
      for (const w of watchers) await w.waitFor("ready", 60_000);
      const states = async () => (await pulls.list({ limit: 100 })).map((p) => p.state);
      await waitUntil(
        "every pull request seen open",
        async () => {
          const s = await states();
          return s.length === PULLS && s.every((x) => x === "open");
        },
        60_000,
      );

      // Both take part: the one to be killed has looked at pull requests in its own passes.
      const looked = (m: { type: string; looks?: unknown }) =>
        m.type === "pass" && Array.isArray(m.looks) && m.looks.length > 0;
      for (const w of watchers) await w.waitForIndex("a pass that looked", looked, { timeoutMs: 60_000 });
      // Merge one by one; after a random merge (never the last), kill a random watcher a random
      // number of forge requests later, mid-pass or between passes.
      const killAfterMerge = rand(PULLS - 1);
      const victim = watchers[rand(2)]!;
      const survivor = watchers.find((w) => w !== victim)!;
      for (let n = 1; n <= PULLS; n++) {
        model.merge({ ...R, number: n });
        const base = mock.requests.length;
        const more = 1 + rand(6);
        await waitUntil(
          `${more} forge requests after merging #${n}`,
          () => mock.requests.length >= base + more,
          60_000,
          2,
        );
        if (n - 1 === killAfterMerge) {
          victim.kill("SIGKILL");
          expect((await victim.exited).signal, why).toBe("SIGKILL");
        }
      }
      await waitUntil(
        "every pull request recorded merged",
        async () => {
          const s = await states();
          return s.every((x) => x === "merged");
        },
        60_000,
      );
      expect(survivor.alive, why).toBe(true);
      expect(
        (await pulls.list({ limit: 100 })).every((p) => p.final),
        why,
      ).toBe(true);

      const facts = (await store.outbox.facts("0", 1_000)).filter((f) => f.type.startsWith("pr."));
      for (let n = 1; n <= PULLS; n++) {
        const mine = facts.filter((f) => f.subject === `pr:github.com/acme/widgets#${n}`);
        const shape = mine.map((f) => {
          const d = f.data as { from?: string | null; to?: string | null };
          return f.type === "pr.state" ? `${f.type}:${d.from}->${d.to}` : f.type;
        });
        expect(shape, `#${n}, ${why}`).toEqual([
          "pr.linked",
          "pr.state:null->open",
          "pr.checks",
          "pr.state:open->merged",
          "pr.merged",
        ]);
      }
    }, 240_000);
  },
);
