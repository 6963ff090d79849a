/** GitHubForge's conditional requests (spec §22.3) against the local GitHub mock. */
import { afterEach, describe, expect, it } from "vitest";
import { ForgeModel } from "../../src/dispatch/forge/fake.js";
import { GitHubForge } from "../../src/dispatch/forge/github.js";
import { type GitHubMock, startGitHubMock } from "../../src/dispatch/testing/github-mock.js";
import type { RatchetError } from "../../src/errors.js";

const repo = { owner: "acme", repo: "app" };
const ref = { ...repo, number: 7 };
let mock: GitHubMock | undefined;

afterEach(async () => {
  await mock?.close();
  mock = undefined;
});

async function setup(cacheEntries?: number) {
  const model = new ForgeModel();
  model.addPull(repo, { number: 7, commits: [{ sha: "c1", message: "first" }] });
  model.setChecks("sha-7-1", ["success"]);
  mock = await startGitHubMock(model, { token: "ghp_conditional1234" });
  const forge = new GitHubForge({
    apiUrl: mock.url,
    token: "ghp_conditional1234",
    ...(cacheEntries === undefined ? {} : { cacheEntries }),
  });
  return { model, forge, mock };
}

describe("GitHubForge conditional requests", () => {
  it("§22.3 a look at an unchanged pull request is answered 304 from the last answer, with the same status", async () => {
    const { forge, mock } = await setup();
    const first = await forge.pull(ref);
    expect(mock.notModified).toBe(0);
    const again = await forge.pull(ref);
    expect(again).toEqual(first);
    // The pull request, its combined status and its check runs: three requests, each a 304.
    expect(mock.notModified).toBe(3);
    expect(forge.notModified).toBe(3);
    expect(await forge.commits(ref, 10)).toEqual(await forge.commits(ref, 10));
    expect(mock.notModified).toBe(4);
  });

  it("§22.3 a change on the forge is seen at the next look: a new ETag, a full answer", async () => {
    const { model, forge, mock } = await setup();
    expect((await forge.pull(ref))?.state).toBe("open");
    model.merge(ref);
    const merged = await forge.pull(ref);
    expect(merged?.state).toBe("merged");
    // The pull request changed (200); its head's status and runs did not (304).
    expect(mock.notModified).toBe(2);
    model.setChecks("sha-7-1", ["failure"]);
    expect((await forge.pull(ref))?.checks).toBe("failure");
  });

  it("§22.3 cacheEntries 0 sends no conditional request; a bad bound is a typed error", async () => {
    const { forge, mock } = await setup(0);
    await forge.pull(ref);
    await forge.pull(ref);
    expect(mock.notModified).toBe(0);
    for (const bad of [-1, 1.5, 100_001])
      expect(() => new GitHubForge({ apiUrl: mock.url, cacheEntries: bad })).toThrow(
        expect.objectContaining({ code: "RATCHET_CONFIG" }) as unknown as RatchetError,
      );
  });

  it("§22.3 the cache is bounded: past cacheEntries the least recently used answer is asked for in full", async () => {
    const { model, forge, mock } = await setup(3);
    model.addPull(repo, { number: 8 });
    await forge.pull(ref); // 3 entries: pull 7, its status, its runs
    await forge.pull({ ...repo, number: 8 }); // evicts all of 7's
    await forge.pull(ref);
    expect(mock.notModified).toBe(0);
    await forge.pull(ref);
    expect(mock.notModified).toBe(3);
  });
});
