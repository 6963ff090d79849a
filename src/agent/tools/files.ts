/**
 * The file tools of a coding agent (spec §19.8): read, write, edit, ls, find and grep, each over the
 * conversation's ExecutionEnv, so paths stay inside its cwd (spec §19.2) and writes to one file are
 * serialised (spec §19.5).
 */
import { createPatch } from "diff";
import { z } from "zod";
import type { ExecutionEnv, FileInfo } from "../env/types.js";
import { defineTool, type ToolResult } from "./define.js";

/** Lines and bytes one read returns at most; a longer file is read in ranges. */
export const READ_MAX_LINES = 2_000;
export const READ_MAX_BYTES = 256 * 1024;
/** Largest text file a read opens (lines are found from its start). */
export const READ_MAX_FILE_BYTES = 16 * 1024 * 1024;
/** Largest image a read returns (base64 for the model). */
export const READ_MAX_IMAGE_BYTES = 5 * 1024 * 1024;
/** Largest file edit and write work on. */
export const EDIT_MAX_BYTES = 4 * 1024 * 1024;
/** Files a find or grep looks at, at most; matches it returns, at most. */
export const WALK_MAX_FILES = 20_000;
export const SEARCH_MAX_RESULTS = 500;
const SKIP_DIRS = new Set([".git", "node_modules", ".hg", ".svn"]);

const IMAGES: [string, number[]][] = [
  ["image/png", [0x89, 0x50, 0x4e, 0x47]],
  ["image/jpeg", [0xff, 0xd8, 0xff]],
  ["image/gif", [0x47, 0x49, 0x46, 0x38]],
  ["image/webp", [0x52, 0x49, 0x46, 0x46]],
];

function imageType(head: Uint8Array): string | null {
  for (const [mime, magic] of IMAGES) if (magic.every((b, i) => head[i] === b)) return mime;
  return null;
}

/** A file is binary when its first 8 KiB hold a NUL byte (as git decides). */
function isBinary(bytes: Uint8Array): boolean {
  const n = Math.min(bytes.length, 8192);
  for (let i = 0; i < n; i++) if (bytes[i] === 0) return true;
  return false;
}

const decode = (b: Uint8Array) => new TextDecoder("utf-8").decode(b);

export const readTool = defineTool({
  name: "read",
  description:
    "Read a text file (or an image) in the working directory. Long files come back in ranges: give offset (first line, 1-based) and limit (lines).",
  schema: z.object({
    path: z.string().min(1).max(4096),
    offset: z.number().int().min(1).optional(),
    limit: z.number().int().min(1).max(READ_MAX_LINES).optional(),
  }),
  replay: "safe",
  async execute(ctx, a): Promise<ToolResult> {
    const st = await ctx.env.stat(a.path);
    if (!st) return { content: `${a.path}: no such file`, isError: true };
    if (st.kind === "directory") return { content: `${a.path} is a directory; use ls`, isError: true };
    const head = await ctx.env.readFile(a.path, { length: 8192, signal: ctx.signal });
    const image = imageType(head);
    if (image) {
      if (st.size > READ_MAX_IMAGE_BYTES)
        return {
          content: `${a.path}: image of ${st.size} bytes, over ${READ_MAX_IMAGE_BYTES}`,
          isError: true,
        };
      const bytes = await ctx.env.readFile(a.path, { signal: ctx.signal });
      return { content: { type: "image", mimeType: image, data: Buffer.from(bytes).toString("base64") } };
    }
    if (isBinary(head))
      return { content: `${a.path}: binary file (${st.size} bytes), not shown`, isError: true };
    if (st.size > READ_MAX_FILE_BYTES)
      return {
        content: `${a.path} is ${st.size} bytes, over ${READ_MAX_FILE_BYTES}; look into it with bash (head, sed -n, grep)`,
        isError: true,
      };
    const first = (a.offset ?? 1) - 1;
    const limit = a.limit ?? READ_MAX_LINES;
    const bytes = await ctx.env.readFile(a.path, { maxBytes: READ_MAX_FILE_BYTES, signal: ctx.signal });
    const lines = decode(bytes).split("\n");
    if (first >= lines.length && lines.length > 0)
      return {
        content: `${a.path} has ${lines.length} lines; offset ${first + 1} is past its end`,
        isError: true,
      };
    const chosen: string[] = [];
    let size = 0;
    for (let i = first; i < Math.min(lines.length, first + limit); i++) {
      size += lines[i]!.length + 1;
      if (size > READ_MAX_BYTES) break;
      chosen.push(lines[i]!);
    }
    const last = first + chosen.length;
    const more =
      last < lines.length
        ? `\n[lines ${first + 1}–${last} of ${lines.length}; read on with offset ${last + 1}]`
        : "";
    return { content: chosen.join("\n") + more, details: { lines: lines.length, from: first + 1, to: last } };
  },
});

export const writeTool = defineTool({
  name: "write",
  description: "Write a file whole (created with its directories, or replaced).",
  schema: z.object({ path: z.string().min(1).max(4096), content: z.string().max(EDIT_MAX_BYTES) }),
  replay: "safe",
  async execute(ctx, a) {
    return ctx.env.withWriteLock(a.path, async () => {
      const existed = (await ctx.env.stat(a.path)) !== null;
      await ctx.env.writeFile(a.path, a.content, { signal: ctx.signal });
      return `${existed ? "replaced" : "created"} ${a.path} (${Buffer.byteLength(a.content)} bytes)`;
    });
  },
});

function occurrences(text: string, needle: string): number {
  let n = 0;
  for (let i = text.indexOf(needle); i !== -1; i = text.indexOf(needle, i + needle.length)) n++;
  return n;
}

export const editTool = defineTool({
  name: "edit",
  description:
    "Replace exact text in a file. oldText must occur exactly once (add surrounding lines to make it unique), or set replaceAll. Returns a unified diff.",
  schema: z.object({
    path: z.string().min(1).max(4096),
    oldText: z.string().min(1).max(EDIT_MAX_BYTES),
    newText: z.string().max(EDIT_MAX_BYTES),
    replaceAll: z.boolean().optional(),
  }),
  replay: "unsafe",
  async execute(ctx, a): Promise<ToolResult> {
    return ctx.env.withWriteLock(a.path, async () => {
      const bytes = await ctx.env.readFile(a.path, { maxBytes: EDIT_MAX_BYTES, signal: ctx.signal });
      if (isBinary(bytes)) return { content: `${a.path}: binary file, not edited`, isError: true };
      const before = decode(bytes);
      const n = occurrences(before, a.oldText);
      if (n === 0) return { content: `${a.path}: oldText was not found; nothing changed`, isError: true };
      if (n > 1 && !a.replaceAll)
        return {
          content: `${a.path}: oldText occurs ${n} times; add context to make it unique, or set replaceAll. Nothing changed`,
          isError: true,
        };
      const after = a.replaceAll
        ? before.split(a.oldText).join(a.newText)
        : before.replace(a.oldText, () => a.newText);
      await ctx.env.writeFile(a.path, after, { signal: ctx.signal });
      const diff = createPatch(a.path, before, after, "", "", { context: 3 });
      return { content: diff, details: { replaced: a.replaceAll ? n : 1 } };
    });
  },
});

export const lsTool = defineTool({
  name: "ls",
  description: "List a directory (directories end with /).",
  schema: z.object({
    path: z.string().min(1).max(4096).default("."),
    limit: z.number().int().min(1).max(5_000).optional(),
  }),
  replay: "safe",
  async execute(ctx, a) {
    const limit = a.limit ?? 500;
    const entries = await ctx.env.list(a.path, { limit: limit + 1 });
    const shown = entries.slice(0, limit).map((e) => (e.kind === "directory" ? `${e.name}/` : e.name));
    if (entries.length > limit) shown.push(`[more entries; raise limit (shown ${limit})]`);
    return shown.length ? shown.join("\n") : "(empty directory)";
  },
});

/** A glob as a regular expression: `**` any path, `*` any name part, `?` one character. */
export function globToRegExp(glob: string): RegExp {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === "*" && glob[i + 1] === "*") {
      re += glob[i + 2] === "/" ? "(?:.*/)?" : ".*";
      i += glob[i + 2] === "/" ? 2 : 1;
    } else if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else re += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}

/** Files under `root` (relative paths), breadth first, skipping VCS and dependency folders, bounded. */
async function* walk(
  env: ExecutionEnv,
  root: string,
  signal: AbortSignal,
): AsyncGenerator<FileInfo & { rel: string }> {
  const queue: string[] = [root];
  let seen = 0;
  while (queue.length > 0) {
    if (signal.aborted) return;
    const dir = queue.shift()!;
    const entries = await env.list(dir, { limit: 10_000 }).catch(() => [] as FileInfo[]);
    for (const e of entries) {
      const rel = dir === "." ? e.name : `${dir}/${e.name}`;
      if (e.kind === "directory") {
        if (!SKIP_DIRS.has(e.name)) queue.push(rel);
      } else if (e.kind === "file") {
        if (++seen > WALK_MAX_FILES) return;
        yield { ...e, rel };
      }
    }
  }
}

export const findTool = defineTool({
  name: "find",
  description:
    "Find files by glob (e.g. **/*.ts, src/*.json) under a directory; skips .git and node_modules.",
  schema: z.object({
    pattern: z.string().min(1).max(500),
    path: z.string().min(1).max(4096).default("."),
    limit: z.number().int().min(1).max(SEARCH_MAX_RESULTS).optional(),
  }),
  replay: "safe",
  async execute(ctx, a) {
    const re = globToRegExp(a.pattern);
    const limit = a.limit ?? 200;
    const found: string[] = [];
    for await (const f of walk(ctx.env, a.path, ctx.signal)) {
      const name = a.path === "." ? f.rel : f.rel.slice(a.path.length + 1);
      if (re.test(name) || (!a.pattern.includes("/") && re.test(f.name))) found.push(f.rel);
      if (found.length > limit) break;
    }
    if (found.length === 0) return `no files match ${a.pattern}`;
    const more = found.length > limit ? `\n[more matches; raise limit (shown ${limit})]` : "";
    return found.slice(0, limit).join("\n") + more;
  },
});

export const grepTool = defineTool({
  name: "grep",
  description: "Search file contents for a regular expression; answers path:line: text. Skips binary files.",
  schema: z.object({
    pattern: z.string().min(1).max(1_000),
    path: z.string().min(1).max(4096).default("."),
    glob: z.string().min(1).max(500).optional(),
    ignoreCase: z.boolean().optional(),
    limit: z.number().int().min(1).max(SEARCH_MAX_RESULTS).optional(),
  }),
  replay: "safe",
  async execute(ctx, a): Promise<ToolResult> {
    let re: RegExp;
    try {
      re = new RegExp(a.pattern, a.ignoreCase ? "i" : "");
    } catch (e) {
      return { content: `invalid pattern: ${(e as Error).message}`, isError: true };
    }
    const only = a.glob ? globToRegExp(a.glob) : null;
    const limit = a.limit ?? 200;
    const hits: string[] = [];
    for await (const f of walk(ctx.env, a.path, ctx.signal)) {
      if (only && !only.test(f.name) && !only.test(f.rel)) continue;
      if (f.size > EDIT_MAX_BYTES) continue;
      const bytes = await ctx.env.readFile(f.rel, { signal: ctx.signal }).catch(() => null);
      if (!bytes || isBinary(bytes)) continue;
      const lines = decode(bytes).split("\n");
      for (let i = 0; i < lines.length && hits.length <= limit; i++)
        if (re.test(lines[i]!)) hits.push(`${f.rel}:${i + 1}: ${lines[i]!.slice(0, 500)}`);
      if (hits.length > limit) break;
    }
    if (hits.length === 0) return { content: `no matches for ${a.pattern}` };
    const more = hits.length > limit ? `\n[more matches; raise limit (shown ${limit})]` : "";
    return { content: hits.slice(0, limit).join("\n") + more };
  },
});
