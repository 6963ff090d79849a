/**
 * The examples in examples/agent and examples/approval, run the way the README
 * says (`node dist/examples/<name>/run.js`, after `npm run build`), each as a
 * child process with a fresh SQLite file and a 30 s bound. Each example checks
 * its own claims and exits 1 when one fails; these tests also read the output.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const BOUND_MS = 30_000;
const dirs: string[] = [];

afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function runExample(name: string): { status: number | null; stdout: string; stderr: string } {
  const script = join(ROOT, "dist/examples", name, "run.js");
  if (!existsSync(script)) throw new Error(`${script} is missing: run \`npm run build\` first`);
  const dir = mkdtempSync(join(tmpdir(), `ratchet-example-${name}-`));
  dirs.push(dir);
  const env = { ...process.env };
  delete env.RATCHET_STORE;
  const r = spawnSync(process.execPath, [script, join(dir, `${name}.db`)], {
    cwd: dir,
    encoding: "utf8",
    env,
    timeout: BOUND_MS,
    killSignal: "SIGKILL",
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("examples", () => {
  it(
    "agent: an aborted agent stops its running tool calls, runs handlers bottom-up, keeps its background subagent",
    () => {
      const r = runExample("agent");
      expect(r.stderr).toBe("");
      expect(r.status).toBe(0);
      const out = r.stdout;
      expect(out).toMatch(/^ {2}#\d+ agent\.turn aborted$/m);
      expect(out).toMatch(/└ #\d+ agent\.subagent "subagent" completed \[background\]$/m);
      expect(out.match(/└ #\d+ agent\.tool "t\d\.\w+" completed$/gm)).toHaveLength(4);
      expect(out.match(/└ #\d+ agent\.tool "t1\.\w+" aborted$/gm)).toHaveLength(3);
      expect(out.match(/saw ctx\.signal abort \(RATCHET_ABORTED\)/g)).toHaveLength(2);
      // Handlers bottom-up: both tool calls' onAbort lines come before the agent's.
      const agentHandler = out.indexOf("agent onAbort:");
      expect(agentHandler).toBeGreaterThan(0);
      const toolHandlers = [...out.matchAll(/onAbort \(mode "abort"\)/g)].map((m) => m.index);
      expect(toolHandlers).toHaveLength(2);
      for (const i of toolHandlers) expect(i).toBeLessThan(agentHandler);
      expect(out).toMatch(/ok {3}never started, aborted without running code: #\d+ notify$/m);
      expect(out).toMatch(
        /ok {3}background subagent #\d+: (running|waiting|pending) when the agent ended, then completed$/m,
      );
      expect(out).not.toContain("FAIL");
      expect(out.trimEnd().endsWith("all checks passed")).toBe(true);
    },
    BOUND_MS + 5_000,
  );

  it(
    "approval: a signal before the wait, a signal after it, and a timeout",
    () => {
      const r = runExample("approval");
      expect(r.stderr).toBe("");
      expect(r.status).toBe(0);
      const out = r.stdout;
      expect(out).toMatch(/ok {3}v1\.0 #\d+: .* -> approved by ana, published \(run 1x\)$/m);
      expect(out).toMatch(/ok {3}v1\.1 #\d+: .* -> rejected by bo, rolled back \(run 2x\)$/m);
      expect(out).toMatch(/ok {3}v1\.2 #\d+: no signal within \d+ ms -> timed out, rolled back \(run 2x\)$/m);
      expect(out).toContain("signal approve:v1.1 {approved: false} -> first true, woke 1");
      expect(out).toContain("signal approve:v1.2 after its timeout -> first true, woke 0");
      expect(out).not.toContain("FAIL");
      expect(out.trimEnd().endsWith("all checks passed")).toBe(true);
    },
    BOUND_MS + 5_000,
  );
});
