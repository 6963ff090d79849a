/**
 * `ratchet chat [ID]`: a terminal chat on a durable agent (spec §19.15, §18.7), on the store the
 * CLI is given (embedded SQLite by default). The answer streams as the model writes it; Ctrl-C
 * while it answers aborts the run's tree bottom-up (Ctrl-C at the prompt leaves). A `kill -9`
 * mid-answer loses nothing committed: `ratchet chat ID` again resumes the run in progress — its
 * committed turns are not requested again — and then goes on.
 *
 * `--provider faux` (the default) is a scripted model that answers in its own words, for demos and
 * tests; `--provider openai-compatible` talks to any Chat Completions endpoint (OPENAI_API_KEY,
 * `--base-url`, `--model`). `--tools read,edit,bash --cwd DIR` gives the agent coding tools.
 */
import { createInterface } from "node:readline";
import type { Command } from "commander";
import { defineAgent } from "../../agent/agent.js";
import { Conversations } from "../../agent/conversations.js";
import { bashTool } from "../../agent/tools/bash.js";
import { defineToolCalls } from "../../agent/tools/calls.js";
import type { ToolDefinition } from "../../agent/tools/define.js";
import { editTool, findTool, grepTool, lsTool, readTool, writeTool } from "../../agent/tools/files.js";
import { watchConversation } from "../../agent/watch-live.js";
import { silentLogger } from "../../engine/options.js";
import { Ratchet } from "../../engine/ratchet.js";
import { ConfigError } from "../../errors.js";
import { fauxModel } from "../../models/faux.js";
import { openAICompatible } from "../../models/openai-compatible.js";
import type { LanguageModel } from "../../models/stream.js";
import { option, parseInteger, parseList, UsageError } from "../args.js";
import { chatPrinter } from "../chat-printer.js";
import { readConfigFile, resolveStore } from "../config.js";
import { globalFlags } from "../session.js";

const TOOLS: Record<string, ToolDefinition<unknown>> = {
  read: readTool,
  write: writeTool,
  edit: editTool,
  bash: bashTool,
  ls: lsTool,
  find: findTool,
  grep: grepTool,
} as Record<string, ToolDefinition<unknown>>;

interface ChatFlags {
  provider?: string;
  model?: string;
  baseUrl?: string;
  message?: string;
  tools?: string[];
  cwd?: string;
  fauxRate?: number;
}

/** A line `/call TOOL {json args}`: the faux model calls TOOL (spec §19.32). */
const CALL_LINE = /^\/call ([a-zA-Z][a-zA-Z0-9_-]{0,63}) (\{.*\})$/;

/**
 * The faux provider of the chat: it says what it was told, a few characters at a time. A message
 * made of `/call TOOL {json}` lines asks it to call those tools (one round, ids from the prompt's
 * length so a re-request asks the same calls); after their results it names each and whether it
 * failed (spec §19.32).
 */
function chatFaux(rate: number | undefined): LanguageModel {
  const pace = rate ? { tokensPerSecond: rate } : {};
  return fauxModel({
    modelId: "faux-chat",
    scripts: (_n, call) => {
      const last = call.prompt[call.prompt.length - 1];
      if (last?.role === "tool") {
        const said = last.content.map((p) =>
          p.type === "tool-result"
            ? `${p.toolName}${p.output.type === "text" && p.output.value.startsWith("error:") ? " (error)" : ""}`
            : "",
        );
        return { text: `The tools answered: ${said.join(", ")}.`, ...pace };
      }
      const users = call.prompt.filter((m) => m.role === "user");
      const user = users[users.length - 1];
      const said =
        user?.role === "user" ? user.content.map((p) => (p.type === "text" ? p.text : "")).join("") : "";
      const lines = said.split("\n").filter((l) => l.trim() !== "");
      if (last === user && lines.length > 0 && lines.every((l) => CALL_LINE.test(l)))
        return {
          toolCalls: lines.map((l, i) => {
            const [, name, args] = CALL_LINE.exec(l)!;
            return { id: `c${call.prompt.length}-${i}`, name: name!, input: JSON.parse(args!) as unknown };
          }),
        };
      return {
        text: `You said: "${said}". This is the faux model; give --provider openai-compatible for a real one.`,
        ...pace,
      };
    },
  });
}

function modelOf(o: ChatFlags): LanguageModel {
  const provider = o.provider ?? "faux";
  if (provider === "faux") return chatFaux(o.fauxRate);
  if (provider !== "openai-compatible")
    throw new UsageError(`--provider must be faux or openai-compatible (got "${provider}")`);
  const key = process.env.OPENAI_API_KEY;
  if (!key && !o.baseUrl)
    throw new ConfigError(
      "--provider openai-compatible needs OPENAI_API_KEY (or --base-url of a local server)",
    );
  return openAICompatible({
    baseURL: o.baseUrl ?? process.env.OPENAI_BASE_URL ?? "https://api.openai.com/v1",
    modelId: o.model ?? process.env.RATCHET_MODEL ?? "gpt-4o-mini",
    ...(key ? { apiKey: key } : {}),
  });
}

export function registerChat(program: Command): void {
  program
    .command("chat")
    .description("chat with a durable agent in the terminal (faux model unless --provider openai-compatible)")
    .argument("[id]", "conversation id (default: chat)")
    .option("--provider <name>", "faux | openai-compatible (default faux)")
    .option("--model <id>", "model id for openai-compatible (default gpt-4o-mini or RATCHET_MODEL)")
    .option("--base-url <url>", "Chat Completions base URL (default OPENAI_BASE_URL or OpenAI's)")
    .option("--message <text>", "send one message, print the answer, exit")
    .option(
      "--tools <list>",
      `coding tools to give the agent: ${Object.keys(TOOLS).join(",")}`,
      option(parseList),
    )
    .option("--cwd <dir>", "the tools' working directory (default: here)")
    .option(
      "--faux-rate <n>",
      "faux model: chunks per second (default: as fast as possible)",
      option((t) => parseInteger(t, "--faux-rate", 1, 100_000)),
    )
    .action(async (id: string | undefined, o: ChatFlags, cmd: Command) => {
      const conv = id ?? "chat";
      const unknown = (o.tools ?? []).filter((t) => !(t in TOOLS));
      if (unknown.length > 0) throw new UsageError(`unknown tool(s): ${unknown.join(", ")}`);
      const model = modelOf(o);
      const calls = o.tools?.length
        ? defineToolCalls({ tools: o.tools.map((t) => TOOLS[t]!), maxMs: 10_000 })
        : undefined;
      const agent = defineAgent({
        name: "ratchet.chat",
        model,
        // Heartbeats every 2 s while it answers; after a kill -9 the next `ratchet chat` takes the
        // run over within maxMs + leaseGraceMs (8 s).
        maxMs: 6_000,
        ...(calls ? { tools: calls } : {}),
        cwd: o.cwd ?? process.cwd(),
        instructions: "You are a helpful assistant in a terminal.",
      });
      const store = resolveStore(globalFlags(cmd), await readConfigFile());
      const ratchet = await Ratchet.open({
        store,
        tasks: calls ? [agent.task, calls.task] : [agent.task],
        logger: silentLogger,
        leaseGraceMs: 2_000,
        streamIntervalMs: 50,
      });
      try {
        const conversations = new Conversations(ratchet, { run: agent });
        await conversations.create(conv);
        await ratchet.start({ concurrency: 8 });
        const follow = async (from: number) => {
          const p = chatPrinter((t) => process.stdout.write(t));
          const stop = new AbortController();
          let aborting: Promise<unknown> | undefined;
          const onInt = () => {
            aborting ??= conversations.abort(conv, { timeoutMs: 30_000 }).catch(() => {});
          };
          process.on("SIGINT", onInt);
          try {
            for await (const e of watchConversation(ratchet, conv, { from, signal: stop.signal, pollMs: 50 }))
              p.event(e);
            // spec §19.32: the abort resolves once the run's tree ended bottom-up; then the chat goes on.
            if (aborting) {
              await aborting;
              p.end();
              process.stdout.write("(aborted)\n");
            }
          } finally {
            process.off("SIGINT", onInt);
            p.end();
          }
        };
        const nextSeq = async () => (await conversations.get(conv))?.length ?? 0;
        const current = await conversations.get(conv);
        if (current?.runTaskId != null) {
          process.stdout.write("(resuming the answer in progress)\n");
          await follow(await nextSeq());
        }
        if (o.message !== undefined) {
          const from = await nextSeq();
          await conversations.submit(conv, { text: o.message });
          await follow(from);
          return;
        }
        const rl = createInterface({
          input: process.stdin,
          output: process.stdout,
          terminal: process.stdin.isTTY,
        });
        const lines = rl[Symbol.asyncIterator]();
        const ask = async (): Promise<string | null> => {
          if (process.stdin.isTTY) {
            rl.setPrompt("you> ");
            rl.prompt();
          }
          const n = await lines.next();
          return n.done ? null : n.value;
        };
        for (;;) {
          const text = await ask();
          if (text === null) break;
          if (text.trim() === "") continue;
          const from = await nextSeq();
          // spec §19.20: /compact asks the agent to compact its context now.
          await conversations.submit(conv, text.trim() === "/compact" ? { type: "compact" } : { text });
          await follow(from);
        }
        rl.close();
      } finally {
        await ratchet.close();
      }
    });
}
