/**
 * Runs the calculator conversation (tasks.ts) on a SQLite file and checks what it shows:
 *
 *   npm run build && node dist/examples/conversation/run.js [path/to/file.db]
 *
 * 1. three inputs at once: the first starts a run, the others queue as follow-ups and are answered
 *    in order, one run each; a repeated requestId returns the first submission;
 * 2. an input whose tool waits: abort withdraws the input queued behind it, aborts the run and its
 *    tool bottom-up, and keeps the entries already written.
 * Exits 1 when a claim does not hold.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Conversations, watchEntries } from "../../src/agent/index.js";
import { Ratchet, silentLogger } from "../../src/index.js";
import { calc, calculator } from "./tasks.js";

const file = process.argv[2] ?? join(mkdtempSync(join(tmpdir(), "ratchet-conversation-")), "conversation.db");
const ratchet = await Ratchet.open({
  store: `sqlite:${file}`,
  tasks: [calculator.task, calc],
  logger: silentLogger,
  pollIntervalMs: 20,
});
const conversations = new Conversations(ratchet, { run: calculator });
await ratchet.start({ concurrency: 4 });

let failed = false;
function check(ok: boolean, claim: string): void {
  console.log(`${ok ? "ok  " : "FAIL"} ${claim}`);
  if (!ok) failed = true;
}

await conversations.create("calc", { title: "a calculator" });
const inputs = ["2 + 3", "6 * 7", "10 / 4"];
const subs = [];
for (const [i, text] of inputs.entries())
  subs.push(await conversations.submit("calc", { text }, { requestId: `q${i}` }));
const again = await conversations.submit("calc", { text: "2 + 3" }, { requestId: "q0" });
check(again.id === subs[0]!.id && !again.created, "a repeated requestId returns the first submission");
check(subs[0]!.record.status === "placed" && subs[1]!.record.status === "queued", "busy: later inputs queue");
const settled = [];
for (const s of subs) settled.push(await s.wait({ timeoutMs: 20_000 }));
check(
  settled.every((s) => s.status === "done"),
  "every input is answered",
);

console.log("\ntranscript:");
for (const e of await conversations.entries("calc"))
  console.log(`  #${e.seq} ${e.kind.padEnd(11)} ${JSON.stringify(e.data)}`);
const answers = (await conversations.entries("calc"))
  .filter((e) => e.kind === "assistant")
  .map((e) => (e.data as { text: string }).text);
check(
  JSON.stringify(answers) === JSON.stringify(["2 + 3 = 5", "6 * 7 = 42", "10 / 4 = 2.5"]),
  "answers come in submission order",
);
check((await conversations.state("calc")).lastValue === 2.5, "state is committed with the tool result");

const stuck = await conversations.submit("calc", { text: "wait" });
const behind = await conversations.submit("calc", { text: "1 + 1" });
// Follow the transcript live until the waiting tool's call is recorded, then press "Esc".
for await (const e of watchEntries(ratchet.store.conversations, "calc", { from: stuck.record.entrySeq! })) {
  if (e.kind === "tool-call") break;
}
const r = await conversations.abort("calc", { timeoutMs: 20_000 });
const [s1, s2] = [await stuck.wait(), await behind.wait()];
check(
  r.withdrawn === 1 && s2.status === "unanswered" && s2.reason === "aborted",
  "abort withdraws queued input",
);
check(s1.status === "unanswered" && s1.reason === "aborted", "abort leaves the running input unanswered");
const tail = (await conversations.entries("calc")).slice(-2).map((e) => e.kind);
check(
  JSON.stringify(tail) === JSON.stringify(["user", "tool-call"]),
  "the entries written before the abort stay",
);

await ratchet.close();
process.exit(failed ? 1 : 0);
