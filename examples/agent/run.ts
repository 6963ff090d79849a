/**
 * An agent run that is cancelled halfway, on embedded SQLite.
 *
 *   npm run build && node dist/examples/agent/run.js [path/to/file.db]
 *
 * The agent (a phase task) runs turn 0 (two tool calls), then turn 1 (five
 * tool calls: two fast, two slow, one scheduled 30 s later) while a background
 * subagent works alongside. Once two of turn 1's calls have finished, this
 * script aborts the agent. What it then shows (spec §12.2, §12.5):
 *
 * - the slow calls, running at that moment, see `ctx.signal` abort and stop;
 * - their `onAbort` handlers run, then the agent's own `onAbort` (bottom-up);
 * - the call that had not started ends `aborted` without running any code;
 * - the finished calls keep their outcome (`completed`);
 * - the background subagent is not aborted and completes after the agent ended.
 *
 * It prints the tree (`ratchet.tree(id)`), a timeline and a summary, checks
 * those claims, and exits 1 if one does not hold.
 */
import { rmSync } from "node:fs";
import { resolve } from "node:path";
import { Ratchet, silentLogger, type TaskRecord, type TaskTree } from "../../src/index.js";
import { agentTasks } from "./tasks.js";
import { type AgentWorld, renderTree, Timeline } from "./world.js";

const SCOPE = "conversation-42";
const BOUND_MS = 8_000;

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + BOUND_MS;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Every task below the root, flattened. */
function below(t: TaskTree): TaskRecord[] {
  return t.children.flatMap((c) => [c.task, ...below(c)]);
}

async function main(): Promise<number> {
  const db = resolve(process.argv[2] ?? "ratchet-agent.db");
  for (const f of [db, `${db}-wal`, `${db}-shm`]) rmSync(f, { force: true });

  const world: AgentWorld = { timeline: new Timeline() };
  const defs = agentTasks(world);
  const r = await Ratchet.open({
    store: `sqlite:${db}`,
    tasks: Object.values(defs),
    logger: silentLogger,
    // Short maintenance interval: marks set by another process reach running calls sooner.
    maintenanceIntervalMs: 200,
  });
  world.ratchet = r;
  const note = (text: string) => world.timeline.note(text);
  try {
    console.log(`Ratchet agent example: an agent turn loop with tool calls and a background subagent`);
    console.log(`store sqlite:${db} · scope ${SCOPE}`);
    const id = await r.enqueue(defs.agent, { goal: "fix the flaky test", turns: 3 }, { scope: SCOPE });
    note(`script: enqueued agent #${id} in scope "${SCOPE}"`);
    await r.start({ concurrency: 8 });

    // Abort once two of turn 1's tool calls have finished.
    await until("two turn-1 tool calls completed", async () => {
      const done = below(await r.tree(id)).filter(
        (t) => t.spawnName?.startsWith("t1.") && t.outcome === "completed",
      );
      return done.length >= 2;
    });
    const waiting = (await r.inspect()).tasks.find((t) => t.id === id)?.derived;
    if (waiting?.state === "waiting" && waiting.on.kind === "tasks")
      note(`script: inspect(): agent #${id} parked, waiting on ${waiting.on.ids.join(", ")}`);
    note(`script: two turn-1 calls completed; abort(#${id})`);
    const res = await r.abort(id);
    note(`script: abort(#${id}) returned ${res.state}`);

    // The scope is idle once the agent's ordinary tree has ended; the background subagent does not count.
    await r.waitForIdle(SCOPE, { timeoutMs: BOUND_MS });
    const agentRec = await r.waitFor(id, { timeoutMs: BOUND_MS });
    note(`script: waitForIdle("${SCOPE}") resolved; agent #${id} is ${agentRec.outcome}`);
    const subId = below(await r.tree(id)).find((t) => t.background)!.id;
    const subAtIdle = (await r.get(subId))!;
    const subRec = await r.waitFor(subId, { timeoutMs: BOUND_MS });
    note(`script: background subagent #${subId} is ${subRec.outcome}`);

    const tree = await r.tree(id);
    console.log(`\ntree (ratchet.tree(${id}))`);
    for (const line of renderTree(tree)) console.log(line);
    console.log("\ntimeline");
    for (const line of world.timeline.render()) console.log(line);
    console.log(`\ninspect it: npx ratchet tree ${id} --store sqlite:${db}`);
    return summarize(world.timeline, tree, agentRec, subAtIdle, subRec);
  } finally {
    await r.close();
  }
}

/** Prints the summary and checks each claim; returns the exit code. */
function summarize(
  timeline: Timeline,
  tree: TaskTree,
  agent: TaskRecord,
  subAtIdle: TaskRecord,
  sub: TaskRecord,
): number {
  const tools = below(tree).filter((t) => !t.background);
  const by = (o: string) => tools.filter((t) => t.outcome === o);
  const sawSignal = tools.filter((t) => timeline.indexOf(`#${t.id} `) >= 0 && sawAbort(timeline, t.id));
  const handlers = tools.filter((t) => timeline.indexOf(`#${t.id} ${toolOf(t)} onAbort`) >= 0);
  const neverStarted = by("aborted").filter((t) => timeline.indexOf(`#${t.id} ${toolOf(t)} started`) < 0);
  const lastToolHandler = Math.max(...handlers.map((t) => timeline.indexOf(`#${t.id} ${toolOf(t)} onAbort`)));
  const agentHandler = timeline.indexOf(`#${agent.id} agent onAbort`);
  const checks: [string, boolean][] = [
    [
      `agent #${agent.id}: ${agent.outcome}, onAbort result ${JSON.stringify(agent.result)}`,
      agent.outcome === "aborted",
    ],
    [
      `tool calls: ${by("completed").length} completed before the abort, ${by("aborted").length} aborted`,
      by("completed").length === 4 && by("aborted").length === 3,
    ],
    [
      `running calls that saw ctx.signal abort: ${sawSignal.map((t) => `#${t.id}`).join(", ")}`,
      sawSignal.length === 2,
    ],
    [
      `their onAbort ran: ${handlers.map((t) => `#${t.id}`).join(", ")}; then the agent's (bottom-up)`,
      handlers.length === 2 && agentHandler > lastToolHandler,
    ],
    [
      `never started, aborted without running code: ${neverStarted.map((t) => `#${t.id} ${toolOf(t)}`).join(", ")}`,
      neverStarted.length === 1 && handlers.every((h) => !neverStarted.includes(h)),
    ],
    [
      `background subagent #${sub.id}: ${subAtIdle.status} when the agent ended, then ${sub.outcome}`,
      subAtIdle.status !== "terminal" && sub.outcome === "completed" && sub.endedAt! > agent.endedAt!,
    ],
  ];
  console.log("\nsummary");
  for (const [text, ok] of checks) console.log(`  ${ok ? "ok  " : "FAIL"} ${text}`);
  const failed = checks.filter(([, ok]) => !ok).length;
  console.log(failed === 0 ? "all checks passed" : `${failed} check(s) failed`);
  return failed === 0 ? 0 : 1;
}

function toolOf(t: TaskRecord): string {
  return (t.input as { tool: string }).tool;
}

function sawAbort(timeline: Timeline, id: number): boolean {
  return timeline.entries.some(
    (e) => e.text.startsWith(`#${id} `) && e.text.includes("saw ctx.signal abort"),
  );
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    console.error(err);
    process.exitCode = 1;
  },
);
