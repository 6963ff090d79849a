/**
 * Property-based tests of the task-tree rules (spec §12) on the real engine.
 *
 * fast-check generates random forests of one generic task, `node`, whose input
 * is its plan: which children to spawn (ordinary or background), whether to
 * wait for its ordinary children (allSettled or failFast), whether to sleep
 * (before spawning or after waiting), and whether to throw at the end. Random
 * aborts (`abort(id)`, `abortScope(scope)`, `abortScope(scope, { background })`)
 * land between ticks; ticks run with a random concurrency and claim limit, and
 * a FakeClock moves between ticks so sleeps end. The rules are checked
 *
 * - at every tick boundary and right after every abort (nothing is running
 *   then: a tick ends only after its settlements committed, spec §8.6),
 * - at every invocation of task code (run or onAbort), from inside the tick,
 * - on the final rows, once every task is terminal.
 *
 * Definitions are always registered, results are storable and there are no
 * `needs`, so `orphaned`, `faulted` and `upstream_failed` can not occur here:
 * the outcomes are asserted to be `completed`, `failed` or `aborted`.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Outcome } from "../../src/core/model.js";
import type { ChildOutcome, TaskContext } from "../../src/engine/context.js";
import { defineTask, type Ratchet } from "../../src/index.js";
import type { TaskRecord } from "../../src/store/store.js";
import { backend, FakeClock, forEachBackend, openRatchet } from "./helpers.js";

type Policy = "allSettled" | "failFast";

interface Plan {
  kids: Plan[];
  /** Spawned with background: true by its owner (ignored for a root). */
  bg: boolean;
  /** Wait for the ordinary (non-background) children. */
  wait: boolean;
  policy: Policy;
  /** Throw at the end (retry maxAttempts 1: the outcome is failed). */
  fail: boolean;
  /** 0: no sleep. */
  sleepMs: number;
  /** Sleep before spawning (else after waiting). */
  sleepFirst: boolean;
}

type AbortKind = "task" | "scope" | "scopeBackground";

interface AbortAction {
  /** Applied before the tick of this round. */
  round: number;
  /** Index (modulo) into the tasks (by id) or the roots. */
  pick: number;
  kind: AbortKind;
}

interface Scenario {
  roots: Plan[];
  aborts: AbortAction[];
  concurrency: number;
  max: number;
  /** Clock steps between ticks (cycled); a tick that ran nothing always advances 5 s. */
  advances: number[];
}

const planArb = (depth: number): fc.Arbitrary<Plan> =>
  fc.record({
    kids: depth === 0 ? fc.constant([]) : fc.array(planArb(depth - 1), { maxLength: 3 }),
    bg: fc.oneof({ arbitrary: fc.constant(false), weight: 3 }, { arbitrary: fc.constant(true), weight: 1 }),
    wait: fc.boolean(),
    policy: fc.constantFrom<Policy>("allSettled", "failFast"),
    fail: fc.oneof({ arbitrary: fc.constant(false), weight: 3 }, { arbitrary: fc.constant(true), weight: 1 }),
    sleepMs: fc.constantFrom(0, 0, 1_000, 5_000),
    sleepFirst: fc.boolean(),
  });

const scenarioArb: fc.Arbitrary<Scenario> = fc.record({
  roots: fc.array(planArb(2), { minLength: 1, maxLength: 2 }),
  aborts: fc.array(
    fc.record({
      round: fc.nat({ max: 6 }),
      pick: fc.nat({ max: 1_000 }),
      kind: fc.constantFrom<AbortKind>("task", "task", "task", "scope", "scopeBackground"),
    }),
    { maxLength: 4 },
  ),
  concurrency: fc.integer({ min: 1, max: 6 }),
  max: fc.constantFrom(1, 2, 3, 50),
  advances: fc.array(fc.constantFrom(0, 1_000, 5_000), { minLength: 1, maxLength: 6 }),
});

/** Rounds (tick + checks) within which every task must be terminal (spec §12.4 liveness). */
const MAX_ROUNDS = 600;
const MODEL_OUTCOMES: readonly Outcome[] = ["completed", "failed", "aborted"];

interface HandlerStart {
  id: number;
  mode: string;
  /** Ordinary owned work (ids) that was not terminal when the handler started. */
  liveBelow: number[];
}

/** Ordinary owned work of `id` in `rows`: every task below it through non-background children. */
function ordinaryBelow(id: number, rows: readonly TaskRecord[]): TaskRecord[] {
  const kids = new Map<number, TaskRecord[]>();
  for (const t of rows) {
    if (t.ownerId === null || t.background) continue;
    const list = kids.get(t.ownerId) ?? [];
    list.push(t);
    kids.set(t.ownerId, list);
  }
  const out: TaskRecord[] = [];
  const stack = [id];
  while (stack.length > 0) {
    for (const k of kids.get(stack.pop()!) ?? []) {
      out.push(k);
      stack.push(k.id);
    }
  }
  return out;
}

/** Runs one scenario through a fresh Ratchet and checks every rule; throws on the first violation. */
async function check(sc: Scenario): Promise<void> {
  const clock = new FakeClock(1_000_000);
  const violations: string[] = [];
  const plans = new Map<number, Plan>();
  const runs = new Map<number, number>();
  const handlerStarts: HandlerStart[] = [];
  const runAfterHandler = new Set<number>();
  const spawnIds = new Map<string, number>();
  const spawnedAll = new Set<number>();
  const waits: { waiter: number; ids: number[]; outs: ChildOutcome[] }[] = [];
  /** Tasks the spec says must end aborted, with the observation that says so. */
  const mustAbort = new Map<number, string>();
  /** Tasks seen completing: a held outcome is final (spec §12.4). */
  const held = new Map<number, Outcome>();
  /** First terminal outcome seen per task: it never changes (no retry() here). */
  const ended = new Map<number, Outcome>();

  let r!: Ratchet;
  const rows = async (): Promise<TaskRecord[]> =>
    (await r.store.list({ limit: 100_000 })).sort((a, b) => a.id - b.id);

  /**
   * The rules that hold at any instant. `quiet`: nothing is running (a tick
   * boundary, or right after an abort call), so settlements and their
   * reconciles have all committed.
   */
  const observe = (all: readonly TaskRecord[], where: string, quiet: boolean) => {
    const byId = new Map(all.map((t) => [t.id, t]));
    const fail = (msg: string) => violations.push(`${where}: ${msg}`);
    const pairs = new Set<string>();
    for (const t of all) {
      const owner = t.ownerId === null ? undefined : byId.get(t.ownerId);
      // spec §1.1: an outcome exactly when terminal.
      if ((t.status === "terminal") !== (t.outcome !== null))
        fail(`task ${t.id} is ${t.status} with outcome ${t.outcome}`);
      // spec §12.4: a completing task holds its outcome and has none yet.
      if (t.status === "completing") {
        if (t.heldOutcome === null || t.outcome !== null)
          fail(`completing task ${t.id} has heldOutcome ${t.heldOutcome}, outcome ${t.outcome}`);
        if (t.heldOutcome !== null) {
          const before = held.get(t.id);
          if (before !== undefined && before !== t.heldOutcome)
            fail(`task ${t.id} held ${before}, now holds ${t.heldOutcome}`);
          held.set(t.id, t.heldOutcome);
        }
      }
      if (t.status === "terminal") {
        const before = ended.get(t.id);
        if (before !== undefined && before !== t.outcome)
          fail(`terminal task ${t.id} changed outcome ${before} -> ${t.outcome}`);
        ended.set(t.id, t.outcome!);
        // spec §12.4: terminal only once no ordinary owned work is live.
        for (const k of all)
          if (k.ownerId === t.id && !k.background && k.status !== "terminal")
            fail(`task ${t.id} is terminal while its ordinary child ${k.id} is ${k.status}`);
      }
      // spec §12.5 / §7.2 / §4.5: a marked task that does not already hold an outcome ends aborted.
      if (t.abortRequested && t.status !== "terminal" && t.status !== "completing" && !mustAbort.has(t.id))
        mustAbort.set(t.id, `${where}: marked while ${t.status}`);
      // spec §12.1: (owner, name) is unique.
      if (t.ownerId !== null) {
        const key = `${t.ownerId}/${t.spawnName}`;
        if (pairs.has(key)) fail(`two children of task ${t.ownerId} are named ${t.spawnName}`);
        pairs.add(key);
      }
      // spec §12.1 / §12.2: a child inherits its owner's scope; a background edge detaches everything below it.
      if (owner) {
        if (t.scope !== owner.scope) fail(`child ${t.id} has scope ${t.scope}, its owner ${owner.scope}`);
        if (t.detached !== (t.background || owner.detached))
          fail(`task ${t.id} detached=${t.detached} (background ${t.background}, owner ${owner.detached})`);
      } else if (t.detached || t.background) fail(`root ${t.id} is background or detached`);
      if (!quiet) continue;
      // spec §8.6: a tick ends only after every settlement it started has committed.
      if (t.status === "running") fail(`task ${t.id} is running between ticks`);
      const liveKids = all.filter((k) => k.ownerId === t.id && !k.background && k.status !== "terminal");
      // spec §12.4: a hold is checked after every settlement of a child, so between ticks a
      // completing task still has live ordinary owned work.
      if (t.status === "completing" && liveKids.length === 0)
        fail(`task ${t.id} is completing without live ordinary children`);
      // spec §12.5: the cascade from a live owner with intent (a mark, or a held outcome other
      // than completed) has reached every live ordinary child.
      const intent =
        t.status !== "terminal" &&
        (t.abortRequested || (t.status === "completing" && t.heldOutcome !== "completed"));
      if (intent)
        for (const k of liveKids)
          if (!k.abortRequested) fail(`live child ${k.id} of task ${t.id} (with intent) has no abort mark`);
    }
  };

  const node = defineTask({
    name: "node",
    retry: { maxAttempts: 1 },
    async run(ctx: TaskContext, plan: Plan) {
      runs.set(ctx.taskId, (runs.get(ctx.taskId) ?? 0) + 1);
      if (handlerStarts.some((h) => h.id === ctx.taskId)) runAfterHandler.add(ctx.taskId);
      observe(await rows(), `run of task ${ctx.taskId}`, false);
      if (plan.sleepFirst && plan.sleepMs > 0) await ctx.sleep("first", plan.sleepMs);
      const ids: number[] = [];
      for (const [i, kid] of plan.kids.entries()) {
        const id = await ctx.spawn(`k${i}`, node, kid, { background: kid.bg });
        const key = `${ctx.taskId}/${i}`;
        const before = spawnIds.get(key);
        if (before !== undefined && before !== id)
          violations.push(`task ${ctx.taskId} spawned k${i} as ${before}, then as ${id}`);
        spawnIds.set(key, id);
        plans.set(id, kid);
        ids.push(id);
      }
      spawnedAll.add(ctx.taskId);
      const ordinary = ids.filter((_, i) => !plan.kids[i]!.bg);
      if (plan.wait && ordinary.length > 0) {
        const outs = await ctx.waitFor(ordinary, { policy: plan.policy });
        waits.push({ waiter: ctx.taskId, ids: ordinary, outs });
      }
      if (!plan.sleepFirst && plan.sleepMs > 0) await ctx.sleep("after", plan.sleepMs);
      if (plan.fail) throw new Error(`planned failure of task ${ctx.taskId}`);
      return { ran: ctx.taskId };
    },
    async onAbort(ctx: TaskContext) {
      const below = ordinaryBelow(ctx.taskId, await r.store.subtree(ctx.taskId, 100_000));
      handlerStarts.push({
        id: ctx.taskId,
        mode: ctx.mode,
        liveBelow: below.filter((t) => t.status !== "terminal").map((t) => t.id),
      });
      observe(await rows(), `abort handler of task ${ctx.taskId}`, false);
      return { compensated: ctx.taskId };
    },
  });

  r = await openRatchet([node], { clock });
  try {
    const scopes: string[] = [];
    for (const [i, plan] of sc.roots.entries()) {
      const scope = `scope-${i}`;
      const id = await r.enqueue(node, plan, { scope });
      plans.set(id, plan);
      scopes.push(scope);
    }

    const applyAbort = async (a: AbortAction) => {
      const pre = await rows();
      const preById = new Map(pre.map((t) => [t.id, t]));
      const premarked = new Set(pre.filter((t) => t.abortRequested).map((t) => t.id));
      let allowed: Set<number>;
      let what: string;
      if (a.kind === "task") {
        const target = pre[a.pick % pre.length]!;
        what = `abort(${target.id})`;
        const res = await r.abort(target.id);
        // The live ordinary subtree the mark must reach: live tasks below the target through
        // non-background children (a terminal task has no live ordinary owned work below it).
        allowed = new Set();
        if (target.status !== "terminal") {
          allowed.add(target.id);
          for (const t of ordinaryBelow(target.id, pre)) if (t.status !== "terminal") allowed.add(t.id);
        }
        const post = await rows();
        const after = post.find((t) => t.id === target.id)!;
        if (target.status === "terminal") {
          // spec §7.3: abort on a terminal task changes nothing and returns its state.
          expect(res, what).toEqual({ state: "terminal", outcome: target.outcome });
          expect(after, what).toEqual(target);
        } else if (target.status === "completing") {
          // spec §12.4: on a completing task abort only adds the mark; the outcome it holds is final,
          // and it may land inside the call once the work below ended aborted.
          if (res.state === "terminal")
            expect(res, what).toEqual({ state: "terminal", outcome: target.heldOutcome });
          else expect(res, what).toEqual({ state: "marked" });
        } else {
          // spec §7.1 / §12.5: a live task without a held outcome is aborted at once, or marked.
          expect(["marked", "aborted"], `${what} returned ${JSON.stringify(res)}`).toContain(res.state);
          if (res.state === "aborted")
            expect(after, what).toMatchObject({ status: "terminal", outcome: "aborted" });
        }
        for (const id of allowed) {
          const t = post.find((x) => x.id === id)!;
          // spec §12.5: the mark cascades to the whole live ordinary subtree.
          if (!t.abortRequested) violations.push(`${what}: task ${id} of its ordinary subtree is not marked`);
        }
        checkNewMarks(pre, post, premarked, allowed, what);
        observe(post, `after ${what}`, true);
      } else {
        const scope = scopes[a.pick % scopes.length]!;
        const background = a.kind === "scopeBackground";
        what = `abortScope(${scope}, { background: ${background} })`;
        const res = await r.abortScope(scope, { background });
        // spec §12.5: every live task of the scope that ordinary traversal reaches (with background, every one).
        allowed = new Set(
          pre
            .filter((t) => t.scope === scope && t.status !== "terminal" && (background || !t.detached))
            .map((t) => t.id),
        );
        const post = await rows();
        for (const id of allowed)
          if (!post.find((x) => x.id === id)!.abortRequested)
            violations.push(`${what}: live task ${id} of the scope is not marked`);
        const fresh = checkNewMarks(pre, post, premarked, allowed, what);
        expect(res.marked, `${what} reports the tasks it marked`).toBe(fresh);
        observe(post, `after ${what}`, true);
      }
      // Completing tasks keep their held outcome (spec §12.4); every other live task that the
      // abort reached must end aborted, even when it ended at once inside the call.
      for (const id of allowed) {
        const t = preById.get(id)!;
        if (t.status !== "completing" && !mustAbort.has(id)) mustAbort.set(id, `${what} while ${t.status}`);
      }
    };

    /**
     * No task got a new mark that the abort does not reach (spec §12.5): from the tasks it marks,
     * the cascade goes to live ordinary children (never through a background child), and a
     * failFast waiter whose member ends aborted marks its other live members (spec §12.3).
     * Returns the count of new marks.
     */
    const checkNewMarks = (
      pre: TaskRecord[],
      post: TaskRecord[],
      premarked: Set<number>,
      direct: Set<number>,
      what: string,
    ) => {
      const reach = new Set(direct);
      for (let grew = true; grew; ) {
        grew = false;
        for (const t of pre) {
          if (reach.has(t.id) || t.status === "terminal") continue;
          const owner = t.ownerId === null ? undefined : pre.find((o) => o.id === t.ownerId);
          const byCascade = !t.background && t.ownerId !== null && reach.has(t.ownerId);
          const byFailFast =
            owner !== undefined &&
            !t.background &&
            owner.status === "waiting" &&
            owner.waitOn === "tasks" &&
            owner.waitPolicy === "failFast" &&
            pre.some((m) => m.ownerId === owner.id && !m.background && reach.has(m.id));
          if (byCascade || byFailFast) {
            reach.add(t.id);
            grew = true;
          }
        }
      }
      let n = 0;
      for (const t of post) {
        if (!t.abortRequested || premarked.has(t.id)) continue;
        n++;
        if (!reach.has(t.id)) violations.push(`${what} marked task ${t.id}, which it does not reach`);
      }
      return n;
    };

    const lastAbort = Math.max(-1, ...sc.aborts.map((a) => a.round));
    let final: TaskRecord[] = [];
    let round = 0;
    for (; round < MAX_ROUNDS; round++) {
      for (const a of sc.aborts) if (a.round === round) await applyAbort(a);
      const report = await r.tick({ budgetMs: 3_600_000, concurrency: sc.concurrency, max: sc.max });
      final = await rows();
      observe(final, `after tick ${round}`, true);
      expect(violations).toEqual([]);
      if (round >= lastAbort && final.every((t) => t.status === "terminal")) break;
      clock.advance(report.ran === 0 ? 5_000 : sc.advances[round % sc.advances.length]!);
    }

    // spec §12.4 (liveness): every task reaches terminal within a bounded number of ticks.
    const live = final.filter((t) => t.status !== "terminal").map((t) => `${t.id}:${t.status}`);
    expect(live, `live after ${MAX_ROUNDS} rounds`).toEqual([]);
    expect(violations).toEqual([]);

    const byId = new Map(final.map((t) => [t.id, t]));
    for (const t of final) {
      const plan = plans.get(t.id)!;
      const planned: Outcome = plan.fail ? "failed" : "completed";
      const label = `task ${t.id} (plan fail=${plan.fail}, marked=${t.abortRequested}, runs=${runs.get(t.id) ?? 0})`;
      // spec §1.1 / §12.6 / §5.5: no needs, registered code, storable results: only these outcomes.
      expect(MODEL_OUTCOMES, label).toContain(t.outcome);
      // spec §12.5: an abort reached it while it was live and held no outcome: it ends aborted.
      if (mustAbort.has(t.id)) expect(t.outcome, `${label}: ${mustAbort.get(t.id)}`).toBe("aborted");
      // spec §12.4: a held outcome is final.
      if (held.has(t.id)) expect(t.outcome, `${label} held ${held.get(t.id)}`).toBe(held.get(t.id));
      // Without a mark the task ends as its code decided; with one, aborted or the outcome it held.
      if (!t.abortRequested) expect(t.outcome, label).toBe(planned);
      else expect([planned, "aborted"], label).toContain(t.outcome);
      // spec §12.5: only an abort mark aborts.
      if (t.outcome === "aborted") expect(t.abortRequested, label).toBe(true);

      // spec §12.5: the handler runs once, for a task that ran its code and ends aborted; it ran
      // in abort mode, no code of the task ran after it, and its return value is the result.
      const starts = handlerStarts.filter((h) => h.id === t.id);
      const ranCode = (runs.get(t.id) ?? 0) > 0;
      expect(starts.length, `${label}: abort handler runs`).toBe(ranCode && t.outcome === "aborted" ? 1 : 0);
      if (starts.length === 1) {
        expect(starts[0]!.mode, label).toBe("abort");
        expect(t.result, label).toEqual({ compensated: t.id });
      } else if (t.outcome === "completed") expect(t.result, label).toEqual({ ran: t.id });
      expect(runAfterHandler.has(t.id), `${label}: code ran after its abort handler`).toBe(false);

      // spec §12.1: children match the plan: one per spawn name, with its input and background flag;
      // all of them once the code got past its spawns.
      const kids = final.filter((k) => k.ownerId === t.id);
      expect(kids.length, label).toBeLessThanOrEqual(plan.kids.length);
      if (spawnedAll.has(t.id)) expect(kids.length, label).toBe(plan.kids.length);
      for (const k of kids) {
        const i = Number(k.spawnName!.slice(1));
        expect(k.spawnName, label).toBe(`k${i}`);
        expect(k.input, label).toEqual(plan.kids[i]);
        expect(k.background, label).toBe(plan.kids[i]!.bg);
        expect(spawnIds.get(`${t.id}/${i}`), label).toBe(k.id);
      }
    }

    // spec §12.5: no abort handler started before its ordinary owned work was terminal.
    for (const h of handlerStarts)
      expect(h.liveBelow, `ordinary owned work of task ${h.id} live when its handler started`).toEqual([]);

    // spec §12.3: waitFor returned every member's final outcome, in the order asked.
    for (const w of waits) {
      expect(
        w.outs.map((o) => o.id),
        `wait of task ${w.waiter}`,
      ).toEqual(w.ids);
      for (const o of w.outs) {
        const m = byId.get(o.id)!;
        expect(o.outcome, `member ${o.id} of the wait of task ${w.waiter}`).toBe(m.outcome);
        expect(o.result, `member ${o.id} of the wait of task ${w.waiter}`).toEqual(m.result);
      }
    }
  } finally {
    await r.close();
  }
}

forEachBackend(() => {
  describe("task trees (spec §12, property-based)", () => {
    it("spec §12.1 / §12.3 / §12.4 / §12.5 (property): random forests with random aborts and failures: abort handlers start after their ordinary owned work is terminal, no terminal owner has a live ordinary child, every task ends terminal with the outcome the rules give, spawns are idempotent", async () => {
      await fc.assert(
        fc.asyncProperty(scenarioArb, async (sc) => {
          await check(sc);
        }),
        { numRuns: backend() === "sqlite" ? 100 : 25 },
      );
    });
  });
});
