/**
 * Human in the loop, on embedded SQLite.
 *
 *   npm run build && node dist/examples/approval/run.js [path/to/file.db]
 *
 * Three releases run the same task (prepare → wait for `approve:<release>` →
 * publish or roll back), each with a different timing of the answer (spec §12.7):
 *
 * - v1.0: the approval is signalled before the task exists. The first signal
 *   per name is stored, so the task finds it at its wait and never parks.
 *   A second signal for the same name is ignored (`first: false`).
 * - v1.1: the task parks at its wait; the script sees it waiting, then
 *   signals a rejection, which wakes it.
 * - v1.2: nobody answers; after `timeoutMs` the wait returns a timeout. A
 *   signal sent after that wakes nothing and changes nothing.
 *
 * It prints a timeline and a summary, checks each claim, and exits 1 if one
 * does not hold.
 */
import { rmSync } from "node:fs";
import { resolve } from "node:path";
import { Ratchet, silentLogger, type TaskRecord } from "../../src/index.js";
import { type ApprovalWorld, approvalTasks, type ReleaseResult } from "./tasks.js";

const BOUND_MS = 8_000;
const TIMEOUT_MS = 400;

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + BOUND_MS;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function main(): Promise<number> {
  const db = resolve(process.argv[2] ?? "ratchet-approval.db");
  for (const f of [db, `${db}-wal`, `${db}-shm`]) rmSync(f, { force: true });

  const t0 = performance.now();
  const lines: string[] = [];
  const world: ApprovalWorld = {
    runs: new Map(),
    bodies: [],
    note: (text) => lines.push(`  +${((performance.now() - t0) / 1000).toFixed(2)}s  ${text}`),
  };
  const { publish } = approvalTasks(world);
  const r = await Ratchet.open({ store: `sqlite:${db}`, tasks: [publish], logger: silentLogger });
  const note = world.note;
  try {
    console.log("Ratchet approval example: a task waits for a human's answer, sent before, after, or never");
    console.log(`store sqlite:${db}`);

    // v1.0: answered before the task exists.
    const early = await r.signal("approve:v1.0", { approved: true, by: "ana" });
    note(`script: signal approve:v1.0 {approved: true} -> first ${early.first}, woke ${early.woken}`);
    const again = await r.signal("approve:v1.0", { approved: false, by: "mallory" });
    note(`script: signal approve:v1.0 again {approved: false} -> first ${again.first} (ignored)`);

    const ids = {
      "v1.0": await r.enqueue(publish, { release: "v1.0", timeoutMs: 60_000 }),
      "v1.1": await r.enqueue(publish, { release: "v1.1", timeoutMs: 60_000 }),
      "v1.2": await r.enqueue(publish, { release: "v1.2", timeoutMs: TIMEOUT_MS }),
    };
    note(
      `script: enqueued v1.0 #${ids["v1.0"]}, v1.1 #${ids["v1.1"]}, v1.2 #${ids["v1.2"]} (timeout ${TIMEOUT_MS} ms)`,
    );
    await r.start({ concurrency: 4 });

    // v1.1: answered once the task is parked on its wait.
    await until("v1.1 is parked on its event", async () => {
      const t = await r.get(ids["v1.1"]);
      return t?.status === "waiting" && t.waitOn === "event";
    });
    const parked = (await r.inspect()).tasks.find((t) => t.id === ids["v1.1"])?.derived;
    if (parked?.state === "waiting" && parked.on.kind === "event")
      note(`script: inspect(): #${ids["v1.1"]} parked, waiting for event "${parked.on.name}"`);
    const late = await r.signal("approve:v1.1", { approved: false, by: "bo", reason: "changelog missing" });
    note(`script: signal approve:v1.1 {approved: false} -> first ${late.first}, woke ${late.woken}`);

    const recs: Record<string, TaskRecord> = {};
    for (const [release, id] of Object.entries(ids))
      recs[release] = await r.waitFor(id, { timeoutMs: BOUND_MS });

    // v1.2: an answer after the timeout changes nothing; the outcome is memoized.
    const tooLate = await r.signal("approve:v1.2", { approved: true, by: "cy" });
    note(`script: signal approve:v1.2 after its timeout -> first ${tooLate.first}, woke ${tooLate.woken}`);
    const v12 = (await r.get(ids["v1.2"]))!;

    console.log("\ntimeline");
    for (const line of lines) console.log(line);
    return summarize(world, recs, { early, again, late, tooLate }, v12);
  } finally {
    await r.close();
  }
}

type SignalResult = { first: boolean; woken: number };

function summarize(
  w: ApprovalWorld,
  recs: Record<string, TaskRecord>,
  s: Record<"early" | "again" | "late" | "tooLate", SignalResult>,
  v12After: TaskRecord,
): number {
  const res = (release: string) => recs[release]!.result as ReleaseResult;
  const runs = (release: string) => w.runs.get(release) ?? 0;
  const count = (step: string) => w.bodies.filter((b) => b.endsWith(`:${step}`)).length;
  const line = (release: string, how: string) => {
    const x = res(release);
    return `${release} #${recs[release]!.id}: ${how} -> ${x.decision}${x.by ? ` by ${x.by}` : ""}, ${x.action} (run ${runs(release)}x)`;
  };
  const checks: [string, boolean][] = [
    [
      line("v1.0", "signalled before the task was enqueued"),
      res("v1.0").action === "published" && res("v1.0").by === "ana" && runs("v1.0") === 1,
    ],
    [
      line("v1.1", "signal sent while the task was parked"),
      res("v1.1").decision === "rejected" && s.late.woken === 1 && runs("v1.1") === 2,
    ],
    [
      line("v1.2", `no signal within ${TIMEOUT_MS} ms`),
      res("v1.2").decision === "timed out" && res("v1.2").action === "rolled back" && runs("v1.2") === 2,
    ],
    [
      `each step body ran once: prepare ${count("prepare")}x, publish ${count("publish")}x, rollback ${count("rollback")}x`,
      count("prepare") === 3 && count("publish") === 1 && count("rollback") === 2,
    ],
    [
      `the first signal per name is kept: a second approve:v1.0 had first ${s.again.first}; ` +
        `a late approve:v1.2 woke ${s.tooLate.woken} and left the result as it was`,
      !s.again.first &&
        s.tooLate.woken === 0 &&
        JSON.stringify(v12After.result) === JSON.stringify(recs["v1.2"]!.result),
    ],
  ];
  console.log("\nsummary");
  for (const [text, ok] of checks) console.log(`  ${ok ? "ok  " : "FAIL"} ${text}`);
  const failed = checks.filter(([, ok]) => !ok).length;
  console.log(failed === 0 ? "all checks passed" : `${failed} check(s) failed`);
  return failed === 0 ? 0 : 1;
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
