/**
 * The forge contract suite (spec §22.3): what every Forge adapter must
 * answer, checked through the port against a ForgeModel the suite scripts.
 * The test framework is a parameter, as in the worker contract suite:
 *
 * ```ts
 * import { describe, expect, it } from "vitest";
 * import { registerForgeContract, FakeForge } from "@ratchet-engine/ratchet/dispatch";
 * registerForgeContract({ name: "fake", open: async (model) => ({ forge: new FakeForge(model) }), runner: { describe, it, expect } });
 * ```
 *
 * `open(model)` returns an adapter that answers from `model` (for GitHub:
 * GitHubForge pointed at the mock server serving it) and, optionally, a
 * `close` for what it started.
 */
import type { ConformanceRunner } from "../../testing/conformance.js";
import { FakeClock } from "../../testing/fake-clock.js";
import { ForgeModel } from "../forge/fake.js";
import { type Forge, ForgeError } from "../forge/forge.js";

export interface ForgeContractOptions {
  name: string;
  open(model: ForgeModel): Promise<{ forge: Forge; close?: () => Promise<void> }>;
  runner: ConformanceRunner;
}

const R = { owner: "acme", repo: "widgets" };
const NOW = 1_800_000_000_000;

async function refusal(p: Promise<unknown>): Promise<ForgeError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof ForgeError) return e;
    throw new Error(`expected a ForgeError, got ${String(e)}`);
  }
  throw new Error("expected a refusal");
}

export function registerForgeContract(o: ForgeContractOptions): void {
  const { runner } = o;
  const { expect } = runner;
  const define = (title: string, fn: (forge: Forge, model: ForgeModel) => Promise<void>) =>
    runner.it(title, async () => {
      const model = new ForgeModel("github.com", new FakeClock(NOW));
      const { forge, close } = await o.open(model);
      try {
        await fn(forge, model);
      } finally {
        await close?.();
      }
    });

  runner.describe(`forge contract: ${o.name}`, () => {
    define("§22.3 an unknown pull request is null, not an error", async (forge) => {
      expect(await forge.pull({ ...R, number: 404 })).toBeNull();
      expect(await forge.commits({ ...R, number: 404 }, 10)).toEqual([]);
    });

    define(
      "§22.3 open, draft, merged and closed pull requests read as such, with head and mergeable",
      async (forge, m) => {
        m.addPull(R, { number: 1, draft: true, headSha: "aaa", headRef: "feat", mergeable: true });
        m.addPull(R, { number: 2, headSha: "bbb" });
        m.merge({ ...R, number: 2 });
        m.addPull(R, { number: 3, state: "closed", mergeable: false });
        const p1 = await forge.pull({ ...R, number: 1 });
        expect(p1).toMatchObject({
          state: "open",
          draft: true,
          headSha: "aaa",
          headRef: "feat",
          mergeable: true,
        });
        expect(p1!.url).toBe("https://github.com/acme/widgets/pull/1");
        expect((await forge.pull({ ...R, number: 2 }))!.state).toBe("merged");
        expect(await forge.pull({ ...R, number: 3 })).toMatchObject({ state: "closed", mergeable: false });
      },
    );

    define("§22.3 owner and repository names compare case-insensitively", async (forge, m) => {
      m.addPull(R, { number: 5 });
      expect((await forge.pull({ owner: "ACME", repo: "Widgets", number: 5 }))!.state).toBe("open");
    });

    define(
      "§22.3 checks: statuses and check runs summarise to none, pending, success or failure",
      async (forge, m) => {
        for (const [n, sha] of [
          [10, "s10"],
          [11, "s11"],
          [12, "s12"],
          [13, "s13"],
          [14, "s14"],
        ] as const)
          m.addPull(R, { number: n, headSha: sha });
        m.setChecks("s11", ["success"], [{ status: "in_progress", conclusion: null }]);
        m.setChecks("s12", ["success"], [{ status: "completed", conclusion: "skipped" }]);
        m.setChecks(
          "s13",
          [],
          [
            { status: "completed", conclusion: "success" },
            { status: "completed", conclusion: "timed_out" },
          ],
        );
        m.setChecks("s14", ["error"], []);
        const checks = async (n: number) => (await forge.pull({ ...R, number: n }))!.checks;
        expect(await checks(10)).toBe("none");
        expect(await checks(11)).toBe("pending");
        expect(await checks(12)).toBe("success");
        expect(await checks(13)).toBe("failure");
        expect(await checks(14)).toBe("failure");
      },
    );

    define("§22.3 check runs past one page are all counted", async (forge, m) => {
      m.addPull(R, { number: 20, headSha: "many" });
      const runs = Array.from({ length: 130 }, () => ({
        status: "completed" as const,
        conclusion: "success",
      }));
      runs[125] = { status: "completed", conclusion: "failure" };
      m.setChecks("many", [], runs);
      expect((await forge.pull({ ...R, number: 20 }))!.checks).toBe("failure");
    });

    define("§22.3 commits come oldest first across pages, at most the limit asked", async (forge, m) => {
      const commits = Array.from({ length: 130 }, (_, i) => ({
        sha: `c${i}`,
        message: `change ${i}\n\nRatchet-Attempt: ${i + 1}`,
      }));
      m.addPull(R, { number: 30, commits });
      const all = await forge.commits({ ...R, number: 30 }, 250);
      expect(all.map((c) => c.sha)).toEqual(commits.map((c) => c.sha));
      expect(all[7]!.message).toBe(commits[7]!.message);
      expect((await forge.commits({ ...R, number: 30 }, 5)).map((c) => c.sha)).toEqual([
        "c0",
        "c1",
        "c2",
        "c3",
        "c4",
      ]);
    });

    define("§22.3 pull requests by head branch: the open ones, newest first", async (forge, m) => {
      if (!forge.pullsByHead) return;
      m.addPull(R, { number: 40, headRef: "ratchet/7" });
      m.addPull(R, { number: 41, headRef: "ratchet/7" });
      m.addPull(R, { number: 42, headRef: "ratchet/7", state: "closed" });
      m.addPull(R, { number: 43, headRef: "other" });
      expect(await forge.pullsByHead(R, "ratchet/7")).toEqual([41, 40]);
      expect(await forge.pullsByHead(R, "nothing")).toEqual([]);
    });

    define("§22.3 a 429 is rate_limited with the forge's retry-after", async (forge, m) => {
      m.addPull(R, { number: 50 });
      m.failNext({ status: 429, retryAfterSeconds: 7 });
      const e = await refusal(forge.pull({ ...R, number: 50 }));
      expect([e.code, e.kind, e.retryAfterMs]).toEqual(["RATCHET_FORGE", "rate_limited", 7_000]);
      expect((await forge.pull({ ...R, number: 50 }))!.state).toBe("open");
    });

    define("§22.3 a 403 with no requests left is rate_limited until x-ratelimit-reset", async (forge, m) => {
      m.addPull(R, { number: 51 });
      m.failNext({ status: 403, resetAt: NOW + 30_000 });
      const e = await refusal(forge.pull({ ...R, number: 51 }));
      expect([e.kind, e.retryAfterMs]).toEqual(["rate_limited", 30_000]);
    });

    define(
      "§22.3 5xx is unavailable and 401 is auth; neither is retried inside the call",
      async (forge, m) => {
        m.addPull(R, { number: 52 });
        m.failNext({ status: 502 });
        expect((await refusal(forge.pull({ ...R, number: 52 }))).kind).toBe("unavailable");
        m.failNext({ status: 401 });
        expect((await refusal(forge.commits({ ...R, number: 52 }, 10))).kind).toBe("auth");
      },
    );
  });
}
