/**
 * Conformance: linked pull requests (spec §22.4–§22.7) through the
 * pull-request operations of a dispatch store, on any backend. Registered by
 * the dispatch store conformance group (`registerDispatchStoreContract`).
 */
import { findPullUrls } from "../../core/dispatch/links.js";
import { diffPull, type PullObservation } from "../../core/dispatch/pulls.js";
import type { Define } from "../../dispatch/testing/store-kit.js";
import { rejects, spec, started } from "../../dispatch/testing/store-kit.js";
import type { DispatchOps } from "../../store/dispatch/ops.js";
import { type PullOps, pullOps } from "../../store/pulls/ops.js";
import { q } from "../../store/tree/program.js";

const URL7 = "https://github.com/acme/widgets/pull/7";
const pr = (url = URL7) => findPullUrls(url)[0]!;
const OPEN: PullObservation = {
  state: "open",
  draft: false,
  headSha: "h1",
  mergeable: true,
  checks: "pending",
};

/** The outbox's facts whose type starts with `prefix`, in order. */
async function facts(
  ops: DispatchOps,
  prefix: string,
): Promise<{ type: string; subject: string; data: Record<string, unknown> }[]> {
  const rows = await ops.run(() =>
    q<{ type: string; subject: string; data: string }>(
      "SELECT type, subject, data FROM {s}.ratchet_outbox WHERE type LIKE 'pr.%' OR type = 'item.moved' ORDER BY seq",
    ),
  );
  return rows
    .filter((r) => r.type.startsWith(prefix))
    .map((r) => ({ type: r.type, subject: r.subject, data: JSON.parse(r.data) }));
}

/** An attempt settled succeeded whose item took an edge that waits on its pull request. */
async function waiting(
  ops: DispatchOps,
  prWait: { for: "pr-merged" | "pr-closed" | "pr-checks-success"; end?: "done" },
) {
  const { attempt, item } = await started(ops);
  const s = { state: "succeeded" as const, forced: null, sessionStopped: true, closeout: null };
  const route = {
    step: prWait.end ? "build" : "deploy",
    state: "open" as const,
    taken: {},
    resumeNext: false,
    notBefore: null,
    prWait,
  };
  const g = { id: attempt.id, version: attempt.version, holder: attempt.holder! };
  const r = await ops.settleAttempt(g, s, route, null, {});
  if (r.kind !== "moved") throw new Error("not settled");
  return { attempt, item };
}

async function observe(pulls: PullOps, seen: PullObservation) {
  const [c] = await pulls.claimDue(10, 30_000);
  if (!c) throw new Error("nothing due");
  const d = diffPull(c, seen);
  return pulls.record(c, seen, d.kind === "changed" ? d.facts : [], 60_000);
}

export function registerPullTests(it: Define): void {
  it("§22.4 linking is idempotent: one pull request, one link per attempt, pr.linked once", async ({
    ops,
    store,
    expect,
  }) => {
    const pulls = pullOps(store);
    const { attempt, item } = await started(ops);
    const a = await pulls.link(attempt.id, pr(), "url");
    const b = await pulls.link(attempt.id, pr("https://GitHub.com/ACME/widgets/pull/7"), "trailer");
    expect([a!.created, b!.created]).toEqual([true, false]);
    expect(b!.pull.id).toBe(a!.pull.id);
    expect(a!.pull.links.map((l) => [l.attemptId, l.itemId, l.source])).toEqual([
      [attempt.id, item.id, "url"],
    ]);
    expect((await facts(ops, "pr.")).map((f) => [f.type, f.subject])).toEqual([
      ["pr.linked", "pr:github.com/acme/widgets#7"],
    ]);
    expect(await pulls.link("999999", pr(), "url")).toBeNull();
  });

  it("§22.4 lists by item and attempt; bad input is refused and writes nothing", async ({
    ops,
    store,
    expect,
  }) => {
    const pulls = pullOps(store);
    const one = await started(ops);
    const item2 = await ops.addItem("p", "build", "{}");
    const two = await ops.startAttempt(spec(item2.id));
    if (two.kind !== "started") throw new Error("not started");
    await pulls.link(one.attempt.id, pr(), "url");
    await pulls.link(two.attempt.id, pr("https://github.com/acme/widgets/pull/8"), "manual");
    await pulls.link(two.attempt.id, pr(), "trailer");
    expect((await pulls.list({ limit: 10 })).map((p) => p.number)).toEqual([7, 8]);
    expect((await pulls.list({ itemId: one.item.id, limit: 10 })).map((p) => p.number)).toEqual([7]);
    expect((await pulls.list({ attemptId: two.attempt.id, limit: 10 })).map((p) => p.number)).toEqual([7, 8]);
    expect((await pulls.list({ itemId: two.item.id, limit: 10 }))[0]!.links).toHaveLength(2);
    const env = { expect } as Parameters<typeof rejects>[0];
    await rejects(
      env,
      pulls.link(one.attempt.id, { ...pr(), url: "https://evil.com/a/b/pull/1" }, "url"),
      "RATCHET_INVALID_INPUT",
    );
    await rejects(env, pulls.link("0", pr(), "url"), "RATCHET_INVALID_INPUT");
    await rejects(env, pulls.list({ limit: 0 }), "RATCHET_INVALID_INPUT");
    expect(await pulls.list({ limit: 10 })).toHaveLength(2);
  });

  it("§22.5 a due pull request is claimed by one watcher until its lease runs out", async ({
    ops,
    store,
    clock,
    expect,
  }) => {
    const pulls = pullOps(store);
    const { attempt } = await started(ops);
    await pulls.link(attempt.id, pr(), "url");
    const [c] = await pulls.claimDue(10, 30_000);
    expect(c!.number).toBe(7);
    expect(await pulls.claimDue(10, 30_000)).toEqual([]);
    clock.advance(30_000);
    const [again] = await pulls.claimDue(10, 30_000);
    expect(again!.version).toBe(c!.version + 1);
    // The first claim's write is stale now: it changes nothing and emits nothing.
    expect((await pulls.record(c!, OPEN, [{ type: "pr.state", data: {} }], 60_000)).kind).toBe("stale");
    expect((await facts(ops, "pr.")).map((f) => f.type)).toEqual(["pr.linked"]);
  });

  it("§22.6 a change is written with its facts; an unchanged look writes no fact; a final state stops the looks", async ({
    ops,
    store,
    clock,
    expect,
  }) => {
    const pulls = pullOps(store);
    const { attempt } = await started(ops);
    await pulls.link(attempt.id, pr(), "url");
    const w = await observe(pulls, OPEN);
    expect(w.kind === "written" && w.pull).toMatchObject({
      state: "open",
      checks: "pending",
      headSha: "h1",
      mergeable: true,
    });
    clock.advance(60_000);
    await observe(pulls, OPEN);
    clock.advance(60_000);
    await observe(pulls, { ...OPEN, state: "merged" });
    expect((await facts(ops, "pr.")).map((f) => f.type)).toEqual([
      "pr.linked",
      "pr.state",
      "pr.checks",
      "pr.state",
      "pr.merged",
    ]);
    expect((await facts(ops, "pr."))[3]!.data).toMatchObject({ from: "open", to: "merged", url: URL7 });
    clock.advance(3_600_000);
    expect(await pulls.claimDue(10, 30_000)).toEqual([]);
    expect((await pulls.list({ limit: 1 }))[0]!.final).toBe(true);
  });

  it("§22.5 a failed look counts failures and sets the next check; a good one resets them", async ({
    ops,
    store,
    clock,
    expect,
  }) => {
    const pulls = pullOps(store);
    const { attempt } = await started(ops);
    await pulls.link(attempt.id, pr(), "url");
    const [c] = await pulls.claimDue(10, 30_000);
    const f = await pulls.recordFailure(c!, "rate limited", 120_000);
    expect(f.kind === "written" && [f.pull.failures, f.pull.lastError, f.pull.nextCheckAt]).toEqual([
      1,
      "rate limited",
      clock.now() + 120_000,
    ]);
    clock.advance(119_999);
    expect(await pulls.claimDue(10, 30_000)).toEqual([]);
    clock.advance(1);
    const w = await observe(pulls, OPEN);
    expect(w.kind === "written" && [w.pull.failures, w.pull.lastError]).toEqual([0, null]);
  });

  it("§22.7 an item waiting on a merge starts nothing until its pull request is seen merged", async ({
    ops,
    store,
    clock,
    expect,
  }) => {
    const pulls = pullOps(store);
    const { attempt, item } = await waiting(ops, { for: "pr-merged" });
    expect((await ops.getItem(item.id))!).toMatchObject({
      state: "open",
      step: "deploy",
      prWait: { for: "pr-merged" },
    });
    expect((await ops.startAttempt(spec(item.id, { phase: "deploy" }))).kind).toBe("pr_wait");
    await pulls.link(attempt.id, pr(), "url");
    await observe(pulls, OPEN);
    expect((await ops.getItem(item.id))!.prWait).toEqual({ for: "pr-merged" });
    clock.advance(60_000);
    await observe(pulls, { ...OPEN, state: "merged" });
    expect((await ops.getItem(item.id))!.prWait).toBeNull();
    // The last item.moved is the wait's end (the settlement's own route came first).
    expect((await facts(ops, "item.moved")).at(-1)!.data).toMatchObject({
      item: item.id,
      from: { step: "deploy", state: "open" },
      to: { step: "deploy", state: "open" },
      cause: "pr-merged",
      pull: URL7,
    });
    expect((await ops.startAttempt(spec(item.id, { phase: "deploy" }))).kind).toBe("started");
  });

  it("§22.7 a pull request closed unmerged closes the waiting item; an end edge ends it once the wait is over", async ({
    ops,
    store,
    expect,
  }) => {
    const pulls = pullOps(store);
    const one = await waiting(ops, { for: "pr-merged" });
    await pulls.link(one.attempt.id, pr(), "url");
    await observe(pulls, { ...OPEN, state: "closed" });
    expect((await ops.getItem(one.item.id))!).toMatchObject({ state: "closed", prWait: null });
    const two = await waiting(ops, { for: "pr-closed", end: "done" });
    // Linked to a pull request already known closed: the link itself ends the wait.
    await pulls.link(two.attempt.id, pr(), "manual");
    expect((await ops.getItem(two.item.id))!).toMatchObject({ state: "done", prWait: null });
  });

  it("§22.7 an item routed onto a wait its pull request already meets moves on in the settlement", async ({
    ops,
    store,
    expect,
  }) => {
    const pulls = pullOps(store);
    const { attempt, item } = await started(ops);
    await pulls.link(attempt.id, pr(), "url");
    await observe(pulls, { ...OPEN, checks: "success" });
    const g = { id: attempt.id, version: attempt.version, holder: attempt.holder! };
    const s = { state: "succeeded" as const, forced: null, sessionStopped: true, closeout: null };
    const route = { step: "deploy", state: "open" as const, taken: {}, resumeNext: false, notBefore: null };
    await ops.settleAttempt(g, s, { ...route, prWait: { for: "pr-checks-success" } }, null, {});
    expect((await ops.getItem(item.id))!).toMatchObject({ state: "open", step: "deploy", prWait: null });
  });
}
