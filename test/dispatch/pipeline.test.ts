/** Pipelines: registration checks (spec §20.10), routes (spec §20.11) and spawn templates (spec §20.12). */
import { describe, expect, it } from "vitest";
import { definePipeline, type PipelineSpec, type StepSpec } from "../../src/core/dispatch/pipeline.js";
import { renderSpawn, routeOf } from "../../src/core/dispatch/route.js";
import type { RatchetError } from "../../src/errors.js";

const spawn = { command: ["agent", "--task", "{{input.title}}"], prompt: "Fix {{item.id}} in {{step}}" };
const step = (name: string, on: StepSpec["on"] = {}): StepSpec => ({ name, worker: "process", spawn, on });

function refusal(spec: PipelineSpec, workers?: ReadonlySet<string>) {
  try {
    definePipeline(spec, workers);
  } catch (e) {
    return e as RatchetError & { problem: string; steps: string[] };
  }
  throw new Error("the pipeline was accepted");
}

const REVIEWED: PipelineSpec = {
  name: "fix",
  steps: [
    step("build", { succeeded: { to: "review" } }),
    step("review", { succeeded: { end: "done" }, failed: { to: "build", resume: true, max: 3 } }),
  ],
};

describe("pipelines (spec §20.9–§20.12)", () => {
  it("§20.9 a pipeline is registered with defaults filled: start, agent mode, 120 min step timeout, sleep rules", () => {
    const p = definePipeline(REVIEWED, new Set(["process"]));
    expect(p.start).toBe("build");
    expect(p.steps.get("build")).toMatchObject({ mode: "agent", timeoutMinutes: 120 });
    expect(p.sleep).toEqual({ afterQuietMinutes: 5, afterIdleMinutes: 30, afterUnattendedMinutes: 60 });
    expect(Object.isFrozen(p)).toBe(true);
  });

  it("§20.10 an edge to an unknown step is refused with its code", () => {
    const e = refusal({ name: "p", steps: [step("a", { succeeded: { to: "nope" } })] });
    expect(e.code).toBe("RATCHET_INVALID_PIPELINE");
    expect(e).toMatchObject({ problem: "unknown_step", steps: ["nope"] });
  });

  it("§20.10 an unknown start step is refused", () => {
    expect(refusal({ name: "p", start: "zz", steps: [step("a")] }).problem).toBe("unknown_step");
  });

  it("§20.10 a step no edge reaches from the start is refused", () => {
    const e = refusal({ name: "p", steps: [step("a"), step("b", { succeeded: { to: "a" } })] });
    expect(e).toMatchObject({ problem: "unreachable_step", steps: ["b"] });
  });

  it("§20.10 a cycle of edges without max is refused, with its path; one bounded edge makes it legal", () => {
    const loop = (max?: number): PipelineSpec => ({
      name: "p",
      steps: [
        step("a", { succeeded: { to: "b" } }),
        step("b", { failed: max === undefined ? { to: "a" } : { to: "a", max } }),
      ],
    });
    expect(refusal(loop())).toMatchObject({ problem: "unbounded_cycle", steps: ["a", "b", "a"] });
    expect(definePipeline(loop(2)).steps.size).toBe(2);
    expect(refusal({ name: "p", steps: [step("a", { failed: { to: "a", resume: true } })] }).problem).toBe(
      "unbounded_cycle",
    );
  });

  it("§20.10 duplicate steps, unknown workers, bad modes, timeouts, outcomes, placeholders and names are refused", () => {
    expect(refusal({ name: "p", steps: [step("a"), step("a")] }).problem).toBe("duplicate_step");
    expect(refusal({ name: "p", steps: [step("a")] }, new Set(["tmux"])).problem).toBe("unknown_worker");
    const bad: Partial<StepSpec>[] = [
      { mode: "solo" as never },
      { timeoutMinutes: 0 },
      { timeoutMinutes: 1e9 },
      { on: { finished: { to: "a" } } as never },
      { on: { failed: { to: "a", max: 0 } } },
      { spawn: { command: [] } },
      { spawn: { command: ["x {{secret}}"] } },
      { spawn: { command: ["x {{input.a"] } },
      { spawn: { command: ["x"], env: { "1BAD": "v" } } },
      { name: "has space" },
      { worker: "" },
    ];
    for (const over of bad) {
      const e = refusal({ name: "p", steps: [{ ...step("a"), ...over } as StepSpec] });
      expect(e.code).toBe("RATCHET_INVALID_PIPELINE");
      expect(e.problem).toBe("invalid");
    }
    expect(refusal({ name: "p", steps: [] }).problem).toBe("invalid");
    expect(refusal({ name: "", steps: [step("a")] }).problem).toBe("invalid");
    expect(refusal({ name: "p", steps: [step("a")], sleep: { afterIdleMinutes: -1 } }).problem).toBe(
      "invalid",
    );
  });

  it("§20.11 an outcome takes its own edge, a forced failure its own key before `failed`, else the default", () => {
    const p = definePipeline({
      name: "p",
      steps: [
        step("a", { succeeded: { to: "b" }, stalled: { end: "closed" }, failed: { to: "a", max: 2 } }),
        step("b"),
      ],
    });
    expect(routeOf(p, "a", true, null, {})).toEqual({
      kind: "step",
      to: "b",
      resume: false,
      edge: "a:succeeded",
    });
    expect(routeOf(p, "a", false, "stalled", {})).toEqual({
      kind: "end",
      state: "closed",
      edge: "a:stalled",
    });
    expect(routeOf(p, "a", false, "timed-out", {})).toMatchObject({
      kind: "step",
      to: "a",
      edge: "a:failed",
    });
    expect(routeOf(p, "b", true, null, {})).toEqual({ kind: "end", state: "done", edge: null });
    expect(routeOf(p, "b", false, null, {})).toEqual({ kind: "end", state: "closed", edge: null });
  });

  it("§20.11 a bounded edge is taken at most max times per item, then the item is closed", () => {
    const p = definePipeline(REVIEWED);
    expect(routeOf(p, "review", false, null, { "review:failed": 2 })).toEqual({
      kind: "step",
      to: "build",
      resume: true,
      edge: "review:failed",
    });
    expect(routeOf(p, "review", false, null, { "review:failed": 3 })).toEqual({
      kind: "end",
      state: "closed",
      edge: "review:failed",
    });
  });

  it("§20.12 a spawn template renders from the item; a missing path is empty, an object is JSON", () => {
    const req = renderSpawn(
      {
        command: ["run", "{{input.title}}", "{{input.meta}}", "{{input.none.x}}"],
        prompt: "{{ item.id }}/{{attempt.id}}",
        env: { S: "{{step}}" },
      },
      { itemId: "i1", attemptId: "a9", step: "build", input: { title: "t", meta: { n: 1 } } },
    );
    expect(req).toEqual({
      name: "ratchet-a9",
      command: ["run", "t", '{"n":1}', ""],
      prompt: "i1/a9",
      cwd: null,
      env: { S: "build" },
    });
  });
});
