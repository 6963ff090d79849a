/** `ratchet usage` and `ratchet providers` (spec §18.9), from a real process over a SQLite file. */
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parseSince } from "../../src/cli/commands/models.js";
import type { UsageRow } from "../../src/store/usage/ops.js";
import { FakeClock } from "../../src/testing/fake-clock.js";
import { openSqliteStore, tempDbPath } from "../engine/helpers.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const MAIN = path.join(ROOT, "src/cli/main.ts");
const CFG = { failures: 1, windowMs: 1000, coolDownMs: 60_000, probeMs: 1000 };

function row(key: string, over: Partial<UsageRow> = {}): UsageRow {
  return {
    key,
    status: "committed",
    conversationId: "c1",
    taskId: null,
    provider: "faux",
    model: "faux-1",
    route: "faux/faux-1",
    input: 10,
    output: 4,
    cached: 0,
    reasoning: 0,
    cost: 0.5,
    ...over,
  };
}

async function seeded(): Promise<
  (...args: string[]) => { status: number | null; stdout: string; stderr: string }
> {
  const db = tempDbPath();
  const store = await openSqliteStore(new FakeClock(Date.now()), db);
  await store.usage.recordUsage([row("a"), row("b", { conversationId: "c2", model: "faux-2" })], null);
  await store.breakers.reportBreaker("openai/gpt-4o", false, false, CFG);
  await store.close();
  const env = { ...process.env };
  delete env.RATCHET_STORE;
  return (...args) => {
    const r = spawnSync(process.execPath, ["--import", "tsx", MAIN, "--store", `sqlite:${db}`, ...args], {
      cwd: ROOT,
      env,
      encoding: "utf8",
      timeout: 60_000,
    });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  };
}

describe("ratchet usage / providers (spec §18.9)", () => {
  it("§18.9 usage prints totals and per-model rows, filtered by conversation, and --json", async () => {
    const cli = await seeded();
    const all = cli("--json", "usage");
    expect(all.stderr).toBe("");
    const parsed = JSON.parse(all.stdout) as {
      totals: { responses: number; cost: number };
      byModel: unknown[];
    };
    expect(parsed.totals).toMatchObject({ responses: 2, cost: 1 });
    expect(parsed.byModel).toHaveLength(2);
    const one = JSON.parse(cli("--json", "usage", "--conversation", "c2").stdout) as {
      totals: { responses: number };
    };
    expect(one.totals.responses).toBe(1);
    const text = cli("usage", "--since", "1h");
    expect(text.status).toBe(0);
    expect(text.stdout).toContain("faux-2");
    const bad = cli("usage", "--since", "yesterday");
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("RATCHET_USAGE");
  });

  it("§18.9 providers lists breakers with their states", async () => {
    const cli = await seeded();
    const text = cli("providers");
    expect(text.status).toBe(0);
    expect(text.stdout).toMatch(/openai\/gpt-4o\s+open/);
    const json = JSON.parse(cli("--json", "providers").stdout) as { key: string; state: string }[];
    expect(json).toMatchObject([{ key: "openai/gpt-4o", state: "open" }]);
  });

  it("§18.9 --since takes an ISO time or a duration ago", () => {
    expect(parseSince("2026-01-31T12:00:00Z")).toBe(Date.parse("2026-01-31T12:00:00Z"));
    expect(parseSince("2h", 10_000_000)).toBe(10_000_000 - 7_200_000);
    expect(() => parseSince("soon")).toThrow(/ISO/);
  });
});
