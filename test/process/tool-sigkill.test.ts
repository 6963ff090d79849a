/**
 * spec §19.10 with real processes: a worker is SIGKILLed while a round of two tool calls runs — a
 * safe probe and an unsafe bash command. Another worker process takes the calls over after their
 * leases: the probe runs again there; the bash call is answered `interrupted` with the output the
 * dead worker had committed, and is not run again. The bash command's process group, with a sleep in
 * its background, outlives the dead worker; the rerun kills it before it answers (spec §19.30).
 */
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { ToolCallOutcome } from "../../src/agent/tools/calls.js";
import { Ratchet, silentLogger } from "../../src/index.js";
import { alive, groupMembers } from "../fixtures/procs.js";
import { toolCalls, turn } from "../fixtures/tool-tasks.js";
import { dropSchemas, newSchemaName, PG_URL, pgGate } from "../pg-available.js";
import { FixtureProcess, ledgerLines, Sandbox, waitUntil } from "./harness.js";

const SCRIPT = join(import.meta.dirname, "../fixtures/tool-worker.ts");

/** A worker process; with `hang`, its probe tool hangs until aborted (RATCHET_TEST_HANG=1). */
function worker(store: string, schema: string | undefined, hang: boolean): FixtureProcess {
  const before = process.env.RATCHET_TEST_HANG;
  if (hang) process.env.RATCHET_TEST_HANG = "1";
  else delete process.env.RATCHET_TEST_HANG;
  try {
    return new FixtureProcess(["--store", store, ...(schema ? ["--schema", schema] : [])], SCRIPT);
  } finally {
    if (before === undefined) delete process.env.RATCHET_TEST_HANG;
    else process.env.RATCHET_TEST_HANG = before;
  }
}

async function killMidRound(sb: Sandbox, store: string, schema?: string): Promise<void> {
  const ledger = sb.path(`ledger-${schema ?? "sqlite"}.txt`);
  const cwd = sb.path(`cwd-${schema ?? "sqlite"}`);
  mkdirSync(cwd);
  const r = await Ratchet.open({
    store,
    ...(schema ? { postgres: { schema } } : {}),
    tasks: [turn, toolCalls.task],
    logger: silentLogger,
  });
  const workers: FixtureProcess[] = [];
  try {
    const a = worker(store, schema, true);
    workers.push(a);
    await a.waitFor("ready");
    const id = await r.enqueue(turn, { cwd, ledger });
    a.send("go");
    await waitUntil("both calls to run in worker A", () => {
      const l = ledgerLines(ledger);
      return l.includes(`probe ${a.pid}`) && l.includes("bash");
    });
    const bashCall = await waitUntil("the bash call's output to be committed", async () => {
      const kids = await r.store.children(id);
      const b = kids.find((k) => k.spawnName === "tool:b1");
      if (!b) return undefined;
      const s = (await r.streams(b.id)).find((x) => x.name === "output");
      return s && s.length > 0 ? b : undefined;
    });
    a.kill("SIGKILL");
    await a.exited;
    // The bash command's group is its own (spec §19.3): the worker's SIGKILL did not reach it.
    const pgid = Number(readFileSync(join(cwd, "bash.pid"), "utf8"));
    const sleepPid = Number(readFileSync(join(cwd, "sleep.pid"), "utf8"));
    expect(alive(sleepPid)).toBe(true);
    expect(groupMembers(pgid)).toContain(sleepPid);

    const b = worker(store, schema, false);
    workers.push(b);
    await b.waitFor("ready");
    b.send("go");
    const done = await r.waitFor(id, { timeoutMs: 30_000 });
    expect(done.outcome).toBe("completed");
    const [probe, bash] = done.result as ToolCallOutcome[];
    expect(probe).toEqual({ callId: "p1", tool: "probe", result: { content: `probe done in ${b.pid}` } });
    expect(bash!.interrupted).toBe(true);
    expect(bash!.result.content).toMatch(
      /^bash was interrupted: .*not safe to run again; its process group \d+ was still running and was killed; its output so far:\nbash started in \d+/,
    );
    // spec §19.30: the rerun ended the dead attempt's group before it answered.
    expect(alive(sleepPid)).toBe(false);
    expect(groupMembers(pgid)).toEqual([]);
    // The probe ran twice (once per worker); the bash command once, never in B.
    expect(ledgerLines(ledger).sort()).toEqual(["bash", `probe ${a.pid}`, `probe ${b.pid}`].sort());
    expect((await r.get(bashCall.id))!.attempts).toBe(2);
  } finally {
    for (const w of workers) w.kill("SIGKILL");
    await Promise.all(workers.map((w) => w.exited));
    // The dead worker's bash command outlived it (its own process group); end it.
    try {
      const pid = Number(readFileSync(join(cwd, "bash.pid"), "utf8"));
      if (pid > 1) process.kill(-pid, "SIGKILL");
    } catch {
      // Already gone.
    }
    await r.close();
  }
}

describe("a worker SIGKILLed mid tool round (spec §19.10)", () => {
  const sb = new Sandbox();
  afterAll(() => sb.cleanup());

  it("§19.10 §19.30 SQLite: the safe call runs again in the next worker, the unsafe one is interrupted with its output, the dead attempt's process group killed", async () => {
    await killMidRound(sb, `sqlite:${sb.db}`);
  });

  describe("postgres", () => {
    if (!pgGate(it)) return;
    const schemas: string[] = [];
    afterEach(() => dropSchemas(schemas.splice(0)));
    it("§19.10 §19.30 PostgreSQL: the safe call runs again in the next worker, the unsafe one is interrupted with its output, the dead attempt's process group killed", async () => {
      const schema = newSchemaName();
      schemas.push(schema);
      await killMidRound(sb, PG_URL, schema);
    });
  });
});
