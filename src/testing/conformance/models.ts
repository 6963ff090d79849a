/** Conformance: circuit breakers and the usage ledger (spec §18.6, §18.8), through the Store interface only. */
import type { BreakerConfig } from "../../core/breaker.js";
import type { Fence, Store, TaskId } from "../../store/store.js";
import type { UsageRow } from "../../store/usage/ops.js";
import { claimId, type Define, fenceOf, ids, newTask, rejection } from "./kit.js";

const CFG: BreakerConfig = { failures: 3, windowMs: 10_000, coolDownMs: 5_000, probeMs: 20_000 };
const KEY = "faux/m1";

function row(key: string, over: Partial<UsageRow> = {}): UsageRow {
  return {
    key,
    status: "committed",
    conversationId: "c1",
    taskId: null,
    provider: "faux",
    model: "m1",
    route: "faux/m1",
    input: 10,
    output: 5,
    cached: 2,
    reasoning: 1,
    cost: 0.25,
    ...over,
  };
}

async function claimed(store: Store): Promise<{ id: TaskId; fence: Fence }> {
  const [id] = await ids(store, [newTask()]);
  const c = await claimId(store, id!);
  return { id: id!, fence: fenceOf(c) };
}

async function fail(store: Store, n: number, probe = false): Promise<void> {
  for (let i = 0; i < n; i++) await store.breakers.reportBreaker(KEY, false, probe, CFG);
}

export function registerModelTests(it: Define): void {
  it("§18.6 a breaker is closed until N failures in its window; then open, refusing until the cool-down", async ({
    store,
    clock,
    expect,
  }) => {
    expect(await store.breakers.admitBreaker(KEY, CFG)).toEqual({ admit: true, probe: false });
    expect(await store.breakers.listBreakers()).toEqual([]);
    await fail(store, 2);
    // Outside the window the count starts again.
    clock.advance(10_000);
    await fail(store, 2);
    expect((await store.breakers.listBreakers())[0]).toMatchObject({
      key: KEY,
      state: "closed",
      failures: 2,
    });
    expect(await store.breakers.admitBreaker(KEY, CFG)).toEqual({ admit: true, probe: false });
    await fail(store, 1);
    expect((await store.breakers.listBreakers())[0]).toMatchObject({ state: "open" });
    const r = await store.breakers.admitBreaker(KEY, CFG);
    expect(r.admit).toBe(false);
    clock.advance(4_999);
    expect((await store.breakers.admitBreaker(KEY, CFG)).admit).toBe(false);
  });

  it("§18.6 a success in closed resets the failure count", async ({ store, expect }) => {
    await fail(store, 2);
    await store.breakers.reportBreaker(KEY, true, false, CFG);
    await fail(store, 2);
    expect((await store.breakers.listBreakers())[0]).toMatchObject({ state: "closed", failures: 2 });
  });

  it("§18.6 after the cool-down exactly one of many concurrent requests is admitted as the probe", async ({
    store,
    clock,
    expect,
  }) => {
    await fail(store, 3);
    clock.advance(5_000);
    const answers = await Promise.all(Array.from({ length: 8 }, () => store.breakers.admitBreaker(KEY, CFG)));
    expect(answers.filter((a) => a.admit)).toEqual([{ admit: true, probe: true }]);
    expect((await store.breakers.listBreakers())[0]).toMatchObject({ state: "half_open" });
    // A report from a request that was not the probe moves nothing.
    await store.breakers.reportBreaker(KEY, true, false, CFG);
    await store.breakers.reportBreaker(KEY, false, false, CFG);
    expect((await store.breakers.listBreakers())[0]).toMatchObject({ state: "half_open" });
  });

  it("§18.6 the probe's success closes the breaker; its failure opens it for a new cool-down", async ({
    store,
    clock,
    expect,
  }) => {
    await fail(store, 3);
    clock.advance(5_000);
    expect(await store.breakers.admitBreaker(KEY, CFG)).toEqual({ admit: true, probe: true });
    await store.breakers.reportBreaker(KEY, false, true, CFG);
    expect((await store.breakers.listBreakers())[0]).toMatchObject({ state: "open" });
    expect((await store.breakers.admitBreaker(KEY, CFG)).admit).toBe(false);
    clock.advance(5_000);
    expect(await store.breakers.admitBreaker(KEY, CFG)).toEqual({ admit: true, probe: true });
    await store.breakers.reportBreaker(KEY, true, true, CFG);
    expect((await store.breakers.listBreakers())[0]).toMatchObject({ state: "closed", failures: 0 });
    expect(await store.breakers.admitBreaker(KEY, CFG)).toEqual({ admit: true, probe: false });
  });

  it("§18.6 a probe that never reports lapses after probeMs and the next request probes", async ({
    store,
    clock,
    expect,
  }) => {
    await fail(store, 3);
    clock.advance(5_000);
    expect(await store.breakers.admitBreaker(KEY, CFG)).toEqual({ admit: true, probe: true });
    clock.advance(19_999);
    expect((await store.breakers.admitBreaker(KEY, CFG)).admit).toBe(false);
    clock.advance(1);
    expect(await store.breakers.admitBreaker(KEY, CFG)).toEqual({ admit: true, probe: true });
  });

  it("§18.6 breakers are per key; reset forgets one; a bad key is refused", async ({ store, expect }) => {
    await fail(store, 3);
    expect(await store.breakers.admitBreaker("faux/m2", CFG)).toEqual({ admit: true, probe: false });
    expect(await store.breakers.resetBreaker(KEY)).toBe(true);
    expect(await store.breakers.resetBreaker(KEY)).toBe(false);
    expect(await store.breakers.admitBreaker(KEY, CFG)).toEqual({ admit: true, probe: false });
    await rejection(() => store.breakers.admitBreaker("", CFG), "RATCHET_INVALID_INPUT");
    await rejection(
      () => store.breakers.reportBreaker(KEY, false, false, { ...CFG, failures: 0 }),
      "RATCHET_INVALID_INPUT",
    );
    await rejection(
      () => store.breakers.reportBreaker("x".repeat(513), false, false, CFG),
      "RATCHET_INVALID_INPUT",
    );
  });

  it("§18.8 a usage row is written once per key; totals by conversation, task, provider, model and since", async ({
    store,
    clock,
    expect,
  }) => {
    const { id } = await claimed(store);
    expect(await store.usage.recordUsage([row("a"), row("b", { taskId: id, model: "m2" })], null)).toBe("ok");
    expect(await store.usage.recordUsage([row("a", { input: 999 })], null)).toBe("ok");
    const since = clock.advance(1_000);
    await store.usage.recordUsage(
      [row("c", { conversationId: null, provider: "oa", status: "failed" })],
      null,
    );
    expect(await store.usage.usageTotals()).toEqual({
      responses: 3,
      failed: 1,
      input: 30,
      output: 15,
      cached: 6,
      reasoning: 3,
      cost: 0.75,
    });
    expect((await store.usage.usageTotals({ conversationId: "c1" })).responses).toBe(2);
    expect((await store.usage.usageTotals({ taskId: id })).responses).toBe(1);
    expect((await store.usage.usageTotals({ provider: "oa" })).failed).toBe(1);
    expect((await store.usage.usageTotals({ model: "m2" })).input).toBe(10);
    expect((await store.usage.usageTotals({ since })).responses).toBe(1);
    expect((await store.usage.usageByModel()).map((m) => [m.provider, m.model, m.responses])).toEqual([
      ["faux", "m1", 1],
      ["faux", "m2", 1],
      ["oa", "m1", 1],
    ]);
    const listed = await store.usage.listUsage({}, 2);
    expect(listed.map((r) => r.key)).toEqual(["c", "b"]);
    expect(listed[1]).toMatchObject({ taskId: id, status: "committed", input: 10 });
  });

  it("§18.8 a step and its usage commit together, once; a stale fence writes neither", async ({
    store,
    expect,
  }) => {
    const { id, fence } = await claimed(store);
    const w = {
      fence,
      name: "turn",
      result: JSON.stringify({ text: "hi" }),
      rows: [row(`t${id}`, { taskId: id })],
    };
    expect(await store.usage.commitStepWithUsage(w)).toBe("ok");
    expect(await store.usage.commitStepWithUsage(w)).toBe("ok");
    expect((await store.loadSteps(id)).get("turn")).toEqual({ text: "hi" });
    expect((await store.usage.usageTotals({ taskId: id })).responses).toBe(1);
    // The ordinary step commit of the same name afterwards changes nothing (a retried commit).
    expect(
      await store.commitSteps([{ fence, name: "turn", result: JSON.stringify({ text: "hi" }) }]),
    ).toEqual(["ok"]);
    expect((await store.settle([{ kind: "complete", fence, result: "null" }]))[0]).toBe("ok");
    const late = { ...w, name: "late", rows: [row("late", { taskId: id })] };
    expect(await store.usage.commitStepWithUsage(late)).toBe("lease_lost");
    expect(await store.usage.recordUsage([row("late2")], fence)).toBe("lease_lost");
    expect((await store.loadSteps(id)).has("late")).toBe(false);
    expect((await store.usage.usageTotals()).responses).toBe(1);
  });

  it("§18.8 a group commit fences each step write on its own", async ({ store, expect }) => {
    const a = await claimed(store);
    const b = await claimed(store);
    expect((await store.settle([{ kind: "complete", fence: b.fence, result: "null" }]))[0]).toBe("ok");
    const w = (x: { id: TaskId; fence: Fence }) => ({
      fence: x.fence,
      name: "turn",
      result: "1",
      rows: [row(`g${x.id}`, { taskId: x.id })],
      streams: [],
    });
    // The group commit is commitTurns (spec §18.10); a turn that streamed nothing carries no batch.
    expect(await store.usage.commitTurns([w(a), w(b)])).toEqual([
      { streams: [], step: "ok" },
      { streams: [], step: "lease_lost" },
    ]);
    expect((await store.usage.usageTotals()).responses).toBe(1);
    expect((await store.loadSteps(a.id)).get("turn")).toBe(1);
    expect(await store.usage.commitTurns([])).toEqual([]);
  });

  it("§18.8 a batch with one bad row writes nothing", async ({ store, expect }) => {
    const bad: UsageRow[] = [row("ok1"), row("neg", { input: -1 })];
    await rejection(() => store.usage.recordUsage(bad, null), "RATCHET_INVALID_INPUT");
    await rejection(
      () => store.usage.recordUsage([row("x", { cost: Number.NaN })], null),
      "RATCHET_INVALID_INPUT",
    );
    await rejection(() => store.usage.recordUsage([row("")], null), "RATCHET_INVALID_INPUT");
    await rejection(
      () =>
        store.usage.recordUsage(
          Array.from({ length: 101 }, (_, i) => row(`k${i}`)),
          null,
        ),
      "RATCHET_INVALID_INPUT",
    );
    await rejection(() => store.usage.usageTotals({ since: Number.NaN }), "RATCHET_INVALID_INPUT");
    expect((await store.usage.usageTotals()).responses).toBe(0);
  });
}
