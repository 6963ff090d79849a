/** The forge contract suite (spec §22.3) on the fake and on GitHubForge against the local GitHub mock. */
import { describe, expect, it } from "vitest";
import { FakeForge } from "../../src/dispatch/forge/fake.js";
import { GitHubForge } from "../../src/dispatch/forge/github.js";
import { registerForgeContract } from "../../src/dispatch/testing/forge-contract.js";
import { startGitHubMock } from "../../src/dispatch/testing/github-mock.js";

const runner = { describe, it, expect };

registerForgeContract({
  name: "FakeForge",
  open: async (model) => ({ forge: new FakeForge(model) }),
  runner,
});

registerForgeContract({
  name: "GitHubForge against the mock",
  open: async (model) => {
    const mock = await startGitHubMock(model, { token: "ghp_contractToken1234" });
    const forge = new GitHubForge({ apiUrl: mock.url, token: "ghp_contractToken1234", clock: model.clock });
    return { forge, close: () => mock.close() };
  },
  runner,
});
