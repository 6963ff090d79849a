/**
 * The dispatch commands (spec §20.25) for real: `ratchet dispatch run` as its own
 * process with the process adapter, items added, closed out and closed from the
 * command line, read back with --json and as tables.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { systemClock } from "../../src/core/clock.js";
import { ProcessWorker } from "../../src/dispatch/workers/process.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { waitUntil } from "../process/harness.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const MAIN = join(ROOT, "src/cli/main.ts");
/** tsx by path: the commands run in a temp directory, where "tsx" would not resolve. */
const TSX = pathToFileURL(join(ROOT, "node_modules/tsx/dist/loader.mjs")).href;
const WAIT = 'echo hi; while [ ! -e "$RATCHET_SESSION_DIR/go" ]; do sleep 0.05; done';

describe("dispatch commands (spec §20.25)", () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it("§20.25 dispatch run, item add, dispatch closeout, item close, items, attempts and attempt, with --json", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ratchet-dispatch-cli-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const db = join(dir, "d.db");
    writeFileSync(
      join(dir, "ratchet.dispatch.json"),
      JSON.stringify({
        pipelines: [
          { name: "fix", steps: [{ name: "build", worker: "proc", spawn: { command: ["sh", "-c", WAIT] } }] },
        ],
        workers: [{ kind: "proc", type: "process", root: "sessions" }],
        timeouts: { stopGraceSeconds: 0 },
        intervalMs: 50,
        // spec §21.5: dispatch run delivers the config's destinations beside its runner.
        outbox: {
          destinations: [{ name: "log", types: ["item.*"], sink: { type: "file", path: "facts.jsonl" } }],
          pollMs: 50,
        },
      }),
    );
    const env = { ...process.env, RATCHET_STORE: `sqlite:${db}` };
    const cli = (...args: string[]) =>
      spawnSync(process.execPath, ["--import", TSX, MAIN, ...args], { cwd: dir, encoding: "utf8", env });
    const ok = (...args: string[]) => {
      const r = cli(...args);
      expect(r.stderr).toBe("");
      expect(r.status).toBe(0);
      return r.stdout;
    };

    expect(JSON.parse(ok("item", "add", "fix", '{"title":"a"}', "--json"))).toMatchObject({
      id: "1",
      state: "open",
      step: "build",
    });
    expect(ok("item", "add", "fix", '{"title":"b"}').trim()).toBe("2");
    const bad = cli("items", "--state", "bogus");
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("RATCHET_USAGE");

    const runner: ChildProcess = spawn(process.execPath, ["--import", TSX, MAIN, "dispatch", "run"], {
      cwd: dir,
      env,
      stdio: "ignore",
    });
    const exited = new Promise<number | null>((res) => runner.on("exit", (code) => res(code)));
    cleanups.push(async () => {
      if (runner.exitCode === null) runner.kill("SIGKILL");
      await exited;
      const w = new ProcessWorker({ root: join(dir, "sessions") });
      for (const s of ["ratchet-1", "ratchet-2"]) await w.forget(s);
    });
    const store = new SqliteStore({ path: db, clock: systemClock });
    cleanups.push(() => store.close());
    const both = () => store.dispatch.listAttempts({ limit: 10 });
    await waitUntil(
      "two running attempts",
      async () => (await both()).filter((a) => a.state === "running").length === 2,
    );
    expect(JSON.parse(ok("dispatch", "why", "1", "--json")).reason).toMatchObject({ kind: "running" });

    expect(ok("dispatch", "closeout", "1", '{"outcome":"succeeded","summary":"fixed"}')).toContain(
      "closing (closed-out)",
    );
    ok("item", "close", "2");
    await waitUntil("both attempts settled", async () => (await both()).every((a) => a.endedAt !== null));

    const items = JSON.parse(ok("items", "--json")) as { id: string; state: string }[];
    expect(items.map((i) => [i.id, i.state])).toEqual([
      ["1", "done"],
      ["2", "closed"],
    ]);
    const one = JSON.parse(ok("attempt", "1", "--json")) as {
      attempt: { state: string };
      events: { kind: string }[];
    };
    expect(one.attempt.state).toBe("succeeded");
    expect(one.events.map((e) => e.kind)).toEqual(expect.arrayContaining(["claimed", "closeout", "settled"]));
    expect(ok("attempts", "--item", "2")).toContain("failed:item-closed");
    expect(ok("dispatch", "why", "2")).toContain("failed (item-closed)");

    // The sender beside the runner delivered every item move, in order, to the file (spec §21.5, §21.8).
    const moves = () =>
      existsSync(join(dir, "facts.jsonl"))
        ? readFileSync(join(dir, "facts.jsonl"), "utf8")
            .split("\n")
            .filter((l) => l !== "")
            .map((l) => JSON.parse(l) as { type: string; subject: string; seq: string })
        : [];
    await waitUntil("the item moves delivered", async () => {
      const last = moves().filter((f) => f.subject === "item:2");
      return (
        last.length > 0 &&
        (last.at(-1) as unknown as { data: { to: { state: string } } }).data.to.state === "closed"
      );
    });
    const delivered = moves();
    expect(delivered.every((f) => f.type === "item.moved")).toBe(true);
    expect(new Set(delivered.map((f) => f.subject))).toEqual(new Set(["item:1", "item:2"]));
    const seqs = delivered.map((f) => Number(f.seq));
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));

    runner.kill("SIGTERM");
    expect(await exited).toBe(0);
  });
  it("§20.30 items and item why say which item is stuck at a step its pipeline no longer has; item move moves it, and a bad step changes nothing", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ratchet-dispatch-cli-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const db = join(dir, "d.db");
    const steps = [{ name: "build", worker: "proc", spawn: { command: ["true"] } }];
    writeFileSync(
      join(dir, "ratchet.dispatch.json"),
      JSON.stringify({
        pipelines: [{ name: "fix", steps }],
        workers: [{ kind: "proc", type: "process", root: "s" }],
      }),
    );
    const store = new SqliteStore({ path: db, clock: systemClock });
    await store.migrate();
    cleanups.push(() => store.close());
    const stuck = await store.dispatch.addItem("fix", "triage", "{}");
    const fine = await store.dispatch.addItem("fix", "build", "{}");
    const env = { ...process.env, RATCHET_STORE: `sqlite:${db}` };
    const cli = (...args: string[]) =>
      spawnSync(process.execPath, ["--import", TSX, MAIN, ...args], { cwd: dir, encoding: "utf8", env });

    const rows = JSON.parse(cli("items", "--json").stdout) as {
      id: string;
      stuck: { kind: string } | null;
    }[];
    expect(rows.map((r) => [r.id, r.stuck?.kind ?? null])).toEqual([
      [stuck.id, "unknown_step"],
      [fine.id, null],
    ]);
    expect(cli("items").stdout).toContain(`pipeline "fix" has no step "triage"`);
    expect(cli("item", "why", stuck.id).stdout).toContain(`ratchet item move ${stuck.id} STEP`);

    const bad = cli("item", "move", stuck.id, "nope");
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('has no step "nope"');
    expect(await store.dispatch.getItem(stuck.id)).toEqual(stuck);

    const moved = JSON.parse(cli("item", "move", stuck.id, "build", "--json").stdout) as { step: string };
    expect(moved.step).toBe("build");
    expect(
      (JSON.parse(cli("item", "why", stuck.id, "--json").stdout) as { stuck: unknown }).stuck,
    ).toBeNull();
  });
});
