/**
 * The README's and docs' import lines name the package by its real name (package.json), and only
 * exports it has: the check .ci/run runs (.ci/check-doc-imports.mjs), run here on the real files
 * and on a README that imports the bare name `ratchet`, an unrelated package on npm. The check of
 * imported names needs dist/, which npm test builds first.
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const SCRIPT = path.join(ROOT, ".ci/check-doc-imports.mjs");
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { name: string };

const run = (...files: string[]) => spawnSync(process.execPath, [SCRIPT, ...files], { encoding: "utf8" });

it("package name: not the bare `ratchet` (someone else's package on npm); the bin keeps the name", () => {
  expect(pkg.name).toBe("@ratchet-engine/ratchet");
  const bin = (JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { bin: object }).bin;
  expect(Object.keys(bin)).toEqual(["ratchet"]);
});

it("package name: the README and docs import the package by package.json's name, and only what it exports", () => {
  const readme = fs.readFileSync(path.join(ROOT, "README.md"), "utf8");
  expect(readme).toContain(`from "${pkg.name}"`); // the check below is not vacuous
  const r = run();
  expect(r.stderr).toBe("");
  expect(r.status).toBe(0);
});

it("package name: the check refuses the bare name, unknown subpaths and names the package does not export", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ratchet-doc-"));
  try {
    const bad = path.join(dir, "README.md");
    fs.writeFileSync(
      bad,
      [
        "```ts",
        'import { Ratchet, defineTask } from "ratchet";',
        `import { NoSuchExport } from "${pkg.name}";`,
        `import { FakeClock } from "${pkg.name}/nope";`,
        'import { z } from "zod";',
        "```",
      ].join("\n"),
    );
    const r = run(bad);
    expect(r.status).toBe(1);
    const lines = r.stderr.trim().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/README\.md:2: imports "ratchet"; the package is "@ratchet-engine\/ratchet"/);
    expect(lines[1]).toMatch(/:3: .* has no export named NoSuchExport/);
    expect(lines[2]).toMatch(/:4: .*\/nope" is not in package.json exports/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
