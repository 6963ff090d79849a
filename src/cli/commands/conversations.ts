/**
 * Conversation commands (spec §17.11): `ratchet conversations`, `ratchet conversation ID`,
 * `ratchet send ID TEXT` and `ratchet watch ID`. Reads need no definitions; `send` loads them
 * (--tasks or ratchet.config.js) to find the run (`defineRun`) it starts, by `--run` or the only one.
 */
import type { Command } from "commander";
import { Conversations } from "../../agent/conversations.js";
import { watchConversation } from "../../agent/watch-live.js";
import type { EntryRecord } from "../../store/conversations/types.js";
import { option, parseDuration, parseInteger, UsageError } from "../args.js";
import { iso, print, printJson, short, table } from "../format.js";
import { nextSignal, type Session, withSession } from "../session.js";

const WHEN_BUSY = ["follow-up", "steer", "reject"] as const;
const seqOption = option((t) => parseInteger(t, "--from", 0, Number.MAX_SAFE_INTEGER));
const limitOption = option((t) => parseInteger(t, "--limit", 1, 1_000));

/** One transcript line: `#seq kind[:name]  data  (task N)`. */
export function entryLine(e: EntryRecord): string {
  const kind = e.kind === "custom" ? `custom:${e.name}` : e.kind;
  const by = e.taskId === null ? "" : `  (task ${e.taskId})`;
  return `#${e.seq} ${kind}  ${short(e.data, 200)}${by}`;
}

/** Conversations over the session's store: reads need no run, so none is looked up for them. */
function reader(s: Session) {
  return s.ratchet.store.conversations;
}

export function registerConversations(program: Command): void {
  program
    .command("conversations")
    .description("list conversations (id order; --after ID pages on)")
    .option("--after <id>", "only conversations whose id sorts after this one")
    .option("--limit <n>", "at most this many (default 100, up to 1000)", limitOption)
    .action(async (o: { after?: string; limit?: number }, cmd: Command) => {
      await withSession(cmd, { mustExist: true }, async (s) => {
        const list = await reader(s).listConversations({ after: o.after, limit: o.limit ?? 100 });
        if (s.json) return printJson(list);
        print(
          table(
            ["ID", "ENTRIES", "RUN", "UPDATED", "TITLE"],
            list.map((c) => [
              c.id,
              String(c.length),
              c.runTaskId === null ? "-" : String(c.runTaskId),
              iso(c.updatedAt),
              c.title ?? "",
            ]),
          ),
        );
      });
    });

  program
    .command("conversation")
    .description("print a conversation's transcript and inbox")
    .argument("<id>", "conversation id")
    .option("--from <seq>", "first entry to print (default 0)", seqOption)
    .option("--limit <n>", "at most this many entries (default 1000)", limitOption)
    .action(async (id: string, o: { from?: number; limit?: number }, cmd: Command) => {
      await withSession(cmd, { mustExist: true }, async (s) => {
        const ops = reader(s);
        const conversation = await ops.getConversation(id);
        if (!conversation) throw new UsageError(`there is no conversation "${id}"`);
        const entries = await ops.entries(id, { from: o.from ?? 0, limit: o.limit ?? 1_000 });
        const inbox = await ops.inbox(id, 1_000);
        if (s.json) return printJson({ conversation, entries, inbox });
        for (const e of entries) print(entryLine(e));
        for (const q of inbox) print(`queued ${q.mode} #${q.id}  ${short(q.input, 200)}`);
        if (conversation.runTaskId !== null) print(`run in progress: task ${conversation.runTaskId}`);
      });
    });

  program
    .command("send")
    .description("submit input to a conversation (created when missing); the run starts or the input queues")
    .argument("<id>", "conversation id")
    .argument("<text>", "the input text (the user entry's data is { text })")
    .option("--request-id <r>", "idempotency key: sending it again returns the first submission")
    .option("--when-busy <mode>", "follow-up (default), steer or reject", (t: string) => {
      if (!(WHEN_BUSY as readonly string[]).includes(t))
        throw new UsageError(`--when-busy must be one of ${WHEN_BUSY.join(", ")}`);
      return t as (typeof WHEN_BUSY)[number];
    })
    .option("--run <name>", "the run definition to start (default: the only one loaded)")
    .option("--wait <duration>", "wait this long for the answer, e.g. 30s", option(parseDuration))
    .action(
      async (
        id: string,
        text: string,
        o: { requestId?: string; whenBusy?: (typeof WHEN_BUSY)[number]; run?: string; wait?: number },
        cmd: Command,
      ) => {
        await withSession(cmd, { definitions: true, requireDefinitions: true }, async (s) => {
          const c = Conversations.of(s.ratchet, { run: o.run });
          await c.create(id);
          const sub = await c.submit(id, { text }, { requestId: o.requestId, whenBusy: o.whenBusy });
          const settled = o.wait === undefined ? undefined : await sub.wait({ timeoutMs: o.wait });
          if (s.json)
            return printJson({ submission: settled?.submission ?? sub.record, created: sub.created });
          const state = settled
            ? settled.status === "done"
              ? `done at #${settled.answerSeq}`
              : `unanswered (${settled.reason})`
            : sub.record.status;
          print(`submission ${sub.id} ${sub.created ? "" : "(repeated request) "}${state}`);
        });
      },
    );

  program
    .command("watch")
    .description("print a conversation's entries as they are committed, until it is idle")
    .argument("<id>", "conversation id")
    .option("--from <seq>", "first entry to print (default 0)", seqOption)
    .option("--timeout <duration>", "give up after this long (default 10m)", option(parseDuration))
    .action(async (id: string, o: { from?: number; timeout?: number }, cmd: Command) => {
      await withSession(cmd, { mustExist: true }, async (s) => {
        const stop = new AbortController();
        void nextSignal().then(() => stop.abort());
        // Entries and the run's live stream output (spec §16.5), interleaved as they commit.
        let source = "";
        let midLine = false;
        for await (const ev of watchConversation(s.ratchet, id, {
          from: o.from ?? 0,
          timeoutMs: o.timeout ?? 600_000,
          signal: stop.signal,
        })) {
          if (s.json) {
            print(JSON.stringify(ev.kind === "entry" ? ev.entry : ev));
            continue;
          }
          if (ev.kind === "chunk") {
            const from = `#${ev.taskId} ${ev.stream}`;
            if (from !== source) process.stdout.write(`${midLine ? "\n" : ""}[${from}] `);
            source = from;
            const text = typeof ev.data === "string" ? ev.data : `${JSON.stringify(ev.data)}\n`;
            process.stdout.write(text);
            midLine = text.length > 0 && !text.endsWith("\n");
            continue;
          }
          if (midLine) process.stdout.write("\n");
          midLine = false;
          source = "";
          print(
            ev.kind === "entry"
              ? entryLine(ev.entry)
              : `(not following stream ${ev.stream} of task ${ev.taskId})`,
          );
        }
        if (midLine) process.stdout.write("\n");
      });
    });
}
