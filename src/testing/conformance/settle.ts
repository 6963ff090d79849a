/** Conformance: fenced holder writes and settlements (spec §3.7–§3.9, §4.2, §4.4, §4.5, §5.2, §8.2). */
import { AbortedError, LeaseLostError } from "../../errors.js";
import type { Fence } from "../../store/store.js";
import {
  abortState,
  claimReq,
  type Define,
  ERR,
  fenceOf,
  GRACE,
  ids,
  must,
  newTask,
  rejection,
} from "./kit.js";

export function registerSettleTests(it: Define): void {
  it("§3.7 a stale holder's step, heartbeat, progress and every settlement kind are refused and change nothing", async ({
    clock,
    store,
    expect,
  }) => {
    const [id] = await ids(store, [newTask({ maxMs: 1_000 })]);
    const [old] = await store.claim(claimReq({ workerId: "old" }));
    const stale = fenceOf(old!);
    clock.advance(1_000 + GRACE);
    const [cur] = await store.claim(claimReq({ workerId: "new" }));
    expect(cur!.epoch).toBe(stale.token + 1);
    const before = await must(store, id!);
    const eventsBefore = await store.events(id!);

    expect(await rejection(() => store.commitStep(stale, "s", "1"), "RATCHET_LEASE_LOST")).toBeInstanceOf(
      LeaseLostError,
    );
    await rejection(() => store.heartbeat(stale, 1_000, GRACE), "RATCHET_LEASE_LOST");
    await rejection(() => store.progress(stale, 0.5, "x"), "RATCHET_LEASE_LOST");
    const results = await store.settle([
      { kind: "complete", fence: stale, result: "1" },
      { kind: "retry", fence: stale, delayMs: 5, error: ERR },
      { kind: "fail", fence: stale, outcome: "failed", error: ERR },
      { kind: "fail", fence: stale, outcome: "faulted", error: ERR },
      { kind: "sleep", fence: stale, step: "nap", delayMs: 5 },
      { kind: "aborted", fence: stale, error: null },
      { kind: "release", fence: stale },
    ]);
    expect(results).toEqual(Array(7).fill("lease_lost"));
    expect(await store.get(id!)).toEqual(before);
    expect(await store.steps(id!)).toEqual([]);
    expect(await store.events(id!)).toEqual(eventsBefore);

    // The current holder's write lands, in the same call as a stale one.
    const fresh = fenceOf(cur!);
    expect(
      await store.settle([
        { kind: "complete", fence: stale, result: '"stale"' },
        { kind: "complete", fence: fresh, result: '"fresh"' },
      ]),
    ).toEqual(["lease_lost", "ok"]);
    expect((await must(store, id!)).result).toBe("fresh");
  });

  it("§3.7 / §6.2 a settle batch that completes one claim twice answers ok, then lease_lost, and releases the dependents once", async ({
    store,
    expect,
  }) => {
    const [a, b] = await ids(store, [newTask(), newTask()]);
    const [d] = await ids(store, [newTask({ needs: [{ id: a! }, { id: b! }] })]);
    const claimed = await store.claim(claimReq({ limit: 1 }));
    expect(claimed.map((c) => c.id)).toEqual([a]);
    const fence = fenceOf(claimed[0]!);
    expect(
      await store.settle([
        { kind: "complete", fence, result: "1" },
        { kind: "complete", fence, result: "2" },
      ]),
    ).toEqual(["ok", "lease_lost"]);
    const done = await must(store, a!);
    expect([done.outcome, done.result]).toEqual(["completed", 1]);
    // D still waits for B: A's completion counted once.
    const dep = await must(store, d!);
    expect([dep.status, dep.needsPending]).toEqual(["waiting", 1]);
  });

  it("§3.7 / §6.2 a settle batch with a refused completion applies the others, each answered on its own", async ({
    store,
    expect,
  }) => {
    const [a, b, c] = await ids(store, [newTask(), newTask(), newTask()]);
    const [d] = await ids(store, [newTask({ needs: [{ id: c! }] })]);
    const claimed = await store.claim(claimReq({ limit: 3 }));
    expect(claimed.map((t) => t.id)).toEqual([a, b, c]);
    const [fa, fb, fc] = claimed.map(fenceOf);
    expect(
      await store.settle([
        { kind: "complete", fence: { ...fa!, token: fa!.token + 5 }, result: '"wrong"' },
        { kind: "complete", fence: fb!, result: '"b"' },
        { kind: "complete", fence: fc!, result: '"c"' },
      ]),
    ).toEqual(["lease_lost", "ok", "ok"]);
    expect((await must(store, a!)).status).toBe("running");
    for (const [id, r] of [
      [b, "b"],
      [c, "c"],
    ] as const) {
      const t = await must(store, id!);
      expect([t.outcome, t.result]).toEqual(["completed", r]);
    }
    // C's completion released its dependent.
    expect((await must(store, d!)).status).toBe("pending");
  });

  it("§3.7 / §4.5 a settle batch of plain completions with an abort-marked task and a repeated claim answers each in its place", async ({
    store,
    expect,
  }) => {
    const [a, b, c] = await ids(store, [newTask(), newTask(), newTask()]);
    const claimed = await store.claim(claimReq({ limit: 3 }));
    expect(claimed.map((t) => t.id)).toEqual([a, b, c]);
    const [fa, fb, fc] = claimed.map(fenceOf);
    expect(abortState(await store.abort(b!))).toEqual({ state: "marked" });
    expect(
      await store.settle([
        { kind: "complete", fence: fc!, result: '"c"' },
        { kind: "complete", fence: fb!, result: '"b"' },
        { kind: "complete", fence: fa!, result: '"a"' },
        { kind: "complete", fence: fc!, result: '"c again"' },
      ]),
    ).toEqual(["ok", "abort_marked", "ok", "lease_lost"]);
    expect(await must(store, a!)).toMatchObject({ outcome: "completed", result: "a" });
    expect(await must(store, c!)).toMatchObject({ outcome: "completed", result: "c" });
    expect(await must(store, b!)).toMatchObject({ status: "running", abortRequested: true });
  });

  it("§3.7 / §6.2 a settle batch whose completions all apply answers each ok, releases the dependents of the one that has them, and applies the retry beside them", async ({
    store,
    expect,
  }) => {
    const [a, b, c, e] = await ids(store, [newTask(), newTask(), newTask(), newTask()]);
    const [d] = await ids(store, [newTask({ needs: [{ id: b! }] })]);
    const claimed = await store.claim(claimReq({ limit: 4 }));
    expect(claimed.map((t) => t.id)).toEqual([a, b, c, e]);
    const [fa, fb, fc, fe] = claimed.map(fenceOf);
    // Completions only, one with a dependent.
    expect(
      await store.settle([
        { kind: "complete", fence: fa!, result: '"a"' },
        { kind: "complete", fence: fb!, result: '"b"' },
      ]),
    ).toEqual(["ok", "ok"]);
    expect((await must(store, d!)).status).toBe("pending");
    // Completions and a retry in one batch.
    expect(
      await store.settle([
        { kind: "retry", fence: fc!, delayMs: 60_000, error: ERR },
        { kind: "complete", fence: fe!, result: '"e"' },
      ]),
    ).toEqual(["ok", "ok"]);
    for (const [id, r] of [
      [a, "a"],
      [b, "b"],
      [e, "e"],
    ] as const) {
      const t = await must(store, id!);
      expect([t.outcome, t.result]).toEqual(["completed", r]);
    }
    expect((await must(store, c!)).status).toBe("waiting");
  });

  it("§3.7 a holder's writes are refused once its task is settled", async ({ store, expect }) => {
    const [id] = await ids(store, [newTask()]);
    const [c] = await store.claim(claimReq());
    const fence = fenceOf(c!);
    expect(await store.settle([{ kind: "complete", fence, result: "null" }])).toEqual(["ok"]);
    await rejection(() => store.commitStep(fence, "late", "1"), "RATCHET_LEASE_LOST");
    await rejection(() => store.heartbeat(fence, 1_000, GRACE), "RATCHET_LEASE_LOST");
    await rejection(() => store.progress(fence, 1, null), "RATCHET_LEASE_LOST");
    expect(await store.settle([{ kind: "fail", fence, outcome: "failed", error: ERR }])).toEqual([
      "lease_lost",
    ]);
    expect(await store.settle([{ kind: "release", fence }])).toEqual(["lease_lost"]);
    expect((await must(store, id!)).outcome).toBe("completed");
    // A fence for a task that does not exist is refused too.
    await rejection(
      () => store.commitStep({ taskId: 987_654, token: 1, claimedAt: 0 }, "s", "1"),
      "RATCHET_LEASE_LOST",
    );
    expect(
      await store.settle([
        { kind: "complete", fence: { taskId: 987_654, token: 1, claimedAt: 0 }, result: "1" },
      ]),
    ).toEqual(["lease_lost"]);
  });

  it("§4.5 / §7.2 an abort mark refuses the holder's step, heartbeat, progress and outcome writes; 'aborted' is accepted", async ({
    store,
    expect,
  }) => {
    const [id] = await ids(store, [newTask()]);
    const [c] = await store.claim(claimReq());
    const fence = fenceOf(c!);
    expect(abortState(await store.abort(id!))).toEqual({ state: "marked" });
    expect(await must(store, id!)).toMatchObject({ status: "running", abortRequested: true });
    expect(await rejection(() => store.commitStep(fence, "s", "1"), "RATCHET_ABORTED")).toBeInstanceOf(
      AbortedError,
    );
    await rejection(() => store.heartbeat(fence, 1_000, GRACE), "RATCHET_ABORTED");
    await rejection(() => store.progress(fence, 0.1, null), "RATCHET_ABORTED");
    const results = await store.settle([
      { kind: "complete", fence, result: "1" },
      { kind: "retry", fence, delayMs: 5, error: ERR },
      { kind: "fail", fence, outcome: "failed", error: ERR },
      { kind: "sleep", fence, step: "n", delayMs: 10 },
    ]);
    expect(results).toEqual(Array(4).fill("abort_marked"));
    expect(await store.steps(id!)).toEqual([]);
    expect((await must(store, id!)).status).toBe("running");
    expect(await store.settle([{ kind: "aborted", fence, error: null }])).toEqual(["ok"]);
    expect(await must(store, id!)).toMatchObject({ status: "terminal", outcome: "aborted", lockedBy: null });
    expect((await store.events(id!)).map((e) => e.kind)).toEqual(["abort_requested", "aborted"]);
  });

  it("§3.8 a heartbeat extends the lease to now + maxMs + grace", async ({ clock, store, expect }) => {
    const [id] = await ids(store, [newTask({ maxMs: 1_000 })]);
    const [c] = await store.claim(claimReq());
    clock.advance(900);
    await store.heartbeat(fenceOf(c!), 1_000, GRACE);
    expect((await must(store, id!)).leaseUntil).toBe(clock.now() + 1_000 + GRACE);
    // The old lease end has passed, the new one has not: no reclaim.
    clock.advance(1_000 + GRACE - 1);
    expect(await store.claim(claimReq({ workerId: "other" }))).toEqual([]);
    clock.advance(1);
    expect(await store.claim(claimReq({ workerId: "other" }))).toHaveLength(1);
  });

  it("§4.8 progress stores the fraction and note", async ({ store, expect }) => {
    const [id] = await ids(store, [newTask()]);
    const [c] = await store.claim(claimReq());
    await store.progress(fenceOf(c!), 0.25, "a quarter");
    expect(await must(store, id!)).toMatchObject({ progress: 0.25, progressNote: "a quarter" });
    await store.progress(fenceOf(c!), 1, null);
    expect(await must(store, id!)).toMatchObject({ progress: 1, progressNote: null });
  });

  it("§3.9 the token only increases, across release and retry()", async ({ clock, store, expect }) => {
    const [id] = await ids(store, [newTask({ maxMs: 1_000 })]);
    const tokens: number[] = [];
    const [a] = await store.claim(claimReq());
    tokens.push(a!.epoch);
    await store.settle([{ kind: "release", fence: fenceOf(a!) }]);
    expect((await must(store, id!)).epoch).toBe(a!.epoch);
    const [b] = await store.claim(claimReq());
    tokens.push(b!.epoch);
    await store.settle([{ kind: "fail", fence: fenceOf(b!), outcome: "failed", error: ERR }]);
    await store.retry(id!);
    expect((await must(store, id!)).epoch).toBe(b!.epoch);
    const [c] = await store.claim(claimReq());
    tokens.push(c!.epoch);
    clock.advance(1_000 + GRACE);
    const [d] = await store.claim(claimReq());
    tokens.push(d!.epoch);
    expect(tokens).toEqual([1, 2, 3, 4]);
    // The released holder's fence (token 1) can never match again.
    await rejection(
      () => store.commitStep({ taskId: id!, token: 1, claimedAt: a!.claimedAt }, "x", "1"),
      "RATCHET_LEASE_LOST",
    );
  });

  it("§4.2 / §3.7 commitSteps group-commits steps of several holders, each fenced on its own, in item order", async ({
    clock,
    store,
    expect,
  }) => {
    const [a, b, c] = await ids(store, [
      newTask({ maxMs: 1_000 }),
      newTask({ maxMs: 1_000 }),
      newTask({ maxMs: 1_000 }),
    ]);
    const claimed = await store.claim(claimReq({ limit: 3 }));
    const fence = (id: number) => fenceOf(claimed.find((t) => t.id === id)!);
    expect(abortState(await store.abort(c!))).toEqual({ state: "marked" });
    const stale = { ...fence(b!), token: fence(b!).token - 1 };
    const results = await store.commitSteps([
      { fence: fence(a!), name: "x", result: "1" },
      { fence: stale, name: "x", result: '"stale"' },
      { fence: fence(b!), name: "x", result: "2" },
      { fence: fence(a!), name: "y", result: "3" },
      { fence: fence(c!), name: "x", result: "4" },
    ]);
    expect(results).toEqual(["ok", "lease_lost", "ok", "ok", "abort_marked"]);
    expect((await store.steps(a!)).map((st) => [st.name, st.result])).toEqual([
      ["x", 1],
      ["y", 3],
    ]);
    expect((await store.steps(b!)).map((st) => st.result)).toEqual([2]);
    expect(await store.steps(c!)).toEqual([]);
    // Repeating a group whose acknowledgement was lost changes nothing.
    clock.advance(1);
    expect(await store.commitSteps([{ fence: fence(a!), name: "x", result: '"again"' }])).toEqual(["ok"]);
    expect((await store.steps(a!)).map((st) => st.result)).toEqual([1, 3]);
    expect(await store.commitSteps([])).toEqual([]);
  });

  it("§4.2 / §3.7 a batch of steps larger than a store's statement chunk is fenced item by item, in item order, across chunk boundaries", async ({
    store,
    expect,
  }) => {
    // 40 tasks, two steps each, named against the alphabet ("b" taken before "a", so that the stored
    // order can only be the order given), with stale fences and a marked task spread over the batch,
    // and the marked task's abort-mode write in a later chunk: 93 items, more than two chunks of 32.
    const tasks = await ids(
      store,
      Array.from({ length: 40 }, () => newTask({ maxMs: 60_000 })),
    );
    const claimed = await store.claim(claimReq({ limit: 40 }));
    expect(claimed).toHaveLength(40);
    const fence = (id: number) => fenceOf(claimed.find((t) => t.id === id)!);
    const marked = tasks[33]!;
    expect(abortState(await store.abort(marked))).toEqual({ state: "marked" });
    const items: { fence: Fence; name: string; result: string }[] = [];
    const want: string[] = [];
    tasks.forEach((id, i) => {
      for (const [name, result] of [
        ["b", i],
        ["a", 100 + i],
      ] as const) {
        if (i % 7 === 3) {
          items.push({ fence: { ...fence(id), token: fence(id).token - 1 }, name, result: '"stale"' });
          want.push("lease_lost");
        }
        items.push({ fence: fence(id), name, result: String(result) });
        want.push(id === marked ? "abort_marked" : "ok");
      }
      // The marked task's abort handler writes with the mark (spec §12.5): its step is kept.
      if (id === marked) {
        items.push({ fence: { ...fence(id), mode: "abort" }, name: "undo", result: "7" });
        want.push("ok");
      }
    });
    // A repeat of the first item: already stored by this batch, so it changes nothing and is "ok".
    items.push({ ...items[0]!, result: '"again"' });
    want.push("ok");
    expect(items.length).toBeGreaterThan(64);
    expect(await store.commitSteps(items)).toEqual(want);
    for (const [i, id] of tasks.entries()) {
      const steps = (await store.steps(id)).map((st) => [st.name, st.result]);
      expect(steps).toEqual(
        id === marked
          ? [["undo", 7]]
          : [
              ["b", i],
              ["a", 100 + i],
            ],
      );
    }
  });

  it("§4.2 a claim marks a task fresh (no stored steps to read) only if it never started: not after a give-back that kept its committed step", async ({
    store,
    expect,
  }) => {
    const [id] = await ids(store, [newTask({ maxMs: 1_000 })]);
    const [a] = await store.claim(claimReq());
    // Both bundled stores know it for a claim this small (ClaimedTask.fresh may say false when unknown).
    expect(a).toMatchObject({ id, fresh: true, attempts: 1 });
    expect(await store.commitSteps([{ fence: fenceOf(a!), name: "one", result: "1" }])).toEqual(["ok"]);
    expect(await store.settle([{ kind: "release", fence: fenceOf(a!) }])).toEqual(["ok"]);
    const [b] = await store.claim(claimReq());
    // The give-back did not count the attempt: only the start time tells this claim from the first.
    expect(b).toMatchObject({ id, fresh: false, attempts: 1 });
    expect(await store.loadSteps(id!)).toEqual(new Map([["one", 1]]));
  });

  it("§4.2 a large claim tells fresh tasks from given-back ones, whatever form the store's claim takes at that size", async ({
    clock,
    store,
    expect,
  }) => {
    const old = await ids(
      store,
      Array.from({ length: 40 }, () => newTask({ maxMs: 1_000 })),
    );
    const first = await store.claim(claimReq({ limit: 40 }));
    expect(first).toHaveLength(40);
    const stepped = first.find((t) => t.id === old[35])!;
    expect(await store.commitSteps([{ fence: fenceOf(stepped), name: "one", result: "1" }])).toEqual(["ok"]);
    expect(await store.settle(first.map((t) => ({ kind: "release" as const, fence: fenceOf(t) })))).toEqual(
      first.map(() => "ok"),
    );
    clock.advance(1);
    const fresh = await ids(
      store,
      Array.from({ length: 40 }, () => newTask({ maxMs: 1_000 })),
    );
    const all = await store.claim(claimReq({ limit: 100 }));
    expect(all.map((t) => t.id)).toEqual([...old, ...fresh]);
    expect(all.filter((t) => t.fresh).map((t) => t.id)).toEqual(fresh);
    expect(await store.loadSteps(old[35]!)).toEqual(new Map([["one", 1]]));
  });

  it("§4.2 commitStep records one row per step, in commit order, with the attempt; loadSteps returns them", async ({
    clock,
    store,
    expect,
  }) => {
    const [id] = await ids(store, [newTask({ maxMs: 1_000 })]);
    const [c1] = await store.claim(claimReq());
    const f1 = fenceOf(c1!);
    const t0 = clock.now();
    for (const name of ["b", "a", "c"]) await store.commitStep(f1, name, JSON.stringify({ step: name }));
    await store.settle([{ kind: "retry", fence: f1, delayMs: 0, error: ERR }]);
    clock.advance(1);
    const [c2] = await store.claim(claimReq());
    await store.commitStep(fenceOf(c2!), "d", "4");
    expect(await store.steps(id!)).toEqual([
      { taskId: id, name: "b", result: { step: "b" }, attempt: 1, createdAt: t0 },
      { taskId: id, name: "a", result: { step: "a" }, attempt: 1, createdAt: t0 },
      { taskId: id, name: "c", result: { step: "c" }, attempt: 1, createdAt: t0 },
      { taskId: id, name: "d", result: 4, attempt: 2, createdAt: t0 + 1 },
    ]);
    expect([...(await store.loadSteps(id!)).entries()].sort()).toEqual([
      ["a", { step: "a" }],
      ["b", { step: "b" }],
      ["c", { step: "c" }],
      ["d", 4],
    ]);
    expect(await store.loadSteps(987_654)).toEqual(new Map());
  });

  it("§3.7 settle complete stores the result and ends the task", async ({ clock, store, expect }) => {
    const [id] = await ids(store, [newTask()]);
    const [c] = await store.claim(claimReq());
    clock.advance(7);
    expect(await store.settle([{ kind: "complete", fence: fenceOf(c!), result: '{"n":42}' }])).toEqual([
      "ok",
    ]);
    expect(await must(store, id!)).toMatchObject({
      status: "terminal",
      outcome: "completed",
      result: { n: 42 },
      error: null,
      endedAt: clock.now(),
      leaseUntil: null,
      lockedBy: null,
      attempts: 1,
    });
  });

  it("§3.7 a settle batch of completions stores each task its own result, whatever its characters and length", async ({
    store,
    expect,
  }) => {
    // Multi-byte characters (2, 3 and 4 bytes in UTF-8), escapes, an empty string, a long text and
    // repeats, settled in an order that is not the tasks' id order.
    const values: unknown[] = [
      "plain",
      "é",
      "漢字かな",
      "🦀 crab 🦀",
      "",
      'quote " and \\ backslash \n',
      "\u0000 nul escaped",
      { nested: ["ü", 1, null, true] },
      "x".repeat(20_000),
      "🦀".repeat(3_000),
      42,
      null,
      "é",
      [],
    ];
    const n = values.length * 3;
    const taskIds = await ids(
      store,
      Array.from({ length: n }, () => newTask()),
    );
    const claimed = await store.claim(claimReq({ limit: n }));
    expect(claimed).toHaveLength(n);
    const want = new Map(claimed.map((c, i) => [c.id, values[(i * 5) % values.length]]));
    const order = [...claimed].reverse();
    order.push(...order.splice(0, 7));
    const results = await store.settle(
      order.map((c) => ({
        kind: "complete" as const,
        fence: fenceOf(c),
        result: JSON.stringify(want.get(c.id)),
      })),
    );
    expect(results).toEqual(Array(n).fill("ok"));
    for (const id of taskIds) {
      const t = await must(store, id!);
      expect([t.outcome, t.result]).toEqual(["completed", want.get(id!)]);
    }
  });

  it("§5.2 settle retry keeps the attempt, stores the error, logs 'attempt_failed' and waits exactly delayMs", async ({
    clock,
    store,
    expect,
  }) => {
    const [id] = await ids(store, [newTask()]);
    const [c] = await store.claim(claimReq());
    const error = { name: "TypeError", message: "bad", stack: "TypeError: bad\n  at x", code: "E_X" };
    expect(await store.settle([{ kind: "retry", fence: fenceOf(c!), delayMs: 2_000, error }])).toEqual([
      "ok",
    ]);
    const t = await must(store, id!);
    expect(t).toMatchObject({ status: "waiting", attempts: 1, wakeAt: clock.now() + 2_000, error });
    expect(t).toMatchObject({ outcome: null, leaseUntil: null, lockedBy: null });
    const events = await store.events(id!);
    expect(events.map((e) => e.kind)).toEqual(["attempt_failed"]);
    expect(events[0]).toMatchObject({ at: clock.now(), detail: { error, retryAt: clock.now() + 2_000 } });
    clock.advance(1_999);
    expect(await store.claim(claimReq())).toEqual([]);
    clock.advance(1);
    expect(await store.claim(claimReq())).toMatchObject([{ id, attempts: 2, epoch: 2 }]);
  });

  it("§4.4 settle sleep gives the attempt back, records the wake time as a step and waits exactly delayMs", async ({
    clock,
    store,
    expect,
  }) => {
    const [id] = await ids(store, [newTask({ maxAttempts: 1 })]);
    const [c] = await store.claim(claimReq());
    const until = clock.now() + 3_000;
    expect(await store.settle([{ kind: "sleep", fence: fenceOf(c!), step: "nap", delayMs: 3_000 }])).toEqual([
      "ok",
    ]);
    expect(await must(store, id!)).toMatchObject({
      status: "waiting",
      attempts: 0,
      wakeAt: until,
      leaseUntil: null,
      lockedBy: null,
    });
    expect(await store.steps(id!)).toMatchObject([{ name: "nap", result: { until } }]);
    clock.advance(2_999);
    expect(await store.claim(claimReq())).toEqual([]);
    clock.advance(1);
    expect(await store.claim(claimReq())).toMatchObject([{ id, attempts: 1 }]);
  });

  it("§8.2 settle release puts the task back to pending at once, gives the attempt back, keeps the token and logs 'released'", async ({
    store,
    expect,
  }) => {
    const [id] = await ids(store, [newTask()]);
    const [c] = await store.claim(claimReq());
    expect(await store.settle([{ kind: "release", fence: fenceOf(c!) }])).toEqual(["ok"]);
    expect(await must(store, id!)).toMatchObject({
      status: "pending",
      attempts: 0,
      epoch: 1,
      outcome: null,
      leaseUntil: null,
      lockedBy: null,
    });
    expect((await store.events(id!)).map((e) => e.kind)).toEqual(["released"]);
    expect(await store.claim(claimReq())).toMatchObject([{ id, attempts: 1, epoch: 2 }]);
  });

  it("§5.5 settle fail writes failed or faulted with its error and logs it", async ({
    clock,
    store,
    expect,
  }) => {
    const [a, b] = await ids(store, [newTask(), newTask()]);
    const claimed = await store.claim(claimReq());
    const fa: Fence = fenceOf(claimed.find((t) => t.id === a)!);
    const fb: Fence = fenceOf(claimed.find((t) => t.id === b)!);
    const e2 = { name: "Bad", message: "unstorable", code: "RATCHET_INVALID_JSON" };
    expect(
      await store.settle([
        { kind: "fail", fence: fa, outcome: "failed", error: ERR },
        { kind: "fail", fence: fb, outcome: "faulted", error: e2 },
      ]),
    ).toEqual(["ok", "ok"]);
    expect(await must(store, a!)).toMatchObject({ status: "terminal", outcome: "failed", error: ERR });
    expect(await must(store, b!)).toMatchObject({ status: "terminal", outcome: "faulted", error: e2 });
    expect((await must(store, a!)).endedAt).toBe(clock.now());
    expect((await store.events(a!)).map((e) => e.kind)).toEqual(["failed"]);
    expect((await store.events(b!)).map((e) => e.kind)).toEqual(["faulted"]);
  });
}
