/**
 * spec §17.5 under several OS processes, on a SQLite file and on a PostgreSQL schema:
 * - four worker processes drain the runs of five conversations: per conversation the [enter, exit)
 *   intervals of the run bodies (one system-wide monotonic clock) never overlap, and the answers
 *   come in submission order;
 * - two processes submit the same request ids to one conversation at once: each request id gets one
 *   submission, and both processes are given the same one.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { Conversations, defineRun } from "../../src/agent/index.js";
import { Ratchet, silentLogger } from "../../src/index.js";
import { dropSchemas, newSchemaName, PG_URL, pgGate } from "../pg-available.js";
import { FixtureProcess, ledgerLines, waitUntil } from "./harness.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const SCRIPT = join(ROOT, "test/fixtures/conversation-worker.ts");
const CONVERSATIONS = 5;
const PER_CONVERSATION = 8;

/** The test's side of the run: same name as the fixture's; bodies never run in this process. */
const procRun = defineRun({
  name: "proc.run",
  run() {
    throw new Error("runs run in the worker processes");
  },
});

/** The crashing run of the fixture: a short maxMs, so its lease lapses soon after the kill. */
const crashRun = defineRun({
  name: "proc.crash",
  maxMs: 1_500,
  run() {
    throw new Error("runs run in the worker processes");
  },
});

interface Target {
  label: string;
  store: string;
  schema: string;
}

const dirs: string[] = [];
const schemas: string[] = [];
const children: FixtureProcess[] = [];
const opened: Ratchet[] = [];

afterEach(async () => {
  for (const c of children.splice(0)) c.kill("SIGKILL");
  for (const r of opened.splice(0)) await r.close().catch(() => {});
  await dropSchemas(schemas.splice(0));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function spawn(t: Target, ledger: string, extra: string[] = []): FixtureProcess {
  const p = new FixtureProcess(
    ["--store", t.store, "--schema", t.schema, "--ledger", ledger, ...extra],
    SCRIPT,
  );
  children.push(p);
  return p;
}

async function open(t: Target): Promise<{ r: Ratchet; c: Conversations; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), "ratchet-conv-"));
  dirs.push(dir);
  const r = await Ratchet.open({
    store: t.store,
    postgres: { schema: t.schema },
    tasks: [procRun.task, crashRun.task],
    logger: silentLogger,
  });
  opened.push(r);
  return { r, c: new Conversations(r, { run: procRun }), dir };
}

/** Per conversation, the body intervals [enter, exit) in start order. */
function intervals(lines: string[]): Map<string, [number, number][]> {
  const open = new Map<string, number>();
  const out = new Map<string, [number, number][]>();
  for (const l of lines) {
    const [conv, task, what, us] = l.split(" ");
    const key = `${conv} ${task}`;
    if (what === "enter") open.set(key, Number(us));
    else {
      const list = out.get(conv!) ?? [];
      list.push([open.get(key)!, Number(us)]);
      out.set(conv!, list);
    }
  }
  for (const list of out.values()) list.sort((a, b) => a[0] - b[0]);
  return out;
}

function register(t: () => Target): void {
  it("§17.5 four worker processes: one run at a time per conversation, follow-ups answered in order", async () => {
    const target = t();
    const { c, dir } = await open(target);
    const ledger = join(dir, "ledger");
    const subs: { conv: string; id: number; text: string }[] = [];
    for (let k = 0; k < CONVERSATIONS; k++) {
      await c.create(`c${k}`);
      for (let i = 0; i < PER_CONVERSATION; i++) {
        const s = await c.submit(`c${k}`, { text: `c${k}-${i}` }, { requestId: `r${i}` });
        subs.push({ conv: `c${k}`, id: s.id, text: `c${k}-${i}` });
      }
    }
    const workers = [0, 1, 2, 3].map(() => spawn(target, ledger));
    await Promise.all(workers.map((w) => w.waitFor("ready", 30_000)));
    for (const w of workers) w.send("go");
    await Promise.all(workers.map((w) => w.waitFor("started", 30_000)));
    for (const s of subs) {
      const got = await (await c.submission(s.id))!.wait({ timeoutMs: 60_000 });
      expect(got.status, s.text).toBe("done");
    }
    expect(await Promise.all(workers.map((w) => w.stop()))).toEqual([0, 0, 0, 0]);
    for (const w of workers) expect(w.stderr).toBe("");
    const runs = intervals(ledgerLines(ledger));
    expect(runs.size).toBe(CONVERSATIONS);
    for (const [conv, list] of runs) {
      expect(list, conv).toHaveLength(PER_CONVERSATION);
      for (let i = 1; i < list.length; i++)
        expect(list[i]![0], `${conv} run ${i} overlaps`).toBeGreaterThanOrEqual(list[i - 1]![1]);
      const answers = (await c.entries(conv)).filter((e) => e.kind === "assistant").map((e) => e.data);
      expect(answers).toEqual(
        subs.filter((s) => s.conv === conv).map((s) => ({ answered: [{ text: s.text }] })),
      );
    }
  });

  it("§17.5 the same request ids from two processes at once: one submission each, the same for both", async () => {
    const target = t();
    const { c, dir } = await open(target);
    await c.create("c0");
    const ledger = join(dir, "ledger");
    const subs = [
      spawn(target, ledger, ["--mode", "submit", "--count", "50", "--order", "forward"]),
      spawn(target, ledger, ["--mode", "submit", "--count", "50", "--order", "reverse"]),
    ];
    await Promise.all(subs.map((p) => p.waitFor("ready", 30_000)));
    for (const p of subs) p.send("go");
    const [a, b] = await Promise.all(subs.map((p) => p.waitFor("submitted", 60_000)));
    expect(a!.ids).toEqual(b!.ids);
    const ids = Object.values(a!.ids as Record<string, number>);
    expect(new Set(ids).size).toBe(50);
    const queued = await c.inbox("c0");
    expect(queued.length).toBe(49);
    const all = [...queued.map((s) => s.id), (await c.entries("c0"))[0]!.submissionId];
    expect(all.sort((x, y) => x! - y!)).toEqual([...ids].sort((x, y) => x - y));
    await waitUntil("both submitters stopped", async () => {
      for (const p of subs) if (p.alive) p.send("stop");
      return subs.every((p) => !p.alive);
    });
  });

  it("§17.8 a run whose worker is SIGKILLed mid-run is reclaimed and finishes; the follow-up behind it is answered", async () => {
    const target = t();
    const { r, dir } = await open(target);
    const c = new Conversations(r, { run: crashRun });
    const ledger = join(dir, "ledger");
    const workers = [0, 1].map(() => spawn(target, ledger, ["--grace", "300"]));
    await Promise.all(workers.map((w) => w.waitFor("ready", 30_000)));
    for (const w of workers) w.send("go");
    await Promise.all(workers.map((w) => w.waitFor("started", 30_000)));
    await c.create("c0");
    const crashing = await c.submit("c0", { text: "crash" });
    const after = await c.submit("c0", { text: "after" });
    expect(await crashing.wait({ timeoutMs: 60_000 })).toMatchObject({ status: "done" });
    expect(await after.wait({ timeoutMs: 60_000 })).toMatchObject({ status: "done" });
    const died = workers.filter((w) => !w.alive);
    expect(died).toHaveLength(1);
    expect((await died[0]!.exited).signal).toBe("SIGKILL");
    const survivor = workers.find((w) => w.alive)!;
    expect(await survivor.stop()).toBe(0);
    // The rerun replayed the keyed commit made before the kill: each step is in the transcript once.
    expect((await c.entries("c0")).map((e) => e.kind)).toEqual([
      "user",
      "tool-call",
      "tool-call",
      "tool-call",
      "assistant",
      "user",
      "tool-call",
      "tool-call",
      "tool-call",
      "assistant",
    ]);
    expect(ledgerLines(ledger).filter((l) => l.includes(" enter ")).length).toBe(3);
  });
}

describe("SQLite file", () => {
  register(() => {
    const dir = mkdtempSync(join(tmpdir(), "ratchet-conv-db-"));
    dirs.push(dir);
    return { label: "sqlite", store: `sqlite:${join(dir, "ratchet.db")}`, schema: "ratchet" };
  });
});

describe("PostgreSQL", () => {
  if (!pgGate(it)) return;
  register(() => {
    const schema = newSchemaName();
    schemas.push(schema);
    return { label: "postgres", store: PG_URL, schema };
  });
});
