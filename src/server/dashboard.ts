/**
 * Serves the built dashboard (dashboard/ → dist/dashboard by `npm run
 * build`): `GET /` answers index.html, `GET /assets/*` the files Vite wrote.
 *
 * The files need no token: they are the same for everyone and hold no data.
 * The app asks for the token and sends it on every /api call (docs/http.md,
 * "Dashboard"). Without a token the server's Host check still applies to
 * these paths, as to every other.
 *
 * Invariant: only a regular file under `<dir>/assets` (or `<dir>/index.html`)
 * with a known extension and at most MAX_FILE_BYTES is ever read. A path is
 * checked as text first (segments of [A-Za-z0-9._-], none starting with a
 * dot, so no `..` and no hidden file), then resolved through symlinks and
 * checked again to be inside the folder: a link pointing out is refused like
 * a traversal. Every refusal is the same 404, so probing learns nothing.
 */
import { realpathSync } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { dirname, extname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { Hono } from "hono";
import { HttpError } from "./errors.js";

/** Vite's bundles are a few hundred KiB; anything larger here is not ours. */
export const MAX_FILE_BYTES = 8 * 1024 * 1024;

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
};

/**
 * The page may load only its own scripts and styles and talk only to its own
 * origin; nothing may frame it (its buttons retry and abort tasks).
 */
const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const SAFE_PATH = /^[A-Za-z0-9_-][A-Za-z0-9._-]*(\/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$/;
const MAX_PATH = 256;

/**
 * Where `npm run build` put the dashboard: dist/dashboard at the package
 * root. This module runs compiled (dist/src/server/) or, in tests, from
 * source (src/server/); both are two levels below a folder that holds it.
 */
export function defaultDashboardDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const fromSource = import.meta.url.endsWith(".ts");
  return resolve(here, fromSource ? "../../dist/dashboard" : "../../dashboard");
}

function notFound(): HttpError {
  return new HttpError(404, "RATCHET_NOT_FOUND", "no such file");
}

/** The absolute path of `rel` inside `root`, or a 404. */
function safeJoin(root: string, rel: string): string {
  if (rel.length > MAX_PATH || !SAFE_PATH.test(rel)) throw notFound();
  const full = join(root, rel);
  let real: string;
  let realRoot: string;
  try {
    real = realpathSync(full);
    realRoot = realpathSync(root);
  } catch {
    throw notFound();
  }
  const inside = relative(realRoot, real);
  if (inside === "" || inside.startsWith("..") || inside.startsWith(sep)) throw notFound();
  return real;
}

async function readBounded(path: string): Promise<Uint8Array<ArrayBuffer>> {
  const type = CONTENT_TYPES[extname(path).toLowerCase()];
  if (!type) throw notFound();
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await stat(path);
  } catch {
    throw notFound();
  }
  if (!info.isFile() || info.size > MAX_FILE_BYTES) throw notFound();
  const data = await readFile(path);
  if (data.byteLength > MAX_FILE_BYTES) throw notFound();
  return new Uint8Array(data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);
}

/** Registers `/` and `/assets/*` over `dir` (a folder holding index.html and assets/). */
export function registerDashboard(app: Hono, dir: string): void {
  const root = resolve(dir);
  app.get("/", async (c) => {
    let page: Uint8Array<ArrayBuffer>;
    try {
      page = await readBounded(safeJoin(root, "index.html"));
    } catch {
      throw new HttpError(
        404,
        "RATCHET_NOT_FOUND",
        "the dashboard is not built here: run `npm run build` (it writes dist/dashboard)",
      );
    }
    return c.body(page, 200, {
      "Content-Type": CONTENT_TYPES[".html"]!,
      "Content-Security-Policy": PAGE_CSP,
      "X-Frame-Options": "DENY",
      "Referrer-Policy": "no-referrer",
    });
  });
  app.get("/assets/:path{.+}", async (c) => {
    const rel = c.req.param("path");
    const file = safeJoin(join(root, "assets"), rel);
    const data = await readBounded(file);
    return c.body(data, 200, {
      "Content-Type": CONTENT_TYPES[extname(file).toLowerCase()]!,
      // Vite names every asset by its content hash: a changed file has a new name.
      "Cache-Control": "public, max-age=31536000, immutable",
    });
  });
}
