/** `ratchet prs`, `ratchet pr link` and the why commands' pull-request waits (spec §22.7, §22.8, §22.10). */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/core/clock.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const MAIN = join(ROOT, "src/cli/main.ts");
const TSX = pathToFileURL(join(ROOT, "node_modules/tsx/dist/loader.mjs")).href;
const TOKEN = "ghp_cliSECRET0123456789";
const dir = mkdtempSync(join(tmpdir(), "ratchet-prs-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("pull-request commands", () => {
  it("§22.8 pr link links by hand (idempotent), prs lists, item why and dispatch why say what the item waits for", async () => {
    const db = join(dir, "d.db");
    const store = new SqliteStore({ path: db, clock: systemClock });
    await store.migrate();
    const item = await store.dispatch.addItem("ship", "build", "{}");
    const r = await store.dispatch.startAttempt({
      itemId: item.id,
      phase: "build",
      worker: "w",
      mode: "agent",
      defaultSeats: null,
      holder: "h",
      leaseMs: 30_000,
      spawnFor: () => "{}",
    });
    if (r.kind !== "started") throw new Error("not started");
    const g = { id: r.attempt.id, version: r.attempt.version, holder: "h" };
    const s = { state: "succeeded" as const, forced: null, sessionStopped: true, closeout: null };
    const route = { step: "cleanup", state: "open" as const, taken: {}, resumeNext: false, notBefore: null };
    await store.dispatch.settleAttempt(g, s, { ...route, prWait: { for: "pr-merged" } }, null, {});
    await store.close();
    const step = (name: string) => ({ name, worker: "proc", spawn: { command: ["true"] } });
    const config = {
      pipelines: [
        {
          name: "ship",
          steps: [
            { ...step("build"), on: { succeeded: { to: "cleanup", waitFor: "pr-merged" } } },
            step("cleanup"),
          ],
        },
      ],
      workers: [{ kind: "proc", type: "process", root: "sessions" }],
      forge: { type: "github" },
    };
    writeFileSync(join(dir, "ratchet.dispatch.json"), JSON.stringify(config));

    const env = { ...process.env, RATCHET_STORE: `sqlite:${db}`, GITHUB_TOKEN: TOKEN };
    const cli = (...args: string[]) =>
      spawnSync(process.execPath, ["--import", TSX, MAIN, ...args], { cwd: dir, encoding: "utf8", env });
    const outputs: string[] = [];
    const ok = (...args: string[]) => {
      const res = cli(...args);
      outputs.push(res.stdout, res.stderr);
      expect(res.stderr).toBe("");
      expect(res.status).toBe(0);
      return res.stdout;
    };

    expect(ok("item", "why", item.id)).toContain("none is linked yet");
    const url = "https://github.com/acme/widgets/pull/7";
    const linked = JSON.parse(ok("pr", "link", r.attempt.id, `${url}/files`, "--json"));
    expect(linked).toMatchObject({ created: true, pull: { url, number: 7, state: null } });
    expect(ok("pr", "link", r.attempt.id, url)).toContain("already linked");
    const list = JSON.parse(ok("prs", "--item", item.id, "--json"));
    expect(list.map((p: { url: string }) => p.url)).toEqual([url]);
    expect(ok("prs")).toContain(url);
    expect(ok("item", "why", item.id)).toContain(`it waits for ${url} to be merged; it is not looked at yet`);
    expect(JSON.parse(ok("dispatch", "why", r.attempt.id, "--json")).prWait).toContain(url);
    const bad = cli("pr", "link", r.attempt.id, "https://github.com.evil.com/a/b/pull/1");
    outputs.push(bad.stdout, bad.stderr);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("not a pull-request URL");
    // spec §22.10: the token in the environment shows nowhere.
    expect(outputs.join("\n")).not.toContain(TOKEN);
  }, 120_000);
});
