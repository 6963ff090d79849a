/**
 * spec 3.3 / 3.7 / 4.2 / 5.4: a worker process is SIGKILLed in the middle of a
 * step. Another process reclaims the task only once the lease has expired,
 * replays the committed step, reruns the interrupted one and completes.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Ratchet, silentLogger } from "../../src/index.js";
import { makeTasks, THREE_STEPS_MAX_MS } from "../fixtures/tasks.js";
import { ledgerLines, Sandbox, waitUntil } from "./harness.js";

const GRACE_MS = 500;

describe("SIGKILL of a worker process mid-step", () => {
  let sb: Sandbox;
  let r: Ratchet | undefined;

  beforeEach(() => {
    sb = new Sandbox();
  });

  afterEach(async () => {
    await r?.close();
    r = undefined;
    await sb.cleanup();
  });

  it("spec 3.3: the task is reclaimed after its lease expires, committed steps are not rerun, attempts is 2", async () => {
    r = await Ratchet.open({
      store: `sqlite:${sb.db}`,
      tasks: makeTasks({ ledgerFd: -1, blockStepTwo: false }),
      logger: silentLogger,
    });
    const ledger = sb.path("ledger.txt");
    // Both processes are up before the task exists; B is told to start only once A holds the task.
    const a = sb.spawn({ ledger, concurrency: 1, graceMs: GRACE_MS, pollMs: 20, blockStepTwo: true });
    const b = sb.spawn({ ledger, concurrency: 1, graceMs: GRACE_MS, pollMs: 20 });
    await Promise.all([a.waitFor("ready"), b.waitFor("ready")]);

    const id = await r.enqueue("three-steps", {});
    a.send("go");
    await waitUntil("the step two marker of worker A", () => ledgerLines(ledger).includes(`two ${a.pid} 1`));

    // A holds the task, blocked inside step two, with step one committed.
    const held = (await r.get(id))!;
    expect(held.status).toBe("running");
    expect(held.attempts).toBe(1);
    expect(held.leaseUntil).not.toBeNull();
    const leaseUntil = held.leaseUntil!;
    expect(leaseUntil).toBe(held.claimedAt! + THREE_STEPS_MAX_MS + GRACE_MS);
    expect((await r.details(id)).steps.map((s) => s.name)).toEqual(["one"]);

    // B runs (and polls) while A's lease is still live; then A dies without a word.
    b.send("go");
    await b.waitFor("started");
    a.kill("SIGKILL");
    expect((await a.exited).signal).toBe("SIGKILL");

    const done = await r.waitFor(id, { timeoutMs: 20_000 });
    expect(done.status).toBe("terminal");
    expect(done.outcome).toBe("completed");
    expect(done.result).toBe("done");
    expect(done.attempts).toBe(2);

    const d = await r.details(id);
    const reclaims = d.events.filter((e) => e.kind === "reclaimed");
    expect(reclaims.length).toBe(1);
    expect(reclaims[0]!.at).toBeGreaterThanOrEqual(leaseUntil);
    // steps() orders by (created_at, name), so steps committed in the same ms come back by name.
    const steps = d.steps
      .map((s) => [s.name, s.attempt])
      .sort((x, y) => String(x[0]).localeCompare(String(y[0])));
    expect(steps).toEqual([
      ["one", 1],
      ["three", 2],
      ["two", 2],
    ]);

    // Step one ran once (in A), step two twice (A, then B), step three once (in B).
    expect(ledgerLines(ledger)).toEqual([
      `one ${a.pid} 1`,
      `two ${a.pid} 1`,
      `two ${b.pid} 2`,
      `three ${b.pid} 2`,
    ]);

    expect(await b.stop()).toBe(0);
    expect(b.stderr).toBe("");
  });
});
