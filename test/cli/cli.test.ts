import { type SpawnSyncReturns, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

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
  it("exits 2 with the usage on stderr for an unknown command", () => {
    const c = setup();
    const r = c.run("bogus");
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/unknown command 'bogus'/);
    expect(r.stderr).toMatch(/Usage: ratchet/);
    expect(r.stdout).toBe("");
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
