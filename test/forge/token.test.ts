/** spec §22.10: a forge's token is sent to the forge and nowhere else: not in errors, logs or values. */
import { inspect } from "node:util";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ForgeModel } from "../../src/dispatch/forge/fake.js";
import { ForgeError, redact } from "../../src/dispatch/forge/forge.js";
import { GitHubForge } from "../../src/dispatch/forge/github.js";
import { startGitHubMock } from "../../src/dispatch/testing/github-mock.js";

const TOKEN = "ghp_SECRETsecret0123456789abcdef";
const R = { owner: "acme", repo: "widgets" };

afterEach(() => vi.restoreAllMocks());

function captureConsole(): string[] {
  const lines: string[] = [];
  for (const k of ["log", "info", "warn", "error", "debug"] as const)
    vi.spyOn(console, k).mockImplementation((...a: unknown[]) => {
      lines.push(a.map((x) => inspect(x, { depth: 8 })).join(" "));
    });
  return lines;
}

describe("forge tokens", () => {
  it("§22.10 the token reaches the forge, and no error, log line or value shows it", async () => {
    const lines = captureConsole();
    const model = new ForgeModel();
    model.addPull(R, { number: 1 });
    const mock = await startGitHubMock(model, { token: TOKEN });
    try {
      const forge = new GitHubForge({ apiUrl: mock.url, token: TOKEN });
      const ok = await forge.pull({ ...R, number: 1 });
      expect(ok!.state).toBe("open");
      const seen: unknown[] = [
        ok,
        forge,
        JSON.stringify(forge),
        inspect(forge, { depth: 8, showHidden: true }),
      ];
      for (const status of [401, 403, 429, 500] as const) {
        model.failNext({ status, retryAfterSeconds: status === 403 ? 1 : undefined });
        const e = await forge.pull({ ...R, number: 1 }).catch((x: unknown) => x);
        expect(e).toBeInstanceOf(ForgeError);
        seen.push(
          (e as Error).message,
          inspect(e, { depth: 8, showHidden: true }),
          JSON.stringify(e),
          (e as Error).stack,
        );
      }
      // A wrong token is refused by the mock (it checks what it receives) and the refusal shows neither token.
      const wrong = new GitHubForge({ apiUrl: mock.url, token: `${TOKEN}x` });
      const e = await wrong.pull({ ...R, number: 1 }).catch((x: unknown) => x);
      expect((e as ForgeError).kind).toBe("auth");
      seen.push(inspect(e, { depth: 8, showHidden: true }));
      const text =
        seen.map((s) => (typeof s === "string" ? s : inspect(s, { depth: 8 }))).join("\n") + lines.join("\n");
      expect(text).not.toContain(TOKEN);
      expect(text).not.toContain(TOKEN.slice(4, 20));
    } finally {
      await mock.close();
    }
  });

  it("§22.10 redact replaces each secret wherever it appears", () => {
    expect(redact(`a ${TOKEN} b ${TOKEN}`, [TOKEN, undefined])).toBe("a [redacted] b [redacted]");
    expect(redact("short", ["ab"])).toBe("short");
  });
});
