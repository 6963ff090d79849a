/** The worker contract suite (spec §20.16–§20.17) on the fake, process and tmux adapters, for real. */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  CONTRACT_PR_URL,
  dirControls,
  FLOOD_LINE,
  registerWorkerContract,
  shellBehaviour,
} from "../../src/dispatch/testing/worker-contract.js";
import { FakeWorker } from "../../src/dispatch/workers/fake.js";
import { ProcessWorker } from "../../src/dispatch/workers/process.js";
import { TmuxWorker } from "../../src/dispatch/workers/tmux.js";

const runner = { describe, it, expect, afterAll };

const released = new Set<string>();
registerWorkerContract<FakeWorker>({
  name: "fake",
  open: async (clock, o) =>
    new FakeWorker({
      clock,
      ...o,
      programs: {
        exit0: (s) => s.say("hello\n").closeout({ outcome: "succeeded", summary: "ok", data: null }).exit(0),
        exit3: (s) => s.say("bad\n").exit(3),
        wait: (s) => (released.has(s.id) ? s.say("ready\ngo\n").exit(0) : s.say("ready\n")),
        turn: (s) => s.say("ready\n").attention("turn-ended").agentSession("agent-7"),
        limit: (s) =>
          released.has(s.id) ? s.say("go\n").exit(0) : s.say("ready\n").usageLimit(1_800_000_000_000),
        pr: (s) => s.say(`opened ${CONTRACT_PR_URL}\nready\n`),
        flood: (s) => s.say(`${FLOOD_LINE}\n`.repeat(3_000)).say(`opened ${CONTRACT_PR_URL}\nready\n`),
      },
    }),
  spawn: (behaviour, name) => ({ name, command: [behaviour], prompt: null, cwd: null, env: {} }),
  release: async (w, s) => {
    released.add(s);
    w.session(s).say("go\n").exit(0);
  },
  poke: async (w, s) => {
    w.session(s).say("more output\n");
  },
  ready: async () => true,
  runner,
});

const root = mkdtempSync(join(tmpdir(), "ratchet-process-worker-"));
let n = 0;
registerWorkerContract<ProcessWorker>({
  name: "process",
  open: async (clock, o) => new ProcessWorker({ root: join(root, String(++n)), clock, ...o }),
  spawn: (behaviour, name) => ({
    name,
    command: ["sh", "-c", shellBehaviour(behaviour)],
    prompt: null,
    cwd: null,
    env: {},
  }),
  ...dirControls<ProcessWorker>(),
  cleanup: async () => rmSync(root, { recursive: true, force: true }),
  runner,
});

const tmuxRoot = mkdtempSync(join(tmpdir(), "ratchet-tmux-worker-"));
const socket = `ratchet-test-${process.pid}`;
let t = 0;
registerWorkerContract<TmuxWorker>({
  name: "tmux",
  open: async (clock, o) => new TmuxWorker({ root: join(tmuxRoot, String(++t)), socket, clock, ...o }),
  spawn: (behaviour, name) => ({
    name,
    command: ["sh", "-c", shellBehaviour(behaviour)],
    prompt: null,
    cwd: null,
    env: {},
  }),
  ...dirControls<TmuxWorker>(),
  cleanup: async () => {
    await new Promise((r) => execFile("tmux", ["-L", socket, "kill-server"], () => r(null)));
    // tmux leaves its socket file behind after kill-server.
    rmSync(join(process.env.TMUX_TMPDIR ?? "/tmp", `tmux-${process.getuid?.() ?? 0}`, socket), {
      force: true,
    });
    rmSync(tmuxRoot, { recursive: true, force: true });
  },
  runner,
});
