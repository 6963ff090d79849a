import { type SpawnSyncReturns, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { defineTask, Ratchet, silentLogger, type TaskContext, type TaskRecord } from "../../src/index.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const MAIN = path.join(ROOT, "dist/src/cli/main.js");
const INDEX = path.join(ROOT, "dist/src/index.js");

const dirs: string[] = [];

afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

interface Ctx {
  dir: string;
  db: string;
  run: (...args: string[]) => SpawnSyncReturns<string>;
}

function setup(): Ctx {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ratchet-cli-"));
  dirs.push(dir);
  fs.writeFileSync(
    path.join(dir, "tasks.mjs"),
    `import { defineTask } from ${JSON.stringify(INDEX)};
export const hello = defineTask({ name: "hello", run: (ctx, input) => ({ hi: input?.name ?? null }) });
`,
  );
  const db = path.join(dir, "t.db");
  const env = { ...process.env };
  delete env.RATCHET_STORE;
  delete env.RATCHET_DEBUG;
  const run = (...args: string[]) =>
    spawnSync(process.execPath, [MAIN, "--store", `sqlite:${db}`, ...args], {
      cwd: dir,
      encoding: "utf8",
      env,
    });
  return { dir, db, run };
}

function ok(r: SpawnSyncReturns<string>): string {
  expect(r.stderr).toBe("");
  expect(r.status).toBe(0);
  return r.stdout;
}

function json<T = unknown>(r: SpawnSyncReturns<string>): T {
  return JSON.parse(ok(r)) as T;
}

/** Enqueues hello {"name":"x"}, runs it with tick and returns its id. */
function completedTask(c: Ctx): number {
  const id = Number(ok(c.run("enqueue", "hello", '{"name":"x"}', "--tasks", "tasks.mjs")).trim());
  const report = json<{ done: number }>(c.run("tick", "--budget", "70s", "--tasks", "tasks.mjs", "--json"));
  expect(report.done).toBeGreaterThanOrEqual(1);
  return id;
}

interface TaskRow {
  id: number;
  name: string;
  outcome: string | null;
}

describe("ratchet CLI", () => {
  it("§8.11 an unknown command exits 2 with RATCHET_USAGE and a one-line hint on stderr", () => {
    const c = setup();
    const r = c.run("bogus");
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(
      "error [RATCHET_USAGE]: unknown command 'bogus'\nusage: ratchet [options] [command] (see `ratchet --help`)\n",
    );
    expect(r.stdout).toBe("");
  });

  it("§8.11 usage errors, commander's and the CLI's own, print one format: error [RATCHET_USAGE]: …, one hint line, exit 2", () => {
    const c = setup();
    const cases: [string[], RegExp, string][] = [
      [["ls", "--bogus"], /unknown option '--bogus'/, "ratchet ls"],
      [["show"], /missing required argument 'id'/, "ratchet show"],
      [["worker", "--prefetch", "many", "--tasks", "tasks.mjs"], /--prefetch/, "ratchet worker"],
      [["ls", "--status", "nope"], /--status must be one of/, "ratchet ls"],
      [["enqueue", "hello", "{bad", "--tasks", "tasks.mjs"], /not valid JSON/, "ratchet enqueue"],
      [["show", "1", "2"], /too many arguments/, "ratchet show"],
    ];
    for (const [args, message, cmd] of cases) {
      const r = c.run(...args);
      const lines = r.stderr.split("\n");
      expect({ args, status: r.status, lines: lines.length }).toEqual({ args, status: 2, lines: 3 });
      expect(lines[0]).toMatch(/^error \[RATCHET_USAGE\]: /);
      expect(lines[0]).toMatch(message);
      expect(lines[1]).toMatch(new RegExp(`^usage: ${cmd} .*\\(see \`${cmd} --help\`\\)$`));
      expect(r.stderr).not.toMatch(/Options:|Usage:/); // never the whole help
      expect(r.stdout).toBe("");
    }
    expect(fs.existsSync(c.db)).toBe(false);
    // Asking for help is not an error.
    const help = c.run("ls", "--help");
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/Usage: ratchet ls/);
  });

  it("rejects malformed JSON with exit 2 and writes nothing", () => {
    const c = setup();
    const bad = c.run("enqueue", "hello", "{bad", "--tasks", "tasks.mjs");
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/not valid JSON/);
    expect(bad.stderr).toMatch(/usage: ratchet enqueue/);
    expect(bad.stdout).toBe("");
    expect(fs.existsSync(c.db)).toBe(false);
    // Create the database (tick with nothing to do), then nothing is listed.
    ok(c.run("tick", "--budget", "1s", "--tasks", "tasks.mjs", "--json"));
    const again = c.run("enqueue", "hello", "{bad", "--tasks", "tasks.mjs");
    expect(again.status).toBe(2);
    expect(json(c.run("ls", "--json"))).toEqual([]);
  });

  it("spec §8.7: worker --prefetch outside [0, 10000] exits 2 with the usage and opens nothing", () => {
    const c = setup();
    for (const bad of ["-1", "10001", "1.5", "many"]) {
      const r = c.run("worker", "--prefetch", bad, "--tasks", "tasks.mjs");
      expect(r.status, `--prefetch ${bad}`).toBe(2);
      expect(r.stderr).toMatch(/--prefetch/);
      expect(r.stdout).toBe("");
    }
    expect(fs.existsSync(c.db)).toBe(false);
  });

  it("reports an unknown task as a RatchetError without a stack", () => {
    const c = setup();
    const r = c.run("enqueue", "nope", "{}", "--tasks", "tasks.mjs");
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^error \[RATCHET_UNKNOWN_TASK\]: /);
    expect(r.stderr).not.toContain("    at ");
    expect(r.stdout).toBe("");
  });

  it("enqueue prints only an id; --dedupe returns the same id; --json prints {id}", () => {
    const c = setup();
    const out = ok(c.run("enqueue", "hello", '{"name":"x"}', "--tasks", "tasks.mjs"));
    expect(out).toMatch(/^\d+\n$/);
    const a = ok(c.run("enqueue", "hello", '{"name":"x"}', "--dedupe", "k", "--tasks", "tasks.mjs"));
    const b = ok(c.run("enqueue", "hello", '{"name":"x"}', "--dedupe", "k", "--tasks", "tasks.mjs"));
    expect(a).toMatch(/^\d+\n$/);
    expect(b).toBe(a);
    expect(a).not.toBe(out);
    const j = json<{ id: number }>(c.run("enqueue", "hello", "{}", "--tasks", "tasks.mjs", "--json"));
    expect(Object.keys(j)).toEqual(["id"]);
    expect(Number.isInteger(j.id)).toBe(true);
    expect(j.id).toBeGreaterThan(Number(a));
  });

  it("tick runs the task; show, ls and stats report it", () => {
    const c = setup();
    const id = completedTask(c);
    const d = json<{ task: { id: number; outcome: string; result: unknown } }>(
      c.run("show", String(id), "--json"),
    );
    expect(d.task.id).toBe(id);
    expect(d.task.outcome).toBe("completed");
    expect(d.task.result).toEqual({ hi: "x" });

    const id2 = Number(ok(c.run("enqueue", "hello", "{}", "--tasks", "tasks.mjs")).trim());
    const list = json<TaskRow[]>(c.run("ls", "--json"));
    expect(Array.isArray(list)).toBe(true);
    expect(list.map((t) => t.id)).toEqual([id2, id]);

    const stats = json<{ queue: string; byOutcome: Record<string, number> }[]>(c.run("stats", "--json"));
    expect(Array.isArray(stats)).toBe(true);
    expect(stats.find((q) => q.queue === "default")?.byOutcome.completed).toBe(1);
  });

  it("abort on a completed task prints terminal:completed; retry exits 1", () => {
    const c = setup();
    const id = completedTask(c);
    expect(ok(c.run("abort", String(id)))).toBe("terminal:completed\n");
    const r = c.run("retry", String(id));
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^error \[RATCHET_INVALID_STATE\]: /);
    expect(r.stderr).not.toContain("    at ");
  });

  it("prune --older-than 0ms --limit 1 deletes one task", () => {
    const c = setup();
    ok(c.run("enqueue", "hello", '{"name":"a"}', "--tasks", "tasks.mjs"));
    ok(c.run("enqueue", "hello", '{"name":"b"}', "--tasks", "tasks.mjs"));
    const report = json<{ done: number }>(c.run("tick", "--budget", "70s", "--tasks", "tasks.mjs", "--json"));
    expect(report.done).toBe(2);
    expect(json<TaskRow[]>(c.run("ls", "--json"))).toHaveLength(2);
    expect(json(c.run("prune", "--older-than", "0ms", "--limit", "1", "--json"))).toEqual({ pruned: 1 });
    expect(json<TaskRow[]>(c.run("ls", "--json"))).toHaveLength(1);
  });

  it("ls on a missing database exits 1 and does not create it", () => {
    const c = setup();
    const r = c.run("ls");
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^error \[RATCHET_CONFIG\]: /);
    expect(fs.existsSync(c.db)).toBe(false);
  });
});

// ------------------------------------------------------------------ task trees (spec §12)
//
// The fixture tasks module cannot spawn, so the trees are built in this process: a Ratchet on the
// same SQLite file runs the definitions below with tick and is closed again; then the CLI (which
// loads no definitions) reads and steers the rows. The definitions are registered in the store, so
// the CLI knows which of them have an abort handler (spec §12.5, §12.6).

/** Sleeps an hour (the system clock), so it stays live for the whole test. */
const leaf = defineTask({
  name: "leaf",
  async run(ctx: TaskContext) {
    await ctx.sleep("nap", 3_600_000);
    return "woke";
  },
});
/** Like leaf, with an abort handler: once it has started, an abort makes it run the handler. */
const tidyLeaf = defineTask({
  name: "tidy-leaf",
  async run(ctx: TaskContext) {
    await ctx.sleep("nap", 3_600_000);
    return "woke";
  },
  onAbort: () => "tidied",
});
const quick = defineTask({ name: "quick", run: () => "quick" });
/** Spawns fg (ordinary), bg (background) and quick, and waits for fg and quick. */
const parent = defineTask({
  name: "parent",
  async run(ctx: TaskContext) {
    const fg = await ctx.spawn("fg", leaf);
    await ctx.spawn("bg", leaf, null, { background: true });
    const q = await ctx.spawn("quick", quick);
    await ctx.waitFor([fg, q]);
    return "done";
  },
  onAbort: () => "cleaned up",
});
/** Returns while its child sleeps: it holds `completed` (spec §12.4). */
const hasty = defineTask({
  name: "hasty",
  async run(ctx: TaskContext) {
    await ctx.spawn("slow", leaf);
    return "returned early";
  },
});
/** Owns a child with an abort handler and sleeps. */
const careful = defineTask({
  name: "careful",
  async run(ctx: TaskContext) {
    await ctx.spawn("tidy", tidyLeaf);
    await ctx.sleep("nap", 3_600_000);
  },
});
const waiter = defineTask({
  name: "waiter",
  run: (ctx: TaskContext, event: string) => ctx.waitForEvent(event, { timeoutMs: 3_600_000 }),
});
const TREE_TASKS = [leaf, tidyLeaf, quick, parent, hasty, careful, waiter];

/** Opens the library on the CLI's database, runs `fn`, and closes it again. */
async function withLibrary<T>(c: Ctx, fn: (r: Ratchet) => Promise<T>): Promise<T> {
  const r = await Ratchet.open({ store: `sqlite:${c.db}`, tasks: TREE_TASKS, logger: silentLogger });
  try {
    return await fn(r);
  } finally {
    await r.close();
  }
}

/** Drains everything that is due now (a generous budget: the definitions have maxMs 60 s). */
async function drain(r: Ratchet): Promise<void> {
  await r.tick({ budgetMs: 3_600_000 });
}

interface TreeJson {
  task: TaskRecord;
  children: TreeJson[];
  truncated?: boolean;
}

/** Enqueues parent roots (one per scope given; undefined: the default scope) and runs them until they park. */
async function parents(c: Ctx, scopes: (string | undefined)[]): Promise<number[]> {
  return withLibrary(c, async (r) => {
    const ids: number[] = [];
    for (const scope of scopes) ids.push(await r.enqueue(parent, null, scope === undefined ? {} : { scope }));
    await drain(r);
    return ids;
  });
}

/** The children of a parent root by spawn name, read through `ratchet tree --json`. */
function kidsOf(c: Ctx, id: number): Record<string, TaskRecord> {
  const t = json<TreeJson>(c.run("tree", String(id), "--json"));
  return Object.fromEntries(t.children.map((k) => [k.task.spawnName!, k.task]));
}

describe("ratchet CLI: task trees (spec §12)", () => {
  it("spec §12.10: tree prints a task and everything it owns, indented, background children flagged; --json nests the records", async () => {
    const c = setup();
    const [root] = await parents(c, [undefined]);
    const t = json<TreeJson>(c.run("tree", String(root), "--json"));
    expect(t.truncated).toBe(false);
    expect(t.task).toMatchObject({
      id: root,
      name: "parent",
      status: "waiting",
      waitOn: "tasks",
      ownerId: null,
    });
    expect(
      t.children.map((k) => [k.task.spawnName, k.task.ownerId, k.task.background, k.task.status]),
    ).toEqual([
      ["fg", root, false, "waiting"],
      ["bg", root, true, "waiting"],
      ["quick", root, false, "terminal"],
    ]);
    for (const k of t.children) expect(k.children).toEqual([]);
    expect(t.children[2]!.task).toMatchObject({ outcome: "completed", result: "quick" });
    const [fg, bg, q] = t.children.map((k) => k.task.id);

    expect(ok(c.run("tree", String(root)))).toBe(
      [
        `#${root} parent waiting`,
        `  └ #${fg} leaf "fg" waiting`,
        `  └ #${bg} leaf "bg" waiting [background]`,
        `  └ #${q} quick "quick" completed`,
        "",
      ].join("\n"),
    );
    // A child's tree starts at the child.
    expect(ok(c.run("tree", String(fg)))).toBe(`#${fg} leaf "fg" waiting\n`);
    // --limit bounds the rows and says so (spec §12.11).
    const cut = json<TreeJson>(c.run("tree", String(root), "--limit", "2", "--json"));
    expect(cut.truncated).toBe(true);
    expect(cut.children).toHaveLength(1);
    expect(ok(c.run("tree", String(root), "--limit", "2"))).toMatch(/… \(more; raise --limit\)\n$/);

    const missing = c.run("tree", "999");
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/^error \[RATCHET_NOT_FOUND\]: /);
    expect(missing.stdout).toBe("");
  });

  it("spec §12.5: abort ID --scope aborts every live task of that task's scope except detached ones; other scopes are untouched", async () => {
    const c = setup();
    const [a, b, other] = await parents(c, ["conv-1", "conv-1", undefined]);
    const kidsA = kidsOf(c, a!);
    const kidsOther = kidsOf(c, other!);

    // Named through a child: the scope is the child's (inherited, spec §12.2). The live ordinary
    // tasks of conv-1 are both roots and their fg children; bg is detached, quick has ended.
    expect(ok(c.run("abort", String(kidsA.fg!.id), "--scope"))).toBe("scope conv-1: marked 4 tasks\n");
    for (const root of [a!, b!]) {
      const kids = kidsOf(c, root);
      // fg has no abort handler: aborted at once. bg is outside the scope's ordinary traversal.
      expect(kids.fg).toMatchObject({ status: "terminal", outcome: "aborted", abortRequested: true });
      expect(kids.bg).toMatchObject({ status: "waiting", abortRequested: false });
      expect(kids.quick).toMatchObject({ outcome: "completed" });
    }
    // The roots have an abort handler and had started: they are marked and wait to run it.
    for (const root of [a!, b!]) {
      const rec = json<{ task: TaskRecord }>(c.run("show", String(root), "--json")).task;
      expect(rec).toMatchObject({ abortRequested: true });
      expect(rec.status).not.toBe("terminal");
    }
    // The other scope (a root's default scope is its own id) is untouched.
    expect(json<{ task: TaskRecord }>(c.run("show", String(other), "--json")).task).toMatchObject({
      status: "waiting",
      abortRequested: false,
    });
    expect(kidsOf(c, other!).fg).toMatchObject({ status: "waiting", abortRequested: false });

    // The handlers run in the next tick of a process that has the code (spec §12.5).
    await withLibrary(c, async (r) => {
      await drain(r);
      for (const root of [a!, b!])
        expect(await r.get(root)).toMatchObject({
          status: "terminal",
          outcome: "aborted",
          result: "cleaned up",
        });
    });

    // --json, on a root in its default scope: the scope is the root's own id.
    expect(json(c.run("abort", String(other), "--scope", "--json"))).toEqual({
      scope: String(other),
      marked: 2,
    });
    expect(kidsOf(c, other!).fg).toMatchObject({ outcome: "aborted" });
    expect(kidsOf(c, other!).bg).toMatchObject({
      id: kidsOther.bg!.id,
      status: "waiting",
      abortRequested: false,
    });

    const gone = c.run("abort", "999", "--scope");
    expect(gone.status).toBe(1);
    expect(gone.stderr).toMatch(/^error \[RATCHET_NOT_FOUND\]: /);
  });

  it("spec §12.5: abort --scope NAME marks the scope's ordinary tasks; --background also reaches detached subtrees", async () => {
    const c = setup();
    const [root] = await parents(c, ["conv-2"]);
    expect(json(c.run("abort", "--scope", "conv-2", "--json"))).toEqual({ scope: "conv-2", marked: 2 });
    let kids = kidsOf(c, root!);
    expect(kids.fg).toMatchObject({ outcome: "aborted" });
    expect(kids.bg).toMatchObject({ status: "waiting", abortRequested: false });

    expect(ok(c.run("abort", "--scope", "conv-2", "--background"))).toBe("scope conv-2: marked 1 task\n");
    kids = kidsOf(c, root!);
    expect(kids.bg).toMatchObject({ status: "terminal", outcome: "aborted", abortRequested: true });
    // Repeating it marks nothing new; an unknown scope has nothing to mark.
    expect(ok(c.run("abort", "--scope", "conv-2", "--background"))).toBe("scope conv-2: marked 0 tasks\n");
    expect(ok(c.run("abort", "--scope", "nobody"))).toBe("scope nobody: marked 0 tasks\n");
  });

  it("spec §12.5 (CLI usage): abort errors exit 2 with the usage and change nothing: no id and no --scope, an id with --scope NAME, --background without --scope", async () => {
    const c = setup();
    const [root] = await parents(c, ["conv-3"]);
    const cases: [string[], RegExp][] = [
      [["abort"], /abort needs a task id, or --scope NAME/],
      [
        ["abort", String(root), "--scope", "conv-3"],
        /give either a task id with --scope, or --scope NAME, not both/,
      ],
      [["abort", String(root), "--background"], /--background only applies with --scope/],
      [["abort", "--scope"], /--scope without a name needs a task id/],
    ];
    for (const [args, message] of cases) {
      const r = c.run(...args);
      expect(r.status, args.join(" ")).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).toMatch(/usage: ratchet abort/);
      expect(r.stdout).toBe("");
    }
    for (const t of json<TaskRecord[]>(c.run("ls", "--json"))) expect(t.abortRequested).toBe(false);
  });

  it("spec §12.7: signal NAME [JSON] keeps the first payload and wakes the waiting tasks; --json gives { first, woken }", async () => {
    const c = setup();
    const id = await withLibrary(c, async (r) => {
      const w = await r.enqueue(waiter, "approve");
      await drain(r);
      expect(await r.get(w)).toMatchObject({ status: "waiting", waitOn: "event", eventName: "approve" });
      return w;
    });
    expect(ok(c.run("signal", "approve", '{"ok":true}'))).toBe("sent; woke 1 task\n");
    expect(ok(c.run("signal", "approve", '"late"'))).toBe(
      "already sent (kept the first payload); woke 0 tasks\n",
    );
    await withLibrary(c, async (r) => {
      await drain(r);
      expect(await r.get(id)).toMatchObject({
        outcome: "completed",
        result: { kind: "signal", payload: { ok: true } },
      });
    });

    // Without a payload the signal carries null; one sent before any wait is kept for it.
    expect(json(c.run("signal", "early", "--json"))).toEqual({ first: true, woken: 0 });
    expect(json(c.run("signal", "early", "1", "--json"))).toEqual({ first: false, woken: 0 });
    await withLibrary(c, async (r) => {
      const w = await r.enqueue(waiter, "early");
      await drain(r);
      expect(await r.get(w)).toMatchObject({
        outcome: "completed",
        result: { kind: "signal", payload: null },
      });
    });

    const bad = c.run("signal", "x", "{bad");
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/not valid JSON/);
    expect(bad.stdout).toBe("");
  });

  it("spec §12.10: inspect prints why each live task is where it is; --json gives tasks[].derived", async () => {
    const c = setup();
    const ids = await withLibrary(c, async (r) => {
      const root = await r.enqueue(parent, null, { scope: "conv-4" });
      const early = await r.enqueue(hasty);
      const cautious = await r.enqueue(careful);
      const w = await r.enqueue(waiter, "approve");
      await drain(r);
      // Its child has an abort handler and has started: the owner waits for it to drain.
      expect(await r.abort(cautious)).toEqual({ state: "marked" });
      // A task no Ratchet has code for (spec §1.3): blocked, never terminal.
      const [ghost] = await r.store.enqueue(
        [
          {
            name: "ghost",
            version: 1,
            queue: "default",
            input: "null",
            priority: 0,
            maxMs: 1_000,
            maxAttempts: 1,
            delayMs: 0,
            dedupe: null,
            job: null,
            needs: [],
          },
        ],
        { maxDepth: () => 1_000_000 },
      );
      const tree = async (id: number) => (await r.tree(id)).children.map((k) => k.task.id);
      return {
        root,
        early,
        cautious,
        w,
        ghost: ghost!.id,
        fg: (await tree(root))[0]!,
        tidy: (await tree(cautious))[0]!,
      };
    });

    const insp = json<{
      scheduling: string;
      truncated: boolean;
      tasks: { id: number; name: string; scope: string; status: string; derived: unknown }[];
    }>(c.run("inspect", "--json"));
    expect(insp.scheduling).toBe("paused");
    expect(insp.truncated).toBe(false);
    const by = new Map(insp.tasks.map((t) => [t.id, t]));
    // Terminal tasks (the quick child) are not listed.
    expect(insp.tasks.every((t) => t.status !== "terminal")).toBe(true);
    expect(by.get(ids.root)).toMatchObject({
      name: "parent",
      scope: "conv-4",
      status: "waiting",
      derived: { state: "waiting", on: { kind: "tasks", ids: [ids.fg], policy: "allSettled" } },
    });
    expect(by.get(ids.fg)).toMatchObject({
      scope: "conv-4",
      derived: { state: "waiting", on: { kind: "timer" } },
    });
    expect(by.get(ids.early)).toMatchObject({
      status: "completing",
      derived: { state: "completing", outcome: "completed" },
    });
    expect(by.get(ids.cautious)).toMatchObject({
      derived: { state: "waiting", on: { kind: "owned_work", ids: [ids.tidy] } },
    });
    expect(by.get(ids.tidy)).toMatchObject({ status: "pending", derived: { state: "ready" } });
    expect(by.get(ids.w)).toMatchObject({
      derived: { state: "waiting", on: { kind: "event", name: "approve" } },
    });
    expect(by.get(ids.ghost)).toMatchObject({ derived: { state: "blocked", reason: "missing_definition" } });

    const lines = ok(c.run("inspect")).trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ID\s+NAME\s+SCOPE\s+STATUS\s+WHY$/);
    expect(lines).toHaveLength(insp.tasks.length + 1);
    const row = (id: number) => lines.find((l) => l.startsWith(`${id} `)) ?? "";
    expect(row(ids.root)).toMatch(
      new RegExp(`^${ids.root}\\s+parent\\s+conv-4\\s+waiting\\s+waiting \\(allSettled\\) on ${ids.fg}$`),
    );
    expect(row(ids.fg)).toMatch(/\s+waiting until \d{4}-\d\d-\d\dT/);
    expect(row(ids.early)).toMatch(/\s+completing\s+completing: holds completed until owned work ends$/);
    expect(row(ids.cautious)).toMatch(new RegExp(`aborting: waits for owned ${ids.tidy}$`));
    expect(row(ids.tidy)).toMatch(/\s+pending\s+ready$/);
    expect(row(ids.w)).toMatch(/waiting for event "approve" until \d{4}-/);
    expect(row(ids.ghost)).toMatch(/\s+ghost\s+\d+\s+pending\s+blocked: missing_definition$/);
  });

  it("spec §12.10: inspect with no live task says so; --json lists none", () => {
    const c = setup();
    completedTask(c);
    expect(ok(c.run("inspect"))).toBe("no live tasks\n");
    expect(json<{ tasks: unknown[] }>(c.run("inspect", "--json")).tasks).toEqual([]);
  });
});

describe("ratchet CLI: schedules (spec §14)", () => {
  it("spec §14.1: schedules lists each schedule with its next tick; --json gives the rows; none prints a line", async () => {
    const c = setup();
    await withLibrary(c, async () => {});
    expect(ok(c.run("schedules"))).toBe("no schedules\n");
    await withLibrary(c, async (r) => {
      await r.schedule("nightly", "0 3 * * *", quick, null, { timezone: "Europe/Paris", missed: "skip" });
    });
    const rows = json<
      { name: string; cron: string; timezone: string; task: string; nextAt: number; missed: string }[]
    >(c.run("schedules", "--json"));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      name: "nightly",
      cron: "0 3 * * *",
      timezone: "Europe/Paris",
      task: "quick",
      missed: "skip",
    });
    const text = ok(c.run("schedules"));
    expect(text).toMatch(/^NAME\s+CRON\s+TZ\s+TASK\s+NEXT\s+LAST\s+LAST TASK\s+MISSED/);
    expect(text).toContain("nightly");
    expect(text).toContain(new Date(rows[0]!.nextAt).toISOString());
  });
});

describe("ratchet CLI: why (spec §14.5)", () => {
  it("spec §14.5: why prints the reason a task is where it is; --json gives the typed reason; unknown ids exit 1", async () => {
    const c = setup();
    const [root] = await parents(c, [undefined]);
    expect(ok(c.run("why", String(root)))).toMatch(
      new RegExp(`^task ${root} \\(parent, waiting\\): waiting \\(allSettled\\) for tasks: \\d+`),
    );
    const e = json<{ reason: { kind: string; ids: number[] } }>(c.run("why", String(root), "--json"));
    expect(e.reason.kind).toBe("tasks");
    expect(e.reason.ids.length).toBeGreaterThan(0);
    const bad = c.run("why", "987654");
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain("RATCHET_NOT_FOUND");
  });
});

describe("ratchet CLI: concurrency (spec §14.9)", () => {
  it("spec §14.9: concurrency sets, lists and clears run-time limits for every worker; bad input exits 2 and changes nothing", async () => {
    const c = setup();
    await withLibrary(c, async () => {});
    expect(ok(c.run("concurrency"))).toMatch(/no run-time concurrency limits/);
    expect(ok(c.run("concurrency", "openai", "3"))).toBe("openai: limit 3; woke 0 parked tasks\n");
    expect(ok(c.run("concurrency", "openai", "1", "--key", "tenant-7"))).toBe(
      "openai:tenant-7: limit 1; woke 0 parked tasks\n",
    );
    expect(json<{ seat: string; limit: number }[]>(c.run("concurrency", "--json"))).toEqual([
      { seat: "openai", limit: 3 },
      { seat: "openai:tenant-7", limit: 1 },
    ]);
    const bad = c.run("concurrency", "openai", "-4");
    expect(bad.status).toBe(2);
    expect(c.run("concurrency", "openai").status).toBe(2);
    expect(ok(c.run("concurrency", "openai", "--clear"))).toMatch(/^openai: limit in code/);
    await withLibrary(c, async (r) => {
      expect((await r.concurrencyLimits()).overrides).toEqual([{ seat: "openai:tenant-7", limit: 1 }]);
    });
  });
});
