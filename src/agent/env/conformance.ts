/**
 * The ExecutionEnv conformance suite (spec §19.1–§19.5): every rule an environment promises, checked
 * through the interface only, so a container or remote environment can run it as the local one does.
 *
 * ```ts
 * import { describe, expect, it } from "vitest";
 * import { registerEnvConformance } from "@ratchet-engine/ratchet/agent";
 * registerEnvConformance({ name: "my env", open: async () => ({ env: await myEnv(), cleanup }), runner: { describe, it, expect } });
 * ```
 *
 * `open()` returns an environment whose cwd is an empty directory, with bash, sleep, head, tr, ln,
 * cat and ps on its PATH; `cleanup` removes it.
 */
import type { ExecutionEnv, ProcessGroupRecord } from "./types.js";

interface Assertion {
  toBe(expected: unknown): void;
  toEqual(expected: unknown): void;
  toContain(item: unknown): void;
  toBeGreaterThan(n: number): void;
  toBeLessThan(n: number): void;
  toBeNull(): void;
  readonly not: Assertion;
}

export interface EnvConformanceOptions {
  name: string;
  open(): Promise<{ env: ExecutionEnv; cleanup(): Promise<void> }>;
  runner: {
    describe(name: string, fn: () => void): void;
    it(name: string, fn: () => Promise<void>, timeoutMs?: number): void;
    expect(actual: unknown, message?: string): Assertion;
  };
}

const text = (b: Uint8Array) => Buffer.from(b).toString("utf8");

async function kind(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
  } catch (e) {
    return (e as { kind?: string }).kind ?? `not an EnvError: ${String(e)}`;
  }
  return "resolved";
}

/**
 * Whether process `pid` has ended (a zombie counts: a container's init may reap late), looked at
 * from inside the environment, for up to 2 s: a killed process takes a moment to go.
 */
async function gone(env: ExecutionEnv, pid: string): Promise<boolean> {
  const script = `for i in $(seq 100); do s=$(ps -o stat= -p ${pid} 2>/dev/null); case "$s" in ""|Z*) echo gone; exit 0;; esac; sleep 0.02; done; echo alive`;
  return (await env.exec(["bash", "-c", script])).stdout === "gone\n";
}

export function registerEnvConformance(o: EnvConformanceOptions): void {
  const { describe, expect } = o.runner;
  const it = (name: string, fn: (env: ExecutionEnv) => Promise<void>) =>
    o.runner.it(name, async () => {
      const { env, cleanup } = await o.open();
      try {
        await fn(env);
      } finally {
        await cleanup();
      }
    });

  describe(`ExecutionEnv conformance: ${o.name}`, () => {
    it("§19.1 exec runs argv without a shell: stdout, stderr, exit code, and output streamed as it comes", async (env) => {
      const seen: string[] = [];
      const r = await env.exec(["bash", "-c", 'echo out; echo err >&2; printf "%s" "$X"; exit 3'], {
        env: { X: "from env" },
        onOutput: (s, t) => seen.push(`${s}:${t}`),
      });
      expect([r.exitCode, r.signal, r.timedOut, r.aborted, r.truncated]).toEqual([
        3,
        null,
        false,
        false,
        false,
      ]);
      expect(r.stdout).toBe("out\nfrom env");
      expect(r.stderr).toBe("err\n");
      expect(
        seen
          .filter((s) => s.startsWith("stdout:"))
          .map((s) => s.slice(7))
          .join(""),
      ).toBe(r.stdout);
      const lit = await env.exec(["echo", "$HOME; rm -rf /"]);
      expect(lit.stdout).toBe("$HOME; rm -rf /\n");
      const input = await env.exec(["cat"], { stdin: "fed through stdin" });
      expect(input.stdout).toBe("fed through stdin");
    });

    it("§19.1 exec's cwd is resolved inside the environment; a command that cannot start is spawn_failed", async (env) => {
      await env.writeFile("sub/dir/marker.txt", "here");
      const r = await env.exec(["cat", "marker.txt"], { cwd: "sub/dir" });
      expect(r.stdout).toBe("here");
      expect(await kind(() => env.exec(["/no/such/program-ratchet"]))).toBe("spawn_failed");
      expect(await kind(() => env.exec([]))).toBe("invalid");
      expect(await kind(() => env.exec(["true"], { cwd: "../.." }))).toBe("escape");
    });

    it("§19.3 a timeout kills the whole process group, children included", async (env) => {
      const r = await env.exec(["bash", "-c", "sleep 30 & echo $! > child.pid; sleep 30"], {
        timeoutMs: 300,
      });
      expect(r.timedOut).toBe(true);
      expect(r.exitCode).toBeNull();
      const pid = text(await env.readFile("child.pid")).trim();
      expect(await gone(env, pid)).toBe(true);
    });

    it("§19.3 an abort kills the process group at once", async (env) => {
      const ac = new AbortController();
      const running = env.exec(["bash", "-c", "sleep 30 & echo $! > child.pid; echo started; sleep 30"], {
        signal: ac.signal,
        onOutput: (_s, t) => {
          if (t.includes("started")) ac.abort();
        },
      });
      const r = await running;
      expect([r.aborted, r.timedOut]).toEqual([true, false]);
      expect(await gone(env, text(await env.readFile("child.pid")).trim())).toBe(true);
      expect(await kind(() => env.exec(["true"], { signal: ac.signal }))).toBe("aborted");
    });

    it("§19.30 onStart reports the command's group; reap ends a group left running, then finds it gone", async (env) => {
      if (!env.reap) return; // An environment without reap cannot end leftovers; nothing to hold it to.
      const seen: ProcessGroupRecord[] = [];
      // The shell exits at once; its background sleep stays in the group, as a dead worker's would.
      const r = await env.exec(["bash", "-c", "sleep 30 & echo $! > child.pid"], {
        onStart: (g) => seen.push(g),
      });
      expect(r.exitCode).toBe(0);
      expect(seen.length).toBe(1);
      const pid = text(await env.readFile("child.pid")).trim();
      const state = (await env.exec(["ps", "-o", "stat=", "-p", pid])).stdout.trim();
      expect(state === "" || state.startsWith("Z")).toBe(false); // still running: nothing ended it
      expect(await env.reap(seen[0]!)).toBe("killed");
      expect(await gone(env, pid)).toBe(true);
      expect(await env.reap(seen[0]!)).toBe("gone");
    });

    it("§19.4 output past maxOutputBytes keeps its head and tail, says how much is omitted, and counts every byte", async (env) => {
      const r = await env.exec(
        ["bash", "-c", "printf 'HEAD'; head -c 100000 /dev/zero | tr '\\0' a; printf 'TAIL'"],
        {
          maxOutputBytes: 1_000,
        },
      );
      expect(r.truncated).toBe(true);
      expect(r.stdoutBytes).toBe(100_008);
      expect(r.stdout.startsWith("HEAD")).toBe(true);
      expect(r.stdout.endsWith("TAIL")).toBe(true);
      expect(r.stdout).toContain("characters omitted");
      expect(r.stdout.length).toBeLessThan(1_100);
    });

    it("§19.1 files: write creates parents and replaces whole; read whole or a range; stat and list", async (env) => {
      await env.writeFile("a/b/c.txt", "hello world");
      await env.writeFile("a/b/c.txt", "hello there");
      expect(text(await env.readFile("a/b/c.txt"))).toBe("hello there");
      expect(text(await env.readFile("a/b/c.txt", { offset: 6, length: 3 }))).toBe("the");
      expect(text(await env.readFile("a/b/c.txt", { offset: 100, length: 3 }))).toBe("");
      const st = await env.stat("a/b/c.txt");
      expect([st?.kind, st?.size, st?.name]).toEqual(["file", 11, "c.txt"]);
      expect(await env.stat("a/missing")).toBeNull();
      await env.writeFile("a/z.txt", new Uint8Array([0, 1, 2]));
      expect((await env.list("a")).map((f) => [f.name, f.kind])).toEqual([
        ["b", "directory"],
        ["z.txt", "file"],
      ]);
      expect((await env.list("a", { limit: 1 })).length).toBe(1);
    });

    it("§19.1 file errors have kinds: not_found, is_directory, exists, too_large, invalid", async (env) => {
      await env.writeFile("dir/f.txt", "x".repeat(100));
      expect(await kind(() => env.readFile("nope.txt"))).toBe("not_found");
      expect(await kind(() => env.readFile("dir"))).toBe("is_directory");
      expect(await kind(() => env.writeFile("dir", "x"))).toBe("is_directory");
      expect(await kind(() => env.writeFile("dir/f.txt", "y", { exclusive: true }))).toBe("exists");
      expect(await kind(() => env.readFile("dir/f.txt", { maxBytes: 10 }))).toBe("too_large");
      expect(await kind(() => env.list("dir/f.txt"))).toBe("not_directory");
      expect(await kind(() => env.readFile(""))).toBe("invalid");
      expect(await kind(() => env.readFile("a\u0000b"))).toBe("invalid");
      expect(text(await env.readFile("dir/f.txt"))).toBe("x".repeat(100));
    });

    it("§19.2 paths that leave cwd are refused: .., absolute elsewhere, a symlink pointing out", async (env) => {
      expect(await kind(() => env.readFile("../outside.txt"))).toBe("escape");
      expect(await kind(() => env.writeFile("../../outside.txt", "x"))).toBe("escape");
      expect(await kind(() => env.stat("/etc/passwd"))).toBe("escape");
      await env.exec(["ln", "-s", "/", "root-link"]);
      expect(await kind(() => env.readFile("root-link/etc/hostname"))).toBe("escape");
      expect(await kind(() => env.writeFile("root-link/tmp/ratchet-escape.txt", "x"))).toBe("escape");
      expect(await env.resolve("ok/inside.txt")).toBe(`${env.cwd}/ok/inside.txt`);
      await env.writeFile("./dots/../fine.txt", "ok");
      expect(text(await env.readFile("fine.txt"))).toBe("ok");
    });

    it("§19.5 writes to one path are serialised; writes to different paths are not", async (env) => {
      const order: string[] = [];
      let release!: () => void;
      const held = new Promise<void>((r) => {
        release = r;
      });
      const first = env.withWriteLock("same.txt", async () => {
        order.push("first in");
        await held;
        order.push("first out");
      });
      const second = env.withWriteLock("./same.txt", async () => {
        order.push("second in");
      });
      const other = env.withWriteLock("other.txt", async () => {
        order.push("other in");
      });
      await other;
      expect(order).toEqual(["first in", "other in"]);
      release();
      await Promise.all([first, second]);
      expect(order).toEqual(["first in", "other in", "first out", "second in"]);
      const failing = env.withWriteLock("same.txt", async () => {
        throw new Error("boom");
      });
      expect(
        await failing.then(
          () => "ok",
          (e: Error) => e.message,
        ),
      ).toBe("boom");
      expect(await env.withWriteLock("same.txt", async () => "after a failure")).toBe("after a failure");
    });
  });
}
