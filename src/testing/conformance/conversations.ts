/** Conformance: the conversation operations of the Store contract (spec §17), on every backend. */
import type { ConversationOps, NewEntry, SubmitRequest } from "../../store/conversations/types.js";
import type { Store } from "../../store/store.js";
import {
  all,
  claimId,
  type Define,
  type Env,
  failId,
  fenceOf,
  GRACE,
  ids,
  must,
  newTask,
  rejection,
} from "./kit.js";

const entry = (kind: NewEntry["kind"], data: unknown, name: string | null = null): NewEntry => ({
  kind,
  name,
  data: JSON.stringify(data),
});

const ops = (store: Store): ConversationOps => store.conversations;

async function newConversation(store: Store, id = "c1") {
  return (await ops(store).createConversation({ id, title: null, metadata: null, ownerTaskId: null }))
    .conversation;
}

const commitOf = (
  conversationId: string,
  over: Partial<Parameters<ConversationOps["commitConversation"]>[0]> = {},
) => ({
  conversationId,
  entries: [],
  state: [],
  tasks: [],
  key: null,
  fence: null,
  maxDepth: 1_000_000,
  ...over,
});

const submitOf = (conversationId: string, over: Partial<SubmitRequest> = {}): SubmitRequest => ({
  conversationId,
  requestId: null,
  input: JSON.stringify({ text: "hi" }),
  whenBusy: "follow-up",
  run: newTask({ input: JSON.stringify({ conversationId }) }),
  delivery: { steer: "one", followUp: "one" },
  maxDepth: 1_000_000,
  ...over,
});

/** Every row a conversation operation could write, for "nothing changed" checks. */
async function snapshot(env: Env, id: string) {
  const o = ops(env.store);
  return {
    tasks: await all(env.store),
    conversation: await o.getConversation(id),
    entries: await o.entries(id, { limit: 10_000 }),
    inbox: await o.inbox(id, 1_000),
    state: await o.conversationState(id),
  };
}

export function registerConversationTests(it: Define): void {
  it("§17.1 createConversation creates once; a second create of the id returns the first unchanged", async ({
    store,
    expect,
  }) => {
    const o = ops(store);
    const a = await o.createConversation({ id: "c1", title: "one", metadata: '{"k":1}', ownerTaskId: null });
    expect(a.created).toBe(true);
    expect(a.conversation).toMatchObject({
      id: "c1",
      title: "one",
      metadata: { k: 1 },
      length: 0,
      runTaskId: null,
    });
    const [owner] = await ids(store, [newTask()]);
    const b = await o.createConversation({ id: "c1", title: "two", metadata: null, ownerTaskId: owner! });
    expect(b.created).toBe(false);
    expect(b.conversation).toEqual(a.conversation);
  });

  it("§17.1 an owned conversation needs a live owner task, and keeps it", async ({ store, expect }) => {
    const o = ops(store);
    const [owner, done] = await ids(store, [newTask(), newTask({ name: "x" })]);
    await failId(store, done!);
    await rejection(
      () => o.createConversation({ id: "x", title: null, metadata: null, ownerTaskId: 999_999 }),
      "RATCHET_NOT_FOUND",
    );
    await rejection(
      () => o.createConversation({ id: "x", title: null, metadata: null, ownerTaskId: done! }),
      "RATCHET_INVALID_STATE",
    );
    expect(await o.getConversation("x")).toBeNull();
    const c = await o.createConversation({ id: "sub", title: null, metadata: null, ownerTaskId: owner! });
    expect(c.conversation.ownerTaskId).toBe(owner);
    expect((await o.listConversations({ ownerTaskId: owner!, limit: 10 })).map((r) => r.id)).toEqual(["sub"]);
  });

  it("§17.2 entries are numbered 0, 1, 2 … per conversation and read back by range and by task", async ({
    store,
    expect,
  }) => {
    const o = ops(store);
    await newConversation(store, "a");
    await newConversation(store, "b");
    const [t] = await ids(store, [newTask()]);
    const claimed = await claimId(store, t!);
    await o.commitConversation(
      commitOf("a", { entries: [entry("user", 1), entry("custom", { x: 1 }, "app.note")] }),
    );
    await o.commitConversation(commitOf("b", { entries: [entry("user", "b0")] }));
    const r = await o.commitConversation(
      commitOf("a", { entries: [entry("assistant", 2)], fence: fenceOf(claimed) }),
    );
    expect(r.seqs).toEqual([2]);
    const got = await o.entries("a", { limit: 100 });
    expect(got.map((e) => [e.seq, e.kind, e.name, e.data])).toEqual([
      [0, "user", null, 1],
      [1, "custom", "app.note", { x: 1 }],
      [2, "assistant", null, 2],
    ]);
    expect((await o.entries("a", { from: 1, to: 2, limit: 100 })).map((e) => e.seq)).toEqual([1]);
    expect((await o.entries("a", { from: 0, limit: 2 })).map((e) => e.seq)).toEqual([0, 1]);
    expect((await o.entriesByTask(t!, 100)).map((e) => [e.conversationId, e.seq])).toEqual([["a", 2]]);
    expect((await o.getConversation("a"))!.length).toBe(3);
    const many = await o.commitConversation(
      commitOf("b", { entries: Array.from({ length: 250 }, (_, i) => entry("tool-result", i)) }),
    );
    expect(many.seqs).toEqual(Array.from({ length: 250 }, (_, i) => i + 1));
    const back = await o.entries("b", { from: 1, limit: 1_000 });
    expect(back.map((e) => [e.seq, e.data])).toEqual(Array.from({ length: 250 }, (_, i) => [i + 1, i]));
  });

  it("§17.3 contextEntries start at the newest reset or compaction", async ({ store, expect }) => {
    const o = ops(store);
    await newConversation(store);
    await o.commitConversation(commitOf("c1", { entries: [entry("user", 0), entry("assistant", 1)] }));
    expect((await o.contextEntries("c1", 100)).map((e) => e.seq)).toEqual([0, 1]);
    await o.commitConversation(
      commitOf("c1", {
        entries: [entry("compaction", "sum"), entry("user", 3), entry("reset", null), entry("user", 5)],
      }),
    );
    expect((await o.contextEntries("c1", 100)).map((e) => e.seq)).toEqual([4, 5]);
  });

  it("§17.4 a commit writes entries, state and tasks together; a failure inside it writes none of them", async (env) => {
    const { store, expect } = env;
    const o = ops(store);
    await newConversation(store);
    const ok = await o.commitConversation(
      commitOf("c1", {
        entries: [entry("user", 1)],
        state: [{ key: "doc", value: '{"v":1}' }],
        tasks: [newTask()],
      }),
    );
    expect(ok).toMatchObject({ seqs: [0], applied: true });
    expect((await must(store, ok.taskIds[0]!)).status).toBe("pending");
    const before = await snapshot(env, "c1");
    // The second task exceeds the queue's admission bound: the whole commit is refused.
    await rejection(
      () =>
        o.commitConversation(
          commitOf("c1", {
            entries: [entry("user", 2)],
            state: [
              { key: "doc", value: '{"v":2}' },
              { key: "other", value: "1" },
            ],
            tasks: [newTask(), newTask()],
            maxDepth: 2,
          }),
        ),
      "RATCHET_QUEUE_FULL",
    );
    expect(await snapshot(env, "c1")).toEqual(before);
    await o.commitConversation(commitOf("c1", { state: [{ key: "doc", value: null }] }));
    expect(await o.conversationState("c1")).toEqual({});
  });

  it("§17.4 a keyed commit applies once; a fenced commit is refused once its claim is lost", async (env) => {
    const { store, expect, clock } = env;
    const o = ops(store);
    await newConversation(store);
    const first = await o.commitConversation(commitOf("c1", { key: "k1", entries: [entry("user", 1)] }));
    const again = await o.commitConversation(commitOf("c1", { key: "k1", entries: [entry("user", 1)] }));
    expect(again).toEqual({ ...first, applied: false });
    const [t] = await ids(store, [newTask()]);
    const stale = await claimId(store, t!);
    clock.advance(1_000 + GRACE + 1);
    await claimId(store, t!);
    const before = await snapshot(env, "c1");
    await rejection(
      () => o.commitConversation(commitOf("c1", { entries: [entry("user", 2)], fence: fenceOf(stale) })),
      "RATCHET_LEASE_LOST",
    );
    expect(await snapshot(env, "c1")).toEqual(before);
  });

  it("§17.7 a fork holds copies of the entries up to its seq and of the state; the parent is unchanged", async ({
    store,
    expect,
  }) => {
    const o = ops(store);
    await newConversation(store, "p");
    await o.commitConversation(
      commitOf("p", {
        entries: [entry("user", 0), entry("assistant", 1), entry("user", 2)],
        state: [{ key: "s", value: "7" }],
      }),
    );
    const f = await o.forkConversation("p", 1, { id: "f", title: "fork", metadata: null, ownerTaskId: null });
    expect(f).toMatchObject({ id: "f", parent: { conversationId: "p", seq: 1 }, length: 2, runTaskId: null });
    expect((await o.entries("f", { limit: 10 })).map((e) => [e.seq, e.data])).toEqual([
      [0, 0],
      [1, 1],
    ]);
    expect(await o.conversationState("f")).toEqual({ s: 7 });
    await o.commitConversation(commitOf("f", { entries: [entry("user", "fork only")] }));
    expect((await o.entries("p", { limit: 10 })).map((e) => e.data)).toEqual([0, 1, 2]);
    expect((await o.entries("f", { limit: 10 })).map((e) => e.data)).toEqual([0, 1, "fork only"]);
    await rejection(
      () => o.forkConversation("p", 3, { id: "g", title: null, metadata: null, ownerTaskId: null }),
      "RATCHET_INVALID_INPUT",
    );
    await rejection(
      () => o.forkConversation("p", 0, { id: "f", title: null, metadata: null, ownerTaskId: null }),
      "RATCHET_INVALID_STATE",
    );
  });

  it("§17.5 submit: idle places and creates the run; busy queues; reject refuses; a requestId repeats", async (env) => {
    const { store, expect } = env;
    const o = ops(store);
    await newConversation(store);
    const a = await o.submit(submitOf("c1", { requestId: "r1" }));
    expect(a.submission).toMatchObject({ status: "placed", entrySeq: 0 });
    const run = (await o.getConversation("c1"))!.runTaskId!;
    expect(a.submission.runTaskId).toBe(run);
    expect((await must(store, run)).status).toBe("pending");
    const repeat = await o.submit(submitOf("c1", { requestId: "r1", input: '"other"' }));
    expect(repeat).toEqual({ submission: a.submission, created: false });
    const q = await o.submit(submitOf("c1", { whenBusy: "steer" }));
    expect(q.submission).toMatchObject({ status: "queued", mode: "steer" });
    const before = await snapshot(env, "c1");
    await rejection(() => o.submit(submitOf("c1", { whenBusy: "reject" })), "RATCHET_CONVERSATION_BUSY");
    expect(await snapshot(env, "c1")).toEqual(before);
  });

  it("§17.6 boundaries: a turn places steers in the fenced run; the final one answers and hands follow-ups on", async ({
    store,
    expect,
  }) => {
    const o = ops(store);
    await newConversation(store);
    const a = await o.submit(submitOf("c1"));
    const run = a.submission.runTaskId!;
    const fence = fenceOf(await claimId(store, run));
    const f = await o.submit(submitOf("c1", { input: '"F"' }));
    const s = await o.submit(submitOf("c1", { input: '"S"', whenBusy: "steer" }));
    const delivery = { steer: "one", followUp: "one" } as const;
    const placed = await o.turnBoundary({ fence, conversationId: "c1", key: "b1", delivery });
    expect(placed.map((p) => [p.id, p.status, p.runTaskId])).toEqual([[s.submission.id, "placed", run]]);
    expect(await o.turnBoundary({ fence, conversationId: "c1", key: "b1", delivery })).toEqual(placed);
    const done = await o.finishRun({
      fence,
      conversationId: "c1",
      key: "fin",
      delivery,
      answer: entry("assistant", "ok"),
      run: newTask(),
      maxDepth: 1_000_000,
    });
    expect(done.answerSeq).toBe(2);
    expect((await o.submission(a.submission.id))!).toMatchObject({ status: "done", answerSeq: 2 });
    expect((await o.submission(s.submission.id))!).toMatchObject({ status: "done", answerSeq: 2 });
    expect((await o.submission(f.submission.id))!).toMatchObject({
      status: "placed",
      runTaskId: done.successor,
      entrySeq: 3,
    });
    expect((await o.getConversation("c1"))!.runTaskId).toBe(done.successor);
    await rejection(
      () => o.turnBoundary({ fence, conversationId: "c1", key: "b2", delivery }),
      "RATCHET_INVALID_STATE",
    );
  });

  it("§17.8 a run that ended without its final boundary leaves its inputs unanswered and the inbox as it was", async ({
    store,
    expect,
  }) => {
    const o = ops(store);
    await newConversation(store);
    const a = await o.submit(submitOf("c1"));
    const f = await o.submit(submitOf("c1", { input: '"F"' }));
    expect(await o.settleEndedRun("c1")).toBe(false);
    await failId(store, a.submission.runTaskId!);
    expect(await o.settleEndedRun("c1")).toBe(true);
    expect((await o.submission(a.submission.id))!).toMatchObject({
      status: "unanswered",
      reason: "run_failed",
    });
    expect((await o.inbox("c1", 10)).map((s) => s.id)).toEqual([f.submission.id]);
    expect(await o.withdrawQueued("c1", "aborted")).toBe(1);
    expect((await o.submission(f.submission.id))!).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect((await o.entries("c1", { limit: 10 })).map((e) => e.kind)).toEqual(["user"]);
  });

  it("§17.8 closeConversation withdraws queued inputs (closed) and refuses later submissions", async (env) => {
    const { store, expect } = env;
    const o = ops(store);
    await newConversation(store);
    const a = await o.submit(submitOf("c1"));
    const q = await o.submit(submitOf("c1", { input: '"Q"' }));
    expect(await o.closeConversation("c1")).toBe(true);
    expect(await o.closeConversation("c1")).toBe(false);
    expect((await o.submission(q.submission.id))!).toMatchObject({ status: "unanswered", reason: "closed" });
    expect((await o.submission(a.submission.id))!.status).toBe("placed");
    expect((await o.getConversation("c1"))!.closedAt).toBeGreaterThan(0);
    const before = await snapshot(env, "c1");
    await rejection(() => o.submit(submitOf("c1", { requestId: "late" })), "RATCHET_INVALID_STATE");
    expect(await snapshot(env, "c1")).toEqual(before);
    expect(
      (await o.forkConversation("c1", 0, { id: "f", title: null, metadata: null, ownerTaskId: null }))
        .closedAt,
    ).toBeNull();
  });

  it("§17.8 abortConversation withdraws the queued inputs and marks the scope's live tasks in one commit", async ({
    store,
    expect,
  }) => {
    const o = ops(store);
    await newConversation(store);
    const a = await o.submit(submitOf("c1"));
    const q = await o.submit(submitOf("c1", { input: '"Q"' }));
    const r = await o.abortConversation("c1", false);
    expect(r).toEqual({ withdrawn: 1, marked: [a.submission.runTaskId] });
    expect((await must(store, a.submission.runTaskId!)).abortRequested).toBe(true);
    expect((await o.submission(q.submission.id))!).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(await o.abortConversation("c1", true)).toEqual({ withdrawn: 0, marked: [] });
    await rejection(() => o.abortConversation("missing", false), "RATCHET_NOT_FOUND");
  });

  it("§17.9 deleteConversation removes everything it holds; refused while its run is live", async ({
    store,
    expect,
  }) => {
    const o = ops(store);
    await newConversation(store);
    const a = await o.submit(submitOf("c1"));
    await rejection(() => o.deleteConversation("c1"), "RATCHET_INVALID_STATE");
    await failId(store, a.submission.runTaskId!);
    expect(await o.deleteConversation("c1")).toBe(true);
    expect(await o.getConversation("c1")).toBeNull();
    expect(await o.submission(a.submission.id)).toBeNull();
    expect(await o.entries("c1", { limit: 10 })).toEqual([]);
    expect(await o.deleteConversation("c1")).toBe(false);
  });

  it("§17.10 hostile ids, kinds and sizes are refused before any write", async (env) => {
    const { store, expect } = env;
    const o = ops(store);
    await newConversation(store);
    const before = await snapshot(env, "c1");
    for (const id of ["", "a b", "\u0000", "é", "x".repeat(181)])
      await rejection(
        () => o.createConversation({ id, title: null, metadata: null, ownerTaskId: null }),
        "RATCHET_INVALID_INPUT",
      );
    await rejection(
      () =>
        o.commitConversation(
          commitOf("c1", { entries: [{ kind: "bogus" as never, name: null, data: "1" }] }),
        ),
      "RATCHET_INVALID_INPUT",
    );
    await rejection(
      () => o.commitConversation(commitOf("c1", { entries: [entry("custom", 1)] })),
      "RATCHET_INVALID_INPUT",
    );
    await rejection(
      () => o.commitConversation(commitOf("c1", { entries: [entry("user", "x".repeat(1024 * 1024))] })),
      "RATCHET_PAYLOAD_TOO_LARGE",
    );
    await rejection(
      () =>
        o.commitConversation(
          commitOf("c1", {
            state: [
              { key: "k", value: "1" },
              { key: "k", value: "2" },
            ],
          }),
        ),
      "RATCHET_INVALID_INPUT",
    );
    await rejection(() => o.listConversations({ limit: 1_001 }), "RATCHET_INVALID_INPUT");
    await rejection(() => o.submit(submitOf("c1", { requestId: "has space" })), "RATCHET_INVALID_INPUT");
    expect(await snapshot(env, "c1")).toEqual(before);
    expect((await o.listConversations({ limit: 10 })).map((c) => c.id)).toEqual(["c1"]);
  });
}
