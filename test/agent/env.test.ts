/** The local ExecutionEnv against the exported conformance suite (spec §19.1–§19.5), for real processes and files. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { registerEnvConformance } from "../../src/agent/env/conformance.js";
import { LocalEnv } from "../../src/agent/env/local.js";

registerEnvConformance({
  name: "LocalEnv",
  open: async () => {
    const dir = mkdtempSync(join(tmpdir(), "ratchet-env-"));
    return {
      env: new LocalEnv({ cwd: dir }),
      cleanup: async () => rmSync(dir, { recursive: true, force: true }),
    };
  },
  runner: { describe, it, expect },
});

describe("LocalEnv options", () => {
  it("§19.2 allowOutside lifts the cwd bound; a relative cwd is refused", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ratchet-env-"));
    try {
      const env = new LocalEnv({ cwd: join(dir, "inner"), allowOutside: true });
      await env.writeFile("../outer.txt", "out");
      expect(Buffer.from(await env.readFile(join(dir, "outer.txt"))).toString()).toBe("out");
      expect(() => new LocalEnv({ cwd: "relative/dir" })).toThrow(/absolute/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
