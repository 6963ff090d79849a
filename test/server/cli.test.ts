/** `ratchet serve`: opens the store like the other commands, serves until SIGTERM, then exits 0. Needs `npm run build`. */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import { until } from "../engine/helpers.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const MAIN = path.join(ROOT, "dist/src/cli/main.js");
const INDEX = path.join(ROOT, "dist/src/index.js");
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function setup(): { dir: string; env: NodeJS.ProcessEnv; args: string[] } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ratchet-serve-"));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(
    path.join(dir, "tasks.mjs"),
    `import { defineTask } from ${JSON.stringify(INDEX)};
export const hello = defineTask({ name: "hello", run: (ctx, input) => ({ hi: input?.name ?? null }) });
`,
  );
  const env = { ...process.env };
  delete env.RATCHET_STORE;
  delete env.RATCHET_TOKEN;
  const args = [MAIN, "--store", `sqlite:${path.join(dir, "t.db")}`];
  const migrated = spawnSync(process.execPath, [...args, "migrate"], { cwd: dir, env, encoding: "utf8" });
  expect(migrated.status).toBe(0);
  return { dir, env, args };
}

function serve(c: ReturnType<typeof setup>, extra: string[], env: NodeJS.ProcessEnv = c.env) {
  const child: ChildProcess = spawn(
    process.execPath,
    [...c.args, "--tasks", "tasks.mjs", "--json", "serve", "--port", "0", ...extra],
    {
      cwd: c.dir,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  cleanups.push(() => child.kill("SIGKILL"));
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d) => {
    stdout += d;
  });
  child.stderr!.on("data", (d) => {
    stderr += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, exited, out: () => stdout, err: () => stderr };
}

/** The url of the `listening` event (--json prints indented JSON). */
function listening(p: { out(): string }): Promise<string> {
  return until(() => /"url": "([^"]+)"/.exec(p.out())?.[1], "serve to listen", 20_000);
}

it("HTTP API: `ratchet serve --port 0` serves the store (enqueue by name with --tasks) and stops cleanly on SIGTERM", async () => {
  const c = setup();
  const p = serve(c, []);
  const url = await listening(p);
  expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  expect(p.err()).toMatch(/unauthenticated, on loopback only/);
  const res = await fetch(`${url}/api/tasks`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ task: "hello", input: { name: "x" } }),
  });
  expect(res.status).toBe(201);
  const list = (await (await fetch(`${url}/api/tasks`)).json()) as { tasks: { name: string }[] };
  expect(list.tasks.map((t) => t.name)).toEqual(["hello"]);
  p.child.kill("SIGTERM");
  expect(await p.exited).toBe(0);
  expect(p.out()).toContain('"stopped"');
});

it("HTTP API: `ratchet serve --host 0.0.0.0` without RATCHET_TOKEN exits 1 with RATCHET_CONFIG; with it, requires the token", async () => {
  const c = setup();
  const refused = serve(c, ["--host", "0.0.0.0"]);
  expect(await refused.exited).toBe(1);
  expect(refused.err()).toMatch(/error \[RATCHET_CONFIG\]: refusing to listen on 0\.0\.0\.0 without a token/);
  const token = "cli-token-0123456789abcdef";
  const p = serve(c, ["--host", "0.0.0.0"], { ...c.env, RATCHET_TOKEN: token });
  const port = new URL(await listening(p)).port;
  expect((await fetch(`http://127.0.0.1:${port}/api/stats`)).status).toBe(401);
  const ok = await fetch(`http://127.0.0.1:${port}/api/stats`, {
    headers: { authorization: `Bearer ${token}` },
  });
  expect(ok.status).toBe(200);
  p.child.kill("SIGINT");
  expect(await p.exited).toBe(0);
});
