/**
 * spec §16.1–§16.5 with real processes: a reader follows a stream while its writer is SIGKILLed;
 * the task's rerun in another process continues at the stream's offset; the reader sees every
 * offset once, in order, with no gap, and what was committed before the kill is still there.
 */
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { StreamChunk } from "../../src/engine/stream-reader.js";
import { Ratchet, silentLogger } from "../../src/index.js";
import { streamer } from "../fixtures/stream-tasks.js";
import { dropSchemas, newSchemaName, PG_URL, pgGate } from "../pg-available.js";
import { FixtureProcess, Sandbox, waitUntil } from "./harness.js";

const SCRIPT = join(import.meta.dirname, "../fixtures/stream-worker.ts");
const TOTAL = 600;

type Chunk = { i: number; pid: number };

async function killMidStream(store: string, schema?: string): Promise<void> {
  const extra = schema ? ["--schema", schema] : [];
  const r = await Ratchet.open({
    store,
    ...(schema ? { postgres: { schema } } : {}),
    tasks: [streamer],
    logger: silentLogger,
  });
  const workers: FixtureProcess[] = [];
  try {
    const a = new FixtureProcess(["--store", store, ...extra], SCRIPT);
    workers.push(a);
    await a.waitFor("ready");
    const id = await r.enqueue("streamer", { total: TOTAL });
    a.send("go");

    const seen: StreamChunk[] = [];
    let seenAtKill = -1;
    const reading = (async () => {
      for await (const c of r.readStream(id, "out", { pollMs: 10 })) seen.push(c);
    })();
    await waitUntil("the reader to see 60 chunks of worker A", () => seen.length >= 60);
    a.kill("SIGKILL");
    await a.exited;
    seenAtKill = seen.length;
    const committedAtKill = (await r.streams(id))[0]!.length;
    expect(committedAtKill).toBeGreaterThanOrEqual(seenAtKill);
    expect(committedAtKill).toBeLessThan(TOTAL);

    const b = new FixtureProcess(["--store", store, ...extra], SCRIPT);
    workers.push(b);
    await b.waitFor("ready");
    b.send("go");
    const resumed = await b.waitFor("resume", 30_000);
    // The rerun starts where the stream stopped: everything committed before the kill is kept.
    expect(resumed.offset).toBe(committedAtKill);
    await reading;

    expect(seen.map((c) => c.offset)).toEqual(Array.from({ length: TOTAL }, (_, i) => i));
    const data = seen.map((c) => c.data as Chunk);
    // Each chunk was written for its own offset: the rerun continued, it did not repeat.
    expect(data.every((d, i) => d.i === i)).toBe(true);
    expect(new Set(data.slice(0, committedAtKill).map((d) => d.pid))).toEqual(new Set([a.pid]));
    expect(new Set(data.slice(committedAtKill).map((d) => d.pid))).toEqual(new Set([b.pid]));
    const t = await waitUntil("the task to complete", async () => {
      const x = await r.get(id);
      return x?.status === "terminal" ? x : undefined;
    });
    expect(t.outcome).toBe("completed");
    expect(t.attempts).toBe(2);
    expect((await r.streams(id))[0]).toMatchObject({ length: TOTAL, closed: true });
  } finally {
    for (const w of workers) w.kill("SIGKILL");
    await Promise.all(workers.map((w) => w.exited));
    await r.close();
  }
}

describe("a stream's writer SIGKILLed mid-stream (spec §16)", () => {
  const sb = new Sandbox();
  afterAll(() => sb.cleanup());

  it("§16.5 SQLite: the reader gets every offset once across the kill; the rerun continues at the offset", async () => {
    await killMidStream(`sqlite:${sb.db}`);
  });

  describe("postgres", () => {
    if (!pgGate(it)) return;
    const schemas: string[] = [];
    afterEach(async () => {
      await dropSchemas(schemas.splice(0));
    });
    it("§16.5 PostgreSQL: the reader gets every offset once across the kill; the rerun continues at the offset", async () => {
      const schema = newSchemaName();
      schemas.push(schema);
      await killMidStream(PG_URL, schema);
    });
  });
});
