/**
 * A durable coding agent (spec §19): it reads a scratch repository, edits a file, runs a command
 * to check the edit, and answers — a faux model by default; a real OpenAI-compatible one when
 * OPENAI_API_KEY is set (OPENAI_BASE_URL and RATCHET_MODEL optional).
 *
 *   node dist/examples/coding-agent/run.js [DB] [--crash-in-bash]
 *
 * With --crash-in-bash the process SIGKILLs itself while the agent's bash command runs, the way a
 * deploy or an OOM would. Running it again without the flag (same DB) finishes the conversation:
 * committed turns are not requested again, the read and edit are not redone, and the bash call —
 * unsafe to replay — is answered `interrupted` with what it had printed, so the model moves on.
 * It prints the transcript and checks its claims (exit 1 when one fails).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import {
  type AssistantData,
  bashTool,
  Conversations,
  defineAgent,
  defineToolCalls,
  editTool,
  readTool,
} from "../../src/agent/index.js";
import { Ratchet, silentLogger } from "../../src/index.js";
import { fauxModel, type LanguageModel, openAICompatible } from "../../src/models/index.js";

const args = process.argv.slice(2);
const crash = args.includes("--crash-in-bash");
const db = resolve(args.find((a) => !a.startsWith("--")) ?? "coding-agent.db");
const repo = join(dirname(db), "scratch-repo");
if (!existsSync(join(repo, "greet.js"))) {
  mkdirSync(repo, { recursive: true });
  writeFileSync(join(repo, "greet.js"), 'export const greet = (name) => "Hello " + name;\n');
}

// The faux model plays a careful coding agent; the bash call's sleep gives --crash-in-bash its moment.
// Scripts by the turn the prompt is at (its assistant messages), so a resumed process picks up there.
const SCRIPTS = [
  { text: "Let me read the file.", toolCalls: [{ id: "c1", name: "read", input: { path: "greet.js" } }] },
  {
    text: "I'll add the missing comma and exclamation mark.",
    toolCalls: [
      {
        id: "c2",
        name: "edit",
        input: { path: "greet.js", oldText: '"Hello " + name', newText: "`Hello, ${name}!`" },
      },
    ],
  },
  {
    text: "Now I check it.",
    toolCalls: [
      {
        id: "c3",
        name: "bash",
        input: {
          command: `node -e 'import("./greet.js").then(m => console.log(m.greet("Ada")))'; ${crash ? "sleep 30" : "true"}`,
        },
      },
    ],
  },
  { text: "Done: greet() now returns `Hello, Ada!` for Ada." },
];
const faux = fauxModel({
  scripts: (_n, call) =>
    SCRIPTS[Math.min(call.prompt.filter((m) => m.role === "assistant").length, SCRIPTS.length - 1)]!,
});
const model: LanguageModel = process.env.OPENAI_API_KEY
  ? openAICompatible({
      baseURL: process.env.OPENAI_BASE_URL ?? "https://api.openai.com/v1",
      apiKey: process.env.OPENAI_API_KEY,
      modelId: process.env.RATCHET_MODEL ?? "gpt-4o-mini",
    })
  : faux;

// Short leases for the calls (they heartbeat while they run): a killed worker's call is taken over in seconds.
const tools = defineToolCalls({ tools: [readTool, editTool, bashTool], maxMs: 3_000 });
const agent = defineAgent({
  name: "coding-agent",
  model,
  tools,
  cwd: repo,
  instructions: "You are a careful coding agent. Read before you edit; check your edit with bash.",
});

const ratchet = await Ratchet.open({
  store: `sqlite:${db}`,
  tasks: [agent.task, tools.task],
  logger: silentLogger,
  leaseGraceMs: 500,
});
const conversations = new Conversations(ratchet, { run: agent });
await conversations.create("fix-greet");
const sub = await conversations.submit(
  "fix-greet",
  { text: "greet.js should say Hello, NAME! — fix it." },
  { requestId: "fix-1" },
);
await ratchet.start({ concurrency: 4 });

if (crash) {
  // SIGKILL while the bash call runs: its task has committed its intent, started the command and
  // committed some of its output (the call's "processes" stream, spec §19.30, opens before any).
  for (;;) {
    const kids = await ratchet.list({ name: "ratchet.tool-call", limit: 10 });
    const bash = kids.find((t) => (t.input as { tool?: string }).tool === "bash" && t.status === "running");
    const out = bash && (await ratchet.streams(bash.id)).find((s) => s.name === "output");
    if (out && out.length > 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  console.log("crashing now, in the middle of the bash call (SIGKILL)");
  process.kill(process.pid, "SIGKILL");
}

const settled = await sub.wait({ timeoutMs: 60_000 });
await ratchet.close();
const entries = await (async () => {
  const again = await Ratchet.open({
    store: `sqlite:${db}`,
    tasks: [agent.task, tools.task],
    logger: silentLogger,
  });
  const c = new Conversations(again, { run: agent });
  const e = await c.entries("fix-greet");
  await again.close();
  return e;
})();
for (const e of entries) {
  const d = e.data as AssistantData & {
    content?: unknown;
    tool?: string;
    interrupted?: boolean;
    text?: string;
  };
  if (e.kind === "assistant")
    console.log(
      `assistant: ${d.text}${d.toolCalls ? ` → ${d.toolCalls.map((c) => c.name).join(", ")}` : ""}`,
    );
  else if (e.kind === "tool-result")
    console.log(`  ${d.tool}${d.interrupted ? " (interrupted)" : ""}: ${String(d.content).split("\n")[0]}`);
  else console.log(`${e.kind}: ${d.text ?? JSON.stringify(d)}`);
}

const fails: string[] = [];
const check = (ok: boolean, what: string) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) fails.push(what);
};
check(settled.status === "done", "the request was answered");
check(readFileSync(join(repo, "greet.js"), "utf8").includes("`Hello, ${name}!`"), "greet.js was edited once");
if (!process.env.OPENAI_API_KEY) {
  const assistants = entries.filter((e) => e.kind === "assistant").length;
  check(assistants === 4, `four assistant entries, no turn twice (${assistants})`);
  const results = entries.filter((e) => e.kind === "tool-result").map((e) => e.data as { tool: string });
  check(results.map((r) => r.tool).join(",") === "read,edit,bash", "one result per call, in order");
  const bash = entries.find((e) => e.kind === "tool-result" && (e.data as { tool: string }).tool === "bash");
  const b = bash?.data as { content: string; interrupted?: boolean } | undefined;
  check(
    String(b?.content).includes("Hello, Ada!"),
    "the bash call's output reached the model (interrupted or not)",
  );
}
process.exit(fails.length === 0 ? 0 : 1);
