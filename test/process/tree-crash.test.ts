/**
 * spec §12 under real crashes: a worker process running a task tree is
 * SIGKILLed at a chosen point, a fresh worker process is started on the same
 * store, and the tree must end exactly as an uninterrupted run of the same
 * scenario (which each test also runs, as the reference).
 *
 * Kill points are deterministic: the tree bodies (test/fixtures/tree-tasks.ts)
 * write a ledger line and block at a gate; the test waits for those lines and
 * for the store to show the expected statuses, then kills. Both runs open the
 * gates at the same point, so they differ only by the crash.
 *
 * Besides equal outcomes, every run must satisfy: every task terminal; one
 * child per (owner, spawn name) (spec §12.1); no abort handler started before
 * all work below its task was terminal (spec §12.5), checked three ways: the
 * handler's own snapshot of the store, the ledger order, and (SQLite, one
 * exact clock) endedAt; no owner terminal before its children (spec §12.4);
 * each step record exactly once (spec §4.2). A crash run also checks that
 * exactly the tasks the dead worker held were reclaimed, each after its lease
 * (spec §3.3), and that only their interrupted bodies ran again.
 */
import { describe, expect, it } from "vitest";
import { pgGate } from "../pg-available.js";
import {
  type Backend,
  type Observed,
  postgresBackend,
  runScenario,
  type Scenario,
  sqliteBackend,
} from "./tree-harness.js";

const isLive = (s: string) => s !== "terminal";

/** (a) root spawns x and y (y spawns y1, y2 and waits), then stops before its own wait. */
const AFTER_SPAWN: Scenario = {
  roots: {
    root: {
      gates: ["spawned"],
      wait: true,
      kids: {
        x: { gates: ["start"] },
        y: { gates: ["start"], wait: true, kids: { y1: {}, y2: {} } },
      },
    },
  },
  async drive(h) {
    await Promise.all([h.gate("root", "spawned"), h.gate("root/x", "start"), h.gate("root/y", "start")]);
  },
};

/** (b) root waits for x (working), y (waiting for y1 working and y2 done) and z (failed). */
const CHILDREN_RUNNING: Scenario = {
  roots: {
    root: {
      wait: true,
      kids: {
        x: { gates: ["work"] },
        y: { wait: true, kids: { y1: { gates: ["work"] }, y2: {} } },
        z: { fail: "z broke" },
      },
    },
  },
  async drive(h) {
    await Promise.all([h.gate("root/x", "work"), h.gate("root/y/y1", "work")]);
    await h.task("root/y/y2", "completed", (t) => t.outcome === "completed");
    await h.task("root/z", "failed", (t) => t.outcome === "failed");
    await h.task("root/y", "parked on its children", (t) => t.status === "waiting" && t.waitOn === "tasks");
    await h.task("root", "parked on its children", (t) => t.status === "waiting" && t.waitOn === "tasks");
  },
};

/**
 * (c) root waits for a, b (waiting for b1, b2) and c (spawned with a delay, so
 * it never starts); everything that started blocks in step "work". The test
 * aborts root; the kill comes while the handlers of a and b1 run, b2's
 * handler has finished, and b and root wait for their owned work to drain.
 */
const ABORT_CASCADE: Scenario = {
  roots: {
    root: {
      wait: true,
      kids: {
        a: { gates: ["work", "handler"] },
        b: {
          wait: true,
          kids: { b1: { gates: ["work", "handler"] }, b2: { gates: ["work"] } },
        },
        c: { delayMs: 600_000 },
      },
    },
  },
  async drive(h) {
    await Promise.all([h.gate("root/a", "work"), h.gate("root/b/b1", "work"), h.gate("root/b/b2", "work")]);
    await h.task("root/b", "parked on its children", (t) => t.status === "waiting" && t.waitOn === "tasks");
    await h.task("root", "parked on its children", (t) => t.status === "waiting" && t.waitOn === "tasks");
    await h.task("root/c", "waiting on its timer", (t) => t.status === "waiting" && t.startedAt === null);
    await h.abort("root");
    await Promise.all([h.gate("root/a", "handler"), h.gate("root/b/b1", "handler")]);
    await h.task("root/b/b2", "aborted by its handler", (t) => t.outcome === "aborted");
    await h.task("root/c", "aborted", (t) => t.outcome === "aborted");
    for (const p of ["root", "root/b"])
      await h.task(p, "draining", (t) => t.status === "waiting" && t.waitOn === "drain" && t.abortRequested);
  },
};

/**
 * (d) two held outcomes: "hold" returns while k works and j is itself
 * completing (j1 works); "hfail" fails while m works, so m is aborted
 * (cancellation intent) and the kill comes while m's abort handler runs.
 */
const HELD_OUTCOMES: Scenario = {
  roots: {
    hold: { kids: { k: { gates: ["work"] }, j: { kids: { j1: { gates: ["work"] } } } } },
    hfail: { gates: ["prefail"], fail: "hfail broke", kids: { m: { gates: ["work", "handler"] } } },
  },
  async drive(h) {
    await Promise.all([
      h.gate("hold/k", "work"),
      h.gate("hold/j/j1", "work"),
      h.gate("hfail/m", "work"),
      h.gate("hfail", "prefail"),
    ]);
    for (const p of ["hold", "hold/j"])
      await h.task(p, "holding completed", (t) => t.status === "completing" && t.heldOutcome === "completed");
    h.open("hfail", "prefail");
    await h.gate("hfail/m", "handler");
    await h.task("hfail", "holding failed", (t) => t.status === "completing" && t.heldOutcome === "failed");
  },
};

/** spawnName path → outcome, from the tree. */
function outcomes(o: Observed): Record<string, string | null> {
  return Object.fromEntries(Object.entries(o.finals).map(([p, f]) => [p, f.outcome]));
}

/** How often the ledger shows `ev` (and step/point) for each path. */
function counts(
  o: Observed,
  ev: string,
  extra: { step?: string; point?: string } = {},
): Record<string, number> {
  const m: Record<string, number> = {};
  for (const e of o.ledger) {
    if (e.ev !== ev || (extra.step && e.step !== extra.step) || (extra.point && e.point !== extra.point))
      continue;
    m[e.path] = (m[e.path] ?? 0) + 1;
  }
  return m;
}

const isBelow = (path: string, owner: string) => path.startsWith(`${owner}/`);

/** The facts every run (reference or crash) must satisfy. */
function checkInvariants(o: Observed): void {
  // Every task ends terminal, and the tree reaches every task in the store.
  expect(o.tasks.filter((t) => isLive(t.status)).map((t) => t.id)).toEqual([]);
  expect(Object.values(o.finals).every((f) => f.status === "terminal")).toBe(true);
  expect(o.tasks.length).toBe(Object.keys(o.finals).length);
  // spec §12.1: one child per (owner, spawn name), and the spawnName path is the path the task was made for.
  const pairs = o.tasks.filter((t) => t.ownerId !== null).map((t) => `${t.ownerId}:${t.spawnName}`);
  expect(new Set(pairs).size).toBe(pairs.length);
  expect([...o.byPath.keys()].sort()).toEqual(Object.keys(o.finals).sort());

  // spec §12.5: an abort handler starts only after every task below it is terminal, and only on an aborted task.
  o.ledger.forEach((e, i) => {
    if (e.ev !== "handler-start") return;
    expect(e.live, `work below ${e.path} was live when its handler started`).toEqual([]);
    const laterBelow = o.ledger.slice(i + 1).filter((x) => isBelow(x.path, e.path));
    expect(laterBelow, `code below ${e.path} ran after its handler started`).toEqual([]);
    if (o.exactClock) {
      for (const [p, t] of o.byPath)
        if (isBelow(p, e.path))
          expect(t.endedAt!, `${p} ended after ${e.path}'s handler started`).toBeLessThanOrEqual(e.t);
    }
    expect(o.byPath.get(e.path)!.outcome).toBe("aborted");
  });
  // spec §12.4: an owner becomes terminal only after its ordinary children.
  if (o.exactClock) {
    for (const t of o.tasks) {
      if (t.ownerId === null) continue;
      const owner = o.tasks.find((x) => x.id === t.ownerId)!;
      expect(owner.endedAt!, `owner of task ${t.id} ended before it`).toBeGreaterThanOrEqual(t.endedAt!);
    }
  }
  // spec §4.2: each task's step "pre" body ran once (no kill point is inside it) and every step record exists once.
  const ran = Object.keys(counts(o, "run"));
  expect(counts(o, "step", { step: "pre" })).toEqual(Object.fromEntries(ran.map((p) => [p, 1])));
  for (const [p, names] of Object.entries(o.steps)) {
    expect(new Set(names).size, `duplicate step record of ${p}`).toBe(names.length);
    if (ran.includes(p)) expect(names).toContain("pre");
  }
}

/** The facts of a crash run: the dead worker's tasks, and only they, were reclaimed once, after their leases. */
function checkCrash(o: Observed, expectHeld: string[]): void {
  const c = o.crash!;
  expect([...c.heldAtKill.keys()].sort()).toEqual([...expectHeld].sort());
  expect(c.reclaims.map((x) => x.path).sort()).toEqual([...expectHeld].sort());
  for (const x of c.reclaims) {
    expect(x.previousHolder).toBe(c.victimWorkerId);
    expect(x.leaseUntil).toBe(c.heldAtKill.get(x.path));
    expect(x.at, `${x.path} reclaimed before its lease ended`).toBeGreaterThanOrEqual(x.leaseUntil);
  }
  const pids = new Set(o.ledger.map((e) => e.pid));
  expect(pids).toEqual(new Set([c.victimPid, c.freshPid]));
}

/** Runs the reference and the crash run of a scenario and checks what both must satisfy. */
async function both(backend: Backend, sc: Scenario): Promise<{ ref: Observed; crash: Observed }> {
  const ref = await runScenario(backend, sc, false);
  checkInvariants(ref);
  expect(ref.crash).toBeUndefined();
  expect(new Set(ref.ledger.map((e) => e.pid)).size).toBe(1);
  const crash = await runScenario(backend, sc, true);
  checkInvariants(crash);
  // The crash changes nothing a caller can see: per spawnName path the same outcome, result and error.
  expect(crash.finals).toEqual(ref.finals);
  process.stderr.write(
    `[tree-crash ${backend.name}] reference ${ref.ms} ms, crash ${crash.ms} ms, ${crash.tasks.length} tasks\n`,
  );
  return { ref, crash };
}

const ok = (path: string, kids: [string, string, unknown][] | null = null) => ({ ok: path, kids });

function caseAfterSpawn(backend: Backend) {
  return async () => {
    const { ref, crash } = await both(backend, AFTER_SPAWN);
    expect(outcomes(ref)).toEqual({
      root: "completed",
      "root/x": "completed",
      "root/y": "completed",
      "root/y/y1": "completed",
      "root/y/y2": "completed",
    });
    expect(ref.finals.root!.result).toEqual(
      ok("root", [
        ["x", "completed", ok("root/x")],
        [
          "y",
          "completed",
          ok("root/y", [
            ["y1", "completed", ok("root/y/y1")],
            ["y2", "completed", ok("root/y/y2")],
          ]),
        ],
      ]),
    );
    checkCrash(crash, ["root", "root/x", "root/y"]);
    // Every rerun of root (after the reclaim, and after its wait if it parked) spawned the same names again and got
    // the same children back (spec §12.1).
    const c = crash.crash!;
    const spawned = crash.ledger.filter((e) => e.ev === "spawned" && e.path === "root");
    const byPid = (pid: number) => spawned.filter((e) => e.pid === pid).map((e) => [e.kid, e.id]);
    const kids = [
      ["x", crash.byPath.get("root/x")!.id],
      ["y", crash.byPath.get("root/y")!.id],
    ];
    expect(byPid(c.victimPid)).toEqual(kids);
    // One or two reruns in the fresh process, depending on whether y finished before root's own lease ended.
    const fresh = byPid(c.freshPid);
    expect(fresh.length).toBeGreaterThan(0);
    expect(fresh).toEqual(Array.from({ length: fresh.length / 2 }, () => kids).flat());
    expect(crash.tasks.filter((t) => t.ownerId === crash.byPath.get("root")!.id)).toHaveLength(2);
  };
}

function caseChildrenRunning(backend: Backend) {
  return async () => {
    const { ref, crash } = await both(backend, CHILDREN_RUNNING);
    expect(outcomes(ref)).toEqual({
      root: "completed",
      "root/x": "completed",
      "root/y": "completed",
      "root/y/y1": "completed",
      "root/y/y2": "completed",
      "root/z": "failed",
    });
    expect(ref.finals.root!.result).toEqual(
      ok("root", [
        ["x", "completed", ok("root/x")],
        [
          "y",
          "completed",
          ok("root/y", [
            ["y1", "completed", ok("root/y/y1")],
            ["y2", "completed", ok("root/y/y2")],
          ]),
        ],
        ["z", "failed", "z broke"],
      ]),
    );
    // The parked waiters were not held: only the working children were reclaimed (spec §12.3: no slot while parked).
    checkCrash(crash, ["root/x", "root/y/y1"]);
    // The interrupted step bodies ran again (at least once, spec §4.2); nothing else did.
    expect(counts(ref, "step", { step: "work" })).toEqual({ "root/x": 1, "root/y/y1": 1 });
    expect(counts(crash, "step", { step: "work" })).toEqual({ "root/x": 2, "root/y/y1": 2 });
    expect(crash.steps["root/x"]).toEqual(["pre", "work"]);
  };
}

function caseAbortCascade(backend: Backend) {
  return async () => {
    const { ref, crash } = await both(backend, ABORT_CASCADE);
    expect(outcomes(ref)).toEqual({
      root: "aborted",
      "root/a": "aborted",
      "root/b": "aborted",
      "root/b/b1": "aborted",
      "root/b/b2": "aborted",
      "root/c": "aborted",
    });
    // Every task that had started ran its handler, whose return value is its result; c never started.
    for (const p of ["root", "root/a", "root/b", "root/b/b1", "root/b/b2"])
      expect(ref.finals[p]!.result).toEqual(ok(`compensated ${p}`));
    expect(ref.finals["root/c"]!.result).toBeNull();
    expect(counts(ref, "run")["root/c"]).toBeUndefined();
    const once = { root: 1, "root/a": 1, "root/b": 1, "root/b/b1": 1, "root/b/b2": 1 };
    expect(counts(ref, "handler-start")).toEqual(once);
    // The handlers the kill interrupted ran again in the fresh process; every other handler ran once.
    expect(counts(crash, "handler-start")).toEqual({ ...once, "root/a": 2, "root/b/b1": 2 });
    checkCrash(crash, ["root/a", "root/b/b1"]);
    const c = crash.crash!;
    for (const p of ["root/a", "root/b/b1"]) {
      const starts = crash.ledger.filter((e) => e.ev === "handler-start" && e.path === p);
      expect(starts.map((e) => [e.pid, e.mode])).toEqual([
        [c.victimPid, "abort"],
        [c.freshPid, "abort"],
      ]);
    }
    // Bottom-up (spec §12.5): b's handler after b1's and b2's, root's last.
    const order = crash.ledger.filter((e) => e.ev === "handler-end").map((e) => e.path);
    expect(order.at(-1)).toBe("root");
    expect(order.indexOf("root/b")).toBeGreaterThan(order.indexOf("root/b/b1"));
    expect(order.indexOf("root/b")).toBeGreaterThan(order.indexOf("root/b/b2"));
  };
}

function caseHeldOutcomes(backend: Backend) {
  return async () => {
    const { ref, crash } = await both(backend, HELD_OUTCOMES);
    expect(outcomes(ref)).toEqual({
      hold: "completed",
      "hold/k": "completed",
      "hold/j": "completed",
      "hold/j/j1": "completed",
      hfail: "failed",
      "hfail/m": "aborted",
    });
    expect(ref.finals.hold!.result).toEqual(ok("hold"));
    expect(ref.finals["hold/j"]!.result).toEqual(ok("hold/j"));
    expect(ref.finals.hfail!.error).toBe("hfail broke");
    expect(ref.finals["hfail/m"]!.result).toEqual(ok("compensated hfail/m"));
    checkCrash(crash, ["hold/k", "hold/j/j1", "hfail/m"]);
    // A held outcome is final (spec §12.4): the owners' code never ran again, in the dead process or the fresh one.
    for (const o of [ref, crash])
      expect(counts(o, "run-end")).toMatchObject({ hold: 1, "hold/j": 1, hfail: 1 });
    const c = crash.crash!;
    expect(
      crash.ledger
        .filter((e) => e.ev === "run" && e.pid === c.freshPid)
        .map((e) => e.path)
        .sort(),
    ).toEqual(["hold/j/j1", "hold/k"]);
    expect(counts(crash, "handler-start")).toEqual({ "hfail/m": 2 });
    // Each owner held its outcome once ("held" event), in both runs.
    for (const o of [ref, crash])
      for (const p of ["hold", "hold/j", "hfail"])
        expect(
          o.events[p]!.filter((k) => k === "held"),
          `${p} held once`,
        ).toHaveLength(1);
  };
}

/**
 * (e) p spawns k and blocks in run mode; k blocks in a step. The worker dies, then p is aborted while no
 * process holds it. k has the long lease, so the fresh worker finds p's lease expired about 8 s before k's:
 * p must not be reclaimed into its abort handler while k is live (it parks to drain), so k's handler runs
 * first. Only the crash run exists (the abort happens after the kill).
 */
const ABORT_WHILE_HOLDER_DEAD: Scenario = {
  roots: { p: { gates: ["spawned"], kids: { k: { gates: ["work"], long: true } } } },
  async drive(h) {
    await Promise.all([h.gate("p", "spawned"), h.gate("p/k", "work")]);
  },
  async afterKill(h) {
    await h.abort("p");
  },
};

function caseAbortWhileHolderDead(backend: Backend) {
  return async () => {
    const crash = await runScenario(backend, ABORT_WHILE_HOLDER_DEAD, true);
    checkInvariants(crash);
    expect(outcomes(crash)).toEqual({ p: "aborted", "p/k": "aborted" });
    const starts = crash.ledger.filter((e) => e.ev === "handler-start");
    expect(starts.map((e) => e.path)).toEqual(["p/k", "p"]);
    for (const e of starts) expect(e.live ?? []).toEqual([]);
    expect(crash.events.p).toContain("lease_lost");
  };
}

describe("task trees survive SIGKILL of a worker process (SQLite)", () => {
  it(
    "spec §12.1 / §12.3 / §3.3: SIGKILL after spawning children but before waiting; the rerun finds the same children and the outcomes match an uninterrupted run",
    caseAfterSpawn(sqliteBackend),
  );
  it(
    "spec §12.3 / §4.2 / §3.3: SIGKILL while children run under parked waiters; the reclaimed children finish, the waiters resume, the outcomes match",
    caseChildrenRunning(sqliteBackend),
  );
  it(
    "spec §12.5 / §12.10: SIGKILL in the middle of an abort cascade, while abort handlers of children run; handlers rerun, still bottom-up, and the outcomes match",
    caseAbortCascade(sqliteBackend),
  );
  it(
    "spec §12.4 / §12.10: SIGKILL while held completing outcomes (completed and failed) wait for their children; they finalize after them and the outcomes match",
    caseHeldOutcomes(sqliteBackend),
  );
  it(
    "spec §12.5 / §3.3: a task aborted after its holder died is not reclaimed into its abort handler while its child is live; handlers stay bottom-up",
    caseAbortWhileHolderDead(sqliteBackend),
  );
});

describe("task trees survive SIGKILL of a worker process (PostgreSQL)", () => {
  if (!pgGate(it)) return;
  it(
    "spec §12.3 / §4.2 / §3.3 / §13.1: SIGKILL while children run under parked waiters; the reclaimed children finish, the waiters resume, the outcomes match",
    caseChildrenRunning(postgresBackend),
  );
  it(
    "spec §12.5 / §12.10 / §13.1: SIGKILL in the middle of an abort cascade, while abort handlers of children run; handlers rerun, still bottom-up, and the outcomes match",
    caseAbortCascade(postgresBackend),
  );
  it(
    "spec §12.5 / §3.3 / §13.1: a task aborted after its holder died is not reclaimed into its abort handler while its child is live; handlers stay bottom-up",
    caseAbortWhileHolderDead(postgresBackend),
  );
});
