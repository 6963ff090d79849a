/**
 * The tmux adapter sees its sessions' owners (spec §20.17, §20.5): while a
 * client is attached (here a control-mode client, as a terminal would be),
 * a reading's lastOwnerAt is now; after it leaves, the last time it was seen.
 */
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { shellBehaviour, until } from "../../src/dispatch/testing/worker-contract.js";
import { TmuxWorker } from "../../src/dispatch/workers/tmux.js";
import { FakeClock } from "../../src/testing/fake-clock.js";

const root = mkdtempSync(join(tmpdir(), "ratchet-tmux-owner-"));
const socket = `ratchet-owner-${process.pid}`;
afterAll(async () => {
  await new Promise((r) => execFile("tmux", ["-L", socket, "kill-server"], () => r(null)));
  // tmux leaves its socket file behind after kill-server.
  rmSync(join(process.env.TMUX_TMPDIR ?? "/tmp", `tmux-${process.getuid?.() ?? 0}`, socket), { force: true });
  rmSync(root, { recursive: true, force: true });
});

const clients = () =>
  new Promise<string>((resolve) =>
    execFile("tmux", ["-L", socket, "list-clients", "-F", "#{client_name}"], (_e, out) =>
      resolve(String(out ?? "").trim()),
    ),
  );

describe("tmux owners (spec §20.17)", () => {
  it("§20.17 an attached client makes lastOwnerAt now; after it detaches the reading keeps when it was last seen", async () => {
    const clock = new FakeClock();
    const w = new TmuxWorker({ root, socket, clock });
    const name = `owner-${process.pid}`;
    const req = { name, command: ["sh", "-c", shellBehaviour("wait")], prompt: null, cwd: null, env: {} };
    expect(await w.start(req)).toEqual({ kind: "started", session: name });
    try {
      const first = await until("a running reading", async () => {
        const r = await w.read(name);
        return r.kind === "running" ? r : null;
      });
      expect(first.lastOwnerAt).toBeNull();
      const client = spawn("tmux", ["-L", socket, "-f", "/dev/null", "-C", "attach", "-t", `=${name}`], {
        stdio: ["pipe", "ignore", "ignore"],
      });
      const gone = new Promise((r) => client.on("exit", r));
      clock.advance(60_000);
      const seen = clock.now();
      await until("the owner seen", async () => {
        const r = await w.read(name);
        return r.kind === "running" && r.lastOwnerAt === seen;
      });
      client.kill("SIGTERM");
      await gone;
      // The clock moves only once tmux no longer lists the client, so no reading can see it attached later.
      await until("tmux to drop the client", async () => (await clients()) === "");
      clock.advance(60_000);
      const later = await w.read(name);
      expect(later).toMatchObject({ kind: "running", lastOwnerAt: seen });
      writeFileSync(join(w.dirs.dir(name), "go"), "");
      await until("the end", async () => (await w.read(name)).kind === "ended");
    } finally {
      await w.forget(name);
    }
  });
});
