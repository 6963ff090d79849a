/** The system prompt as sections, only changes resent (spec §19.25): the pure rules, and a fork on both stores. */
import { describe, expect, it } from "vitest";
import { defineAgent } from "../../src/agent/agent.js";
import { Conversations } from "../../src/agent/index.js";
import { promptOf } from "../../src/agent/prompt.js";
import { planSections, shownSections } from "../../src/agent/sections.js";
import { fauxModel } from "../../src/models/faux.js";
import { drain, forEachBackend, openRatchet } from "../engine/helpers.js";
import { entryRecord } from "./fixtures.js";

const e = entryRecord;

describe("sections (spec §19.25)", () => {
  const shown = new Map([
    ["a", "A"],
    ["b", "B"],
  ]);
  it("§19.25 nothing is written when nothing changed; a change, an addition at the end or a removal is a patch; another order is a baseline", () => {
    expect(
      planSections(shown, [
        ["a", "A"],
        ["b", "B"],
      ]),
    ).toBeNull();
    expect(
      planSections(shown, [
        ["a", "A2"],
        ["b", "B"],
        ["c", "C"],
      ]),
    ).toEqual({
      sections: [
        ["a", "A2"],
        ["c", "C"],
      ],
    });
    expect(planSections(shown, [["b", "B"]])).toEqual({ sections: [["a", null]] });
    expect(
      planSections(shown, [
        ["b", "B"],
        ["a", "A"],
      ]),
    ).toEqual({
      sections: [
        ["b", "B"],
        ["a", "A"],
      ],
      baseline: true,
    });
    expect(planSections(new Map(), [["a", "A"]])).toEqual({ sections: [["a", "A"]], baseline: true });
  });

  it("§19.25 only section entries after the context's head count: a compaction's kept range is superseded, and the first after the head leads the prompt", () => {
    const entries = [
      e(9, "compaction", { text: "S", keptFrom: 2 }),
      e(2, "user", { text: "kept" }),
      e(3, "system", { sections: [["a", "OLD"]], baseline: true }),
      e(10, "user", { text: "new" }),
      e(11, "system", { sections: [["a", "NEW"]], baseline: true }),
      e(12, "assistant", { text: "ok" }),
      e(13, "system", { sections: [["a", null]] }),
    ];
    expect([...shownSections(entries.slice(0, 6))]).toEqual([["a", "NEW"]]);
    expect(shownSections(entries).size).toBe(0);
    const p = promptOf(undefined, entries);
    expect(p.map((m) => m.role)).toEqual(["system", "user", "user", "user", "assistant", "system"]);
    expect(p[0]).toEqual({ role: "system", content: "NEW" });
    expect(JSON.stringify(p)).not.toContain("OLD");
    expect(p.at(-1)).toEqual({ role: "system", content: '[the section "a" no longer applies]' });
  });
});

forEachBackend(() => {
  it("§19.25 §17.7 a fork shows what its parent was shown and writes no new section entry while its sections are the same", async () => {
    const model = fauxModel({ scripts: () => ({ text: "ok" }) });
    const agent = defineAgent({ name: "agent.sections", model, instructions: "the rules" });
    const r = await openRatchet([agent.task]);
    const c = new Conversations(r, { run: agent });
    await c.create("p1");
    await c.submit("p1", { text: "one" });
    await drain(r);
    await c.submit("p1", { text: "two" });
    await drain(r);
    expect((await c.entries("p1")).filter((x) => x.kind === "system")).toHaveLength(1);
    const fork = await c.fork("p1", (await c.get("p1"))!.length - 1, { id: "p1-fork" });
    await c.submit(fork.id, { text: "three" });
    await drain(r);
    expect((await c.entries(fork.id)).filter((x) => x.kind === "system")).toHaveLength(1);
    const last = model.prompts.at(-1)!;
    expect(last[0]).toEqual({ role: "system", content: "the rules" });
    expect(last.filter((m) => m.role === "system")).toHaveLength(1);
  });
});
