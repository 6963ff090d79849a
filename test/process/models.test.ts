/**
 * spec §18.6–§18.8 with real processes:
 * - one half-open probe among four worker processes asking one breaker at once;
 * - a turn's worker SIGKILLed mid-stream: the rerun in another process re-requests, the text
 *   committed before the kill is still in the stream, the answer is whole, usage counted once;
 * - SIGKILLed after the answer and before its commit: the billed answer is recorded once as failed;
 * - SIGKILLed before the request and after the commit: the answer whole, usage once.
 * On SQLite (one file) and PostgreSQL (one schema).
 */
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { Ratchet, silentLogger } from "../../src/index.js";
import type { TurnChunk, TurnResult } from "../../src/models/generate.js";
import { PROBE_CONFIG, TEXT, turn } from "../fixtures/model-tasks.js";
import { dropSchemas, newSchemaName, PG_URL, pgGate } from "../pg-available.js";
import { FixtureProcess, Sandbox, waitUntil } from "./harness.js";

const SCRIPT = join(import.meta.dirname, "../fixtures/model-worker.ts");

async function open(store: string, schema?: string): Promise<Ratchet> {
  return Ratchet.open({
    store,
    ...(schema ? { postgres: { schema } } : {}),
    tasks: [turn],
    logger: silentLogger,
  });
}

function args(store: string, schema: string | undefined, ...more: string[]): string[] {
  return ["--store", store, ...(schema ? ["--schema", schema] : []), ...more];
}

async function chunks(r: Ratchet, id: number): Promise<TurnChunk[]> {
  const out: TurnChunk[] = [];
  for await (const c of r.readStream(id, "answer", { follow: false })) out.push(c.data as TurnChunk);
  return out;
}

async function oneProbe(store: string, schema?: string): Promise<void> {
  const r = await open(store, schema);
  const workers: FixtureProcess[] = [];
  try {
    await r.store.breakers.reportBreaker("faux/faux-1", false, false, PROBE_CONFIG);
    for (let i = 0; i < 4; i++)
      workers.push(new FixtureProcess(args(store, schema, "--mode", "probe"), SCRIPT));
    await Promise.all(workers.map((w) => w.waitFor("ready", 30_000)));
    await waitUntil("the cool-down to pass", async () => {
      const [b] = await r.store.breakers.listBreakers();
      return b !== undefined && Date.now() > b.openedAt + PROBE_CONFIG.coolDownMs;
    });
    for (const w of workers) w.send("go");
    const answers = await Promise.all(workers.map((w) => w.waitFor("admits", 30_000)));
    expect(answers.reduce((n, m) => n + Number(m.probes), 0)).toBe(1);
    expect((await r.store.breakers.listBreakers())[0]).toMatchObject({ state: "half_open" });
  } finally {
    for (const w of workers) w.kill("SIGKILL");
    await Promise.all(workers.map((w) => w.exited));
    await r.close();
  }
}

type KillPoint = "before-request" | "mid-stream" | "in-commit" | "before-commit" | "after-commit";
const SAYS = {
  "before-request": "requesting",
  "in-commit": "answered",
  "before-commit": "answered",
  "after-commit": "committed",
} as const;

async function killTurn(store: string, schema: string | undefined, at: KillPoint): Promise<void> {
  const r = await open(store, schema);
  const workers: FixtureProcess[] = [];
  try {
    const a = new FixtureProcess(
      args(store, schema, ...(at === "mid-stream" ? [] : ["--stop-at", at])),
      SCRIPT,
    );
    workers.push(a);
    await a.waitFor("ready", 30_000);
    const id = await r.enqueue("turn", null);
    a.send("go");
    if (at === "mid-stream")
      await waitUntil(
        "40 characters committed",
        async () => (await chunks(r, id)).filter((c) => c.t === "text").length >= 40,
      );
    else await a.waitFor(SAYS[at], 30_000);
    a.kill("SIGKILL");
    await a.exited;
    const before = await chunks(r, id);
    // spec §18.10: the tail and the finish ride in the turn's commit, so a kill inside it leaves neither.
    if (at === "in-commit") expect(before.some((c) => c.t === "finish")).toBe(false);
    const b = new FixtureProcess(args(store, schema), SCRIPT);
    workers.push(b);
    await b.waitFor("ready", 30_000);
    b.send("go");
    const t = await waitUntil(
      "the turn to complete",
      async () => {
        const x = await r.get(id);
        return x?.status === "terminal" ? x : undefined;
      },
      30_000,
    );
    expect(t.outcome).toBe("completed");
    expect((t.result as TurnResult).text).toBe(TEXT);
    const after = await chunks(r, id);
    // Committed text is never lost: everything committed before the kill is still the stream's prefix.
    expect(after.slice(0, before.length)).toEqual(before);
    // After the commit the rerun replays the answer: no second attempt, no second request.
    // (Before the request the first attempt's marker may not have been committed yet.)
    const attempts = after.filter((c) => c.t === "attempt").length;
    if (at === "after-commit") expect(attempts).toBe(1);
    else if (at !== "before-request") expect(attempts).toBe(2);
    const totals = await r.store.usage.usageTotals({ taskId: id });
    if (at === "before-commit")
      expect(totals).toMatchObject({ responses: 2, failed: 1, output: 2 * TEXT.length });
    else expect(totals).toMatchObject({ responses: 1, failed: 0, output: TEXT.length });
    expect((await r.store.usage.usageTotals({ conversationId: "conv-kill" })).responses).toBe(
      totals.responses,
    );
  } finally {
    for (const w of workers) w.kill("SIGKILL");
    await Promise.all(workers.map((w) => w.exited));
    await r.close();
  }
}

describe("models across processes (spec §18)", () => {
  const sandboxes: Sandbox[] = [];
  afterAll(async () => {
    for (const s of sandboxes) await s.cleanup();
  });
  const db = () => {
    const s = new Sandbox();
    sandboxes.push(s);
    return `sqlite:${s.db}`;
  };

  it("§18.6 SQLite: four worker processes, one half-open probe", async () => {
    await oneProbe(db());
  });
  it("§18.7 SQLite: SIGKILL mid-stream — the rerun re-requests, no committed text lost, usage once", async () => {
    await killTurn(db(), undefined, "mid-stream");
  });
  it("§18.8 SQLite: SIGKILL after the answer's chunks committed, before its step — the billed answer is recorded once as failed", async () => {
    await killTurn(db(), undefined, "before-commit");
  });
  it("§18.10 SQLite: SIGKILL in the turn's one commit — neither its tail nor its answer, the rerun re-requests, usage once", async () => {
    await killTurn(db(), undefined, "in-commit");
  });
  it("§18.7 SQLite: SIGKILL before the request, and after the commit — usage once, the answer whole", async () => {
    await killTurn(db(), undefined, "before-request");
    await killTurn(db(), undefined, "after-commit");
  });

  describe("postgres", () => {
    if (!pgGate(it)) return;
    const schemas: string[] = [];
    afterEach(async () => {
      await dropSchemas(schemas.splice(0));
    });
    const schema = () => {
      const s = newSchemaName();
      schemas.push(s);
      return s;
    };
    it("§18.6 PostgreSQL: four worker processes, one half-open probe", async () => {
      await oneProbe(PG_URL, schema());
    });
    it("§18.7 PostgreSQL: SIGKILL mid-stream — the rerun re-requests, no committed text lost, usage once", async () => {
      await killTurn(PG_URL, schema(), "mid-stream");
    });
    it("§18.8 PostgreSQL: SIGKILL after the answer's chunks committed, before its step — the billed answer is recorded once as failed", async () => {
      await killTurn(PG_URL, schema(), "before-commit");
    });
    it("§18.10 PostgreSQL: SIGKILL in the turn's one commit — neither its tail nor its answer, the rerun re-requests, usage once", async () => {
      await killTurn(PG_URL, schema(), "in-commit");
    });
    it("§18.7 PostgreSQL: SIGKILL before the request, and after the commit — usage once, the answer whole", async () => {
      await killTurn(PG_URL, schema(), "before-request");
      await killTurn(PG_URL, schema(), "after-commit");
    });
  });
});
