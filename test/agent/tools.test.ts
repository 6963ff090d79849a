/** defineTool and the built-in coding tools over a real LocalEnv (spec §19.6–§19.9). */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { LocalEnv } from "../../src/agent/env/local.js";
import { bashTool } from "../../src/agent/tools/bash.js";
import { defineTool, runTool, type ToolContext, type ToolDefinition } from "../../src/agent/tools/define.js";
import {
  editTool,
  findTool,
  globToRegExp,
  grepTool,
  lsTool,
  readTool,
  writeTool,
} from "../../src/agent/tools/files.js";
import { truncateText } from "../../src/agent/tools/truncate.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function context(signal = new AbortController().signal): ToolContext & { env: LocalEnv; streamed: string[] } {
  const dir = mkdtempSync(join(tmpdir(), "ratchet-tools-"));
  dirs.push(dir);
  const streamed: string[] = [];
  return {
    callId: "call-1",
    env: new LocalEnv({ cwd: dir }),
    signal,
    output: (t) => streamed.push(t),
    streamed,
  };
}

const call = <A>(t: ToolDefinition<A>, ctx: ToolContext, args: unknown) => runTool(t, ctx, args);
const read = async (ctx: ToolContext, p: string) => Buffer.from(await ctx.env.readFile(p)).toString();

describe("defineTool (spec §19.6)", () => {
  it("§19.6 the model's JSON Schema comes from the Standard Schema; bad specs fail at definition with RATCHET_CONFIG", () => {
    const t = defineTool({
      name: "add",
      description: "adds",
      schema: z.object({ a: z.number(), b: z.number().optional() }),
      replay: "safe",
      execute: (_c, x) => String(x.a + (x.b ?? 0)),
    });
    expect(t.parameters).toEqual({
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a"],
    });
    const base = {
      name: "x",
      description: "d",
      schema: z.object({}),
      replay: "safe" as const,
      execute: () => "",
    };
    for (const bad of [
      { ...base, name: "has space" },
      { ...base, description: "" },
      { ...base, replay: "maybe" },
      { ...base, schema: { not: "a schema" } },
      { ...base, execute: 42 },
    ])
      expect(() => defineTool(bad as never)).toThrow(expect.objectContaining({ code: "RATCHET_CONFIG" }));
  });

  it("§19.6 invalid arguments and a throw become error results; the code never sees refused arguments", async () => {
    let ran = 0;
    const t = defineTool({
      name: "div",
      description: "divides",
      schema: z.object({ a: z.number(), b: z.number() }),
      replay: "safe",
      execute: (_c, x) => {
        ran++;
        if (x.b === 0) throw new Error("division by zero");
        return { content: String(x.a / x.b), details: { exact: true } };
      },
    });
    const ctx = context();
    const bad = await call(t, ctx, { a: "one", b: 2 });
    expect(bad.isError).toBe(true);
    expect(bad.content).toMatch(/^invalid arguments for div: a: /);
    expect(ran).toBe(0);
    expect(await call(t, ctx, { a: 1, b: 0 })).toEqual({
      content: "div failed: division by zero",
      isError: true,
    });
    expect(await call(t, ctx, { a: 6, b: 3 })).toEqual({ content: "2", details: { exact: true } });
  });

  it("§19.7 a long result keeps its head and tail with a marker; limits are per tool", async () => {
    const t = defineTool({
      name: "long",
      description: "long",
      schema: z.object({}),
      replay: "safe",
      limits: { maxChars: 100, maxLines: 10 },
      execute: () => Array.from({ length: 100 }, (_, i) => `line ${i}`).join("\n"),
    });
    const r = await call(t, context(), {});
    const text = r.content as string;
    expect(text.startsWith("line 0\nline 1\n")).toBe(true);
    expect(text.endsWith("line 98\nline 99")).toBe(true);
    expect(text).toMatch(/\[… \d+ characters, \d+ lines omitted …\]/);
    const t2 = truncateText("x".repeat(1_000), { maxChars: 100 });
    expect([t2.truncated, t2.text.length < 160, t2.chars]).toEqual([true, true, 1_000]);
    expect(truncateText("short").truncated).toBe(false);
  });
});

describe("file tools (spec §19.8)", () => {
  it("§19.8 read: ranges by line with a note to read on; binary refused; images returned as images; directories refused", async () => {
    const ctx = context();
    await ctx.env.writeFile("f.txt", Array.from({ length: 10 }, (_, i) => `l${i + 1}`).join("\n"));
    expect((await call(readTool, ctx, { path: "f.txt" })).content).toBe(
      "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10",
    );
    expect((await call(readTool, ctx, { path: "f.txt", offset: 3, limit: 2 })).content).toBe(
      "l3\nl4\n[lines 3–4 of 10; read on with offset 5]",
    );
    expect((await call(readTool, ctx, { path: "f.txt", offset: 50 })).isError).toBe(true);
    await ctx.env.writeFile("b.bin", new Uint8Array([1, 2, 0, 3]));
    expect((await call(readTool, ctx, { path: "b.bin" })).content).toMatch(/binary file/);
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0]);
    await ctx.env.writeFile("i.png", png);
    expect((await call(readTool, ctx, { path: "i.png" })).content).toEqual({
      type: "image",
      mimeType: "image/png",
      data: Buffer.from(png).toString("base64"),
    });
    expect((await call(readTool, ctx, { path: "." })).content).toMatch(/is a directory/);
    expect((await call(readTool, ctx, { path: "missing" })).content).toMatch(/no such file/);
  });

  it("§19.8 §19.2 a path outside cwd is an error result, and nothing is written", async () => {
    const ctx = context();
    const r = await call(writeTool, ctx, { path: "../escaped.txt", content: "x" });
    expect(r.isError).toBe(true);
    expect(r.content).toMatch(/escape/);
    expect((await call(readTool, ctx, { path: "/etc/hostname" })).content).toMatch(/escape/);
  });

  it("§19.8 edit: an exact match is replaced and a unified diff returned; missing or ambiguous matches change nothing", async () => {
    const ctx = context();
    await ctx.env.writeFile("a.ts", "const a = 1;\nconst b = 2;\nconst a2 = 1;\n");
    const ok = await call(editTool, ctx, { path: "a.ts", oldText: "b = 2", newText: "b = 3" });
    expect(ok.isError).toBeUndefined();
    expect(ok.content).toContain("-const b = 2;\n+const b = 3;");
    expect(ok.content).toContain("--- a.ts");
    expect(await read(ctx, "a.ts")).toBe("const a = 1;\nconst b = 3;\nconst a2 = 1;\n");
    const missing = await call(editTool, ctx, { path: "a.ts", oldText: "nope", newText: "x" });
    expect([missing.isError, missing.content]).toEqual([
      true,
      "a.ts: oldText was not found; nothing changed",
    ]);
    const ambiguous = await call(editTool, ctx, { path: "a.ts", oldText: " = 1;", newText: " = 9;" });
    expect(ambiguous.isError).toBe(true);
    expect(ambiguous.content).toMatch(/occurs 2 times/);
    expect(await read(ctx, "a.ts")).toBe("const a = 1;\nconst b = 3;\nconst a2 = 1;\n");
    await call(editTool, ctx, { path: "a.ts", oldText: " = 1;", newText: " = $&9;", replaceAll: true });
    expect(await read(ctx, "a.ts")).toBe("const a = $&9;\nconst b = 3;\nconst a2 = $&9;\n");
  });

  it("§19.5 §19.8 parallel edits of one file are serialised: both apply", async () => {
    const ctx = context();
    const lines = Array.from({ length: 20 }, (_, i) => `item ${i}`);
    await ctx.env.writeFile("list.txt", lines.join("\n"));
    const results = await Promise.all(
      lines.map((l, i) =>
        call(editTool, ctx, {
          path: "list.txt",
          oldText: `${l}\n`.replace(/\n$/, i < 19 ? "\n" : ""),
          newText: `${l} done${i < 19 ? "\n" : ""}`,
        }),
      ),
    );
    expect(results.filter((r) => r.isError)).toEqual([]);
    expect(await read(ctx, "list.txt")).toBe(lines.map((l) => `${l} done`).join("\n"));
  });

  it("§19.8 ls, find and grep: bounded, sorted, skipping .git and node_modules", async () => {
    const ctx = context();
    await ctx.env.writeFile("src/a.ts", "export const needle = 1;\n");
    await ctx.env.writeFile("src/deep/b.ts", "// no\nconst Needle = 2;\n");
    await ctx.env.writeFile("src/c.json", '{"needle": true}');
    await ctx.env.writeFile("node_modules/x/index.ts", "needle");
    await ctx.env.writeFile(".git/config", "needle");
    expect((await call(lsTool, ctx, { path: "src" })).content).toBe("a.ts\nc.json\ndeep/");
    expect((await call(findTool, ctx, { pattern: "**/*.ts" })).content).toBe("src/a.ts\nsrc/deep/b.ts");
    expect((await call(findTool, ctx, { pattern: "*.json" })).content).toBe("src/c.json");
    expect((await call(grepTool, ctx, { pattern: "needle", glob: "*.ts" })).content).toBe(
      "src/a.ts:1: export const needle = 1;",
    );
    expect((await call(grepTool, ctx, { pattern: "needle", ignoreCase: true, path: "src" })).content).toBe(
      'src/a.ts:1: export const needle = 1;\nsrc/c.json:1: {"needle": true}\nsrc/deep/b.ts:2: const Needle = 2;',
    );
    expect((await call(grepTool, ctx, { pattern: "(" })).isError).toBe(true);
    expect(globToRegExp("src/**/*.ts").test("src/x/y/z.ts")).toBe(true);
    expect(globToRegExp("src/**/*.ts").test("src/z.ts")).toBe(true);
    expect(globToRegExp("*.ts").test("a/b.ts")).toBe(false);
  });
});

describe("bash tool (spec §19.9)", () => {
  it("§19.9 output streams to the call's stream as it comes; a non-zero exit is an error result with the output", async () => {
    const ctx = context();
    const r = await call(bashTool, ctx, { command: "echo one; echo two >&2; exit 4" });
    expect(r.isError).toBe(true);
    expect(r.content).toMatch(/^one\ntwo\n\[exit 4\]$|^two\none\n\[exit 4\]$/);
    expect(ctx.streamed.join("")).toMatch(/one\n/);
    const ok = await call(bashTool, ctx, { command: "printf hi > made.txt && cat made.txt" });
    expect([ok.isError, ok.content]).toEqual([false, "hi"]);
  });

  it("§19.9 §19.3 a timeout and an abort kill the command's process group", async () => {
    const ctx = context();
    const t = await call(bashTool, ctx, { command: "sleep 30 & echo $! > bg.pid; sleep 30", timeoutMs: 300 });
    expect(t.isError).toBe(true);
    expect(t.content).toMatch(/timed out after 300 ms; process group killed/);
    const pid = (await read(ctx, "bg.pid")).trim();
    const alive = await ctx.env.exec([
      "bash",
      "-c",
      `sleep 0.2; s=$(ps -o stat= -p ${pid}); case "$s" in ""|Z*) echo gone;; *) echo alive;; esac`,
    ]);
    expect(alive.stdout).toBe("gone\n");
    const ac = new AbortController();
    const actx = { ...context(ac.signal), output: (s: string) => s.includes("go") && ac.abort() };
    const a = await call(bashTool, actx, { command: "echo go; sleep 30" });
    expect(a.content).toMatch(/aborted; process group killed/);
  });

  it("§19.9 §19.4 a long output keeps its head and tail for the model; the stream got all of it", async () => {
    const ctx = context();
    const r = await call(bashTool, ctx, { command: "echo START; seq 1 100000; echo END" });
    const text = r.content as string;
    expect(text.startsWith("START\n1\n2\n")).toBe(true);
    expect(text.endsWith("99999\n100000\nEND\n")).toBe(true);
    expect(text).toMatch(/omitted/);
    expect(text.length).toBeLessThan(31_000);
    expect(ctx.streamed.join("").length).toBe(
      "START\n".length +
        "END\n".length +
        Array.from({ length: 100000 }, (_, i) => `${i + 1}\n`).join("").length,
    );
  });
});
