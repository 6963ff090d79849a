/**
 * Scenario 6, SQLite process-crash consistency: a child (chaos/fixtures/txloop.ts)
 * loops over engine transactions on one file and prints each one it got
 * acknowledged; it is SIGKILLed at a random moment, N times, each round a new
 * child on the same file. After each kill the file is reopened: every
 * acknowledged enqueue, claim, step and settlement must be there (P1, P2, and
 * spec §10.2: with synchronous=NORMAL a committed transaction survives a
 * process crash), and `PRAGMA integrity_check` must say ok.
 */
import { join } from "node:path";
import { Ratchet, silentLogger } from "../../src/index.js";
import { integrityCheck } from "../checker.js";
import { ROOT, Sandbox } from "../process.js";
import { pause, Rng, type ScenarioConfig, type ScenarioResult, type Violation } from "../scenario.js";

const TXLOOP = join(ROOT, "chaos/fixtures/txloop.ts");

export async function crash(c: ScenarioConfig): Promise<ScenarioResult> {
  const t0 = Date.now();
  const rounds = c.rounds ?? (c.full ? 1_000 : 8);
  const rng = new Rng(c.seed);
  const sb = new Sandbox();
  const violations: Violation[] = [];
  const counts = { E: 0, C: 0, S: 0, D: 0 };
  try {
    for (let round = 0; round < rounds; round++) {
      const child = sb.spawn(TXLOOP, ["--db", sb.db, "--seed", String(c.seed + round)]);
      try {
        await waitForLine(child.lines, "ready", () => child.alive, 30_000);
      } catch (err) {
        violations.push({
          promise: "harness",
          detail: `round ${round}: ${(err as Error).message}: ${child.stderr}`,
        });
        break;
      }
      // Pacing the kill, not waiting for a state: the moment is the point of the scenario.
      await pause(rng.int(5, 400));
      child.kill("SIGKILL");
      const exit = await child.exitWithin(10_000);
      if (exit?.signal !== "SIGKILL")
        violations.push({
          promise: "P7",
          detail: `round ${round}: child ended ${JSON.stringify(exit)}: ${child.stderr}`,
        });
      const acks = child.lines.filter((l) => l !== "ready");
      for (const a of acks) counts[a[0] as keyof typeof counts]++;
      const integrity = integrityCheck(sb.db);
      if (integrity !== "ok")
        violations.push({ promise: "P1", detail: `round ${round}: integrity_check: ${integrity}` });
      violations.push(...(await checkAcks(sb.db, acks, round)));
      if ((round + 1) % 50 === 0)
        c.log(`crash: ${round + 1}/${rounds} kills, ${acks.length} acks last round`);
      if (violations.length > 20) break;
    }
    return {
      name: "crash",
      seed: c.seed,
      ms: Date.now() - t0,
      violations,
      stats: {
        kills: rounds,
        "acked enqueues": counts.E,
        "acked claims": counts.C,
        "acked steps": counts.S,
        "acked settlements": counts.D,
      },
    };
  } finally {
    await sb.cleanup(c.keep);
  }
}

async function waitForLine(
  lines: string[],
  want: string,
  alive: () => boolean,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!lines.includes(want)) {
    if (!alive()) throw new Error(`child exited before "${want}"`);
    if (Date.now() > deadline) throw new Error(`no "${want}" within ${timeoutMs} ms`);
    await pause(10);
  }
}

/** Every acknowledged transaction of one child is in the reopened file. */
async function checkAcks(db: string, acks: readonly string[], round: number): Promise<Violation[]> {
  const out: Violation[] = [];
  const r = await Ratchet.open({ store: `sqlite:${db}`, logger: silentLogger });
  try {
    for (const a of acks) {
      const [op, idText, arg] = a.split(" ");
      const id = Number(idText);
      const t = await r.get(id);
      const miss = (what: string, promise: Violation["promise"] = "P1") =>
        out.push({ promise, detail: `round ${round}: acknowledged "${a}" but ${what}` });
      if (!t) {
        miss(`task ${id} is missing`);
        continue;
      }
      if (op === "C" && t.epoch < Number(arg)) miss(`task ${id} has token ${t.epoch}`);
      if (op === "S" && !(await r.store.steps(id)).some((s) => s.name === arg))
        miss(`step ${arg} is missing`, "P2");
      if (op === "D" && t.outcome !== "completed") miss(`task ${id} is ${t.status}/${t.outcome}`);
    }
  } finally {
    await r.close();
  }
  return out;
}
