#!/usr/bin/env node
/**
 * CI check: the import lines of the README (and of docs/*.md) name this package by its real name,
 * package.json's `name`, and only subpaths its `exports` map has. The bare name `ratchet` on the npm
 * registry is someone else's package: a README that imports from it sends users to that code.
 *
 * With dist/ built, each such import is also resolved through the package's own name (Node's
 * self-reference) and every name it imports must be an export of that module, so a README cannot
 * show an import that fails.
 *
 * Usage: node .ci/check-doc-imports.mjs [FILE.md …]   (default: README.md and docs/*.md)
 * Exit 0 when every import is right; 1 with one line per wrong import.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));

/** Specifiers that mean this package: its real name, or the bare name it used to have. */
function meansThisPackage(spec) {
  return (
    spec === pkg.name || spec.startsWith(`${pkg.name}/`) || spec === "ratchet" || spec.startsWith("ratchet/")
  );
}

/** `import { A, B as C, type D } from "x"` and `export … from "x"`, with the names imported. */
const IMPORT_RE =
  /^\s*(?:import|export)\s+(type\s+)?(?:\{([^}]*)\}|\*\s+as\s+\w+|\w+)?[\s\S]*?\bfrom\s+["']([^"']+)["']/gm;
const DYNAMIC_RE = /\bimport\(\s*["']([^"']+)["']\s*\)/g;

export function findImports(text) {
  const found = [];
  for (const m of text.matchAll(IMPORT_RE)) {
    const names = (m[2] ?? "")
      .split(",")
      .map((n) => n.trim())
      .filter((n) => n && !n.startsWith("type ") && !m[1])
      .map((n) => n.split(/\s+as\s+/)[0].trim());
    found.push({
      spec: m[3],
      names,
      line: text.slice(0, m.index).split("\n").length + (m[0].match(/^\s*/)[0].split("\n").length - 1),
    });
  }
  for (const m of text.matchAll(DYNAMIC_RE))
    found.push({ spec: m[1], names: [], line: text.slice(0, m.index).split("\n").length });
  return found.filter((f) => meansThisPackage(f.spec));
}

function subpathOf(spec) {
  return spec === pkg.name ? "." : `./${spec.slice(pkg.name.length + 1)}`;
}

export async function check(files) {
  const problems = [];
  const built = existsSync(join(ROOT, "dist/src/index.js"));
  for (const file of files) {
    const where = relative(ROOT, file);
    for (const imp of findImports(readFileSync(file, "utf8"))) {
      const at = `${where}:${imp.line}`;
      if (imp.spec !== pkg.name && !imp.spec.startsWith(`${pkg.name}/`)) {
        problems.push(`${at}: imports "${imp.spec}"; the package is "${pkg.name}" (package.json name)`);
        continue;
      }
      if (!(subpathOf(imp.spec) in pkg.exports)) {
        problems.push(
          `${at}: "${imp.spec}" is not in package.json exports (${Object.keys(pkg.exports).join(", ")})`,
        );
        continue;
      }
      if (!built || imp.names.length === 0) continue;
      const mod = await import(imp.spec);
      for (const n of imp.names)
        if (!(n in mod)) problems.push(`${at}: "${imp.spec}" has no export named ${n}`);
    }
  }
  return problems;
}

function defaultFiles() {
  const docs = join(ROOT, "docs");
  return [
    join(ROOT, "README.md"),
    ...readdirSync(docs)
      .filter((f) => f.endsWith(".md"))
      .map((f) => join(docs, f)),
  ];
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2);
  const problems = await check(args.length ? args : defaultFiles());
  for (const p of problems) console.error(p);
  if (problems.length) process.exit(1);
  console.log(`doc imports: every import of ${pkg.name} names it and an export it has`);
}
