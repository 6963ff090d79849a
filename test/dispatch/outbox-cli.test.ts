/**
 * The outbox's interfaces for real (spec §21.11, §21.12): `ratchet outbox`, `outbox send --once`
 * with a config file's file sink, `outbox retry`, `outbox remove`, each a CLI process with --json
 * and as a table; and /metrics and GET /api/outbox on SQLite and PostgreSQL.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { systemClock } from "../../src/core/clock.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { forEachBackend, openRatchet } from "../engine/helpers.js";
import { startServer } from "../server/kit.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const MAIN = join(ROOT, "src/cli/main.ts");
const TSX = pathToFileURL(join(ROOT, "node_modules/tsx/dist/loader.mjs")).href;
const SECRET = `whsec_${Buffer.from("cli-secret-0123456789").toString("base64")}`;

describe("outbox commands (spec §21.11, §21.12)", () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it("§21.12 outbox --status lists destinations with lag and last error; §21.11 retry and remove; send --once delivers the config's file sink", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ratchet-outbox-cli-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const db = join(dir, "o.db");
    writeFileSync(
      join(dir, "ratchet.dispatch.json"),
      JSON.stringify({
        pipelines: [],
        workers: [],
        outbox: {
          destinations: [
            { name: "log", types: ["a.*"], sink: { type: "file", path: "facts.jsonl" } },
            // Nothing listens on port 9: every delivery fails, retryable.
            {
              name: "hook",
              types: ["*"],
              sink: { type: "webhook", url: "http://127.0.0.1:9/h?k=sekrit", secretsEnv: ["HOOK_SECRET"] },
            },
          ],
        },
      }),
    );
    const store = new SqliteStore({ path: db, clock: systemClock });
    await store.migrate();
    await store.outbox.append([
      { type: "a.b", subject: "s:1", data: 1 },
      { type: "x.y", subject: "s:2", data: 2 },
    ]);
    await store.close();
    const env = { ...process.env, RATCHET_STORE: `sqlite:${db}`, HOOK_SECRET: SECRET };
    const cli = (...args: string[]) =>
      spawnSync(process.execPath, ["--import", TSX, MAIN, ...args], { cwd: dir, encoding: "utf8", env });
    const ok = (...args: string[]) => {
      const r = cli(...args);
      expect(r.stderr).toBe("");
      expect(r.status).toBe(0);
      return r.stdout;
    };
    expect(JSON.parse(ok("outbox", "send", "--once", "--json"))).toMatchObject({ facts: 1, failures: 1 });
    expect(
      readFileSync(join(dir, "facts.jsonl"), "utf8")
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l).data),
    ).toEqual([1]);
    const st = JSON.parse(ok("outbox", "--status", "--json"));
    const hook = st.destinations.find((d: { name: string }) => d.name === "hook");
    expect(hook).toMatchObject({ state: "retrying", failures: 1, lagFacts: 2, cursor: "0" });
    expect(hook.lastError).toMatch(/^webhook: POST http:\/\/127\.0\.0\.1:9\/h: /);
    expect(st.destinations.find((d: { name: string }) => d.name === "log")).toMatchObject({
      state: "ok",
      lagFacts: 0,
    });
    const text = ok("outbox");
    expect(text).toMatch(/^DESTINATION\s+STATE\s+CURSOR\s+LAG/m);
    expect(text).toMatch(/^hook\s+retrying\s+0\s+2\s/m);
    for (const out of [text, JSON.stringify(st)]) {
      expect(out).not.toContain("sekrit");
      expect(out).not.toContain(SECRET.slice(6));
    }
    expect(JSON.parse(ok("outbox", "retry", "hook", "--json"))).toMatchObject({
      state: "retrying",
      nextAt: null,
    });
    const missing = cli("outbox", "retry", "nope");
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain("RATCHET_NOT_FOUND");
    const noSecret = spawnSync(process.execPath, ["--import", TSX, MAIN, "outbox", "send", "--once"], {
      cwd: dir,
      encoding: "utf8",
      env: { ...env, HOOK_SECRET: "" },
    });
    expect(noSecret.status).toBe(1);
    expect(noSecret.stderr).toContain("RATCHET_CONFIG");
    expect(noSecret.stderr).toContain("HOOK_SECRET is not set");
    ok("outbox", "remove", "hook");
    expect(JSON.parse(ok("outbox", "--json")).destinations.map((d: { name: string }) => d.name)).toEqual([
      "log",
    ]);
  }, 300_000); // eight CLI processes, each loading TypeScript through tsx
});

forEachBackend(() => {
  it("§21.12 /metrics has each destination's lag, delivered and failure counters and dead flag; GET /api/outbox its status", async () => {
    const r = await openRatchet([]);
    const o = r.store.outbox;
    await o.append([
      { type: "a.b", subject: "s:1", data: 1 },
      { type: "a.b", subject: "s:2", data: 2 },
    ]);
    const [f1] = await o.facts("0", 1);
    await o.ensureDestination("good", "start");
    await o.ensureDestination("bad", "start");
    await o.lease("good", "t", 10_000);
    await o.advance("good", "t", "0", f1!.seq, 1);
    await o.lease("bad", "t", 10_000);
    await o.fail("bad", "t", "0", { next: { kind: "dead", batch: "bad:1-2" }, error: "webhook: HTTP 410" });
    const s = await startServer(r);
    const text = await (await s.call("/metrics")).text();
    for (const line of [
      'ratchet_outbox_lag_facts{destination="good"} 1',
      'ratchet_outbox_lag_facts{destination="bad"} 2',
      'ratchet_outbox_delivered_total{destination="good"} 1',
      'ratchet_outbox_failures_total{destination="bad"} 1',
      'ratchet_outbox_dead{destination="bad"} 1',
      'ratchet_outbox_dead{destination="good"} 0',
      "# TYPE ratchet_outbox_lag_seconds gauge",
    ])
      expect(text.split("\n")).toContain(line);
    const api = (await (await s.call("/api/outbox")).json()) as { destinations: { name: string }[] };
    expect(api.destinations.find((d) => d.name === "bad")).toMatchObject({
      state: "dead",
      deadBatch: "bad:1-2",
      lastError: "webhook: HTTP 410",
      lagFacts: 2,
    });
  });
});
