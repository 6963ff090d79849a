/**
 * Finding the pull requests an attempt opened (spec §22.1–§22.2). Pure: text
 * in, references out. Two sources:
 * - pull-request URLs in a session's output or close-out
 *   (`https://HOST/OWNER/REPO/pull/N`, HOST being github.com or a configured
 *   GitHub Enterprise host);
 * - `Ratchet-Attempt: <id>` trailers in a commit message, by git's trailer
 *   rules (the last paragraph, not the subject).
 *
 * Both scan hostile text: output of an agent that may print anything. So
 * neither uses a backtracking regular expression on the whole input, both
 * look at a bounded prefix (URLs) or suffix (trailers), both return a bounded
 * number of results, and neither throws on any string.
 */

/** A pull request on a forge, as text names it (spec §22.1). */
export interface PullRef {
  /** Lower-case host (with `:port` when the URL had one). */
  readonly host: string;
  readonly owner: string;
  readonly repo: string;
  readonly number: number;
}

export interface FoundPull extends PullRef {
  /** The canonical URL: `https://host/owner/repo/pull/N`. */
  readonly url: string;
}

/** Bounds (spec §22.1, §22.2). */
export const MAX_SCAN_CHARS = 1024 * 1024;
export const MAX_FOUND_PULLS = 100;
export const MAX_TRAILER_SCAN_CHARS = 64 * 1024;
export const MAX_TRAILER_IDS = 100;
export const MAX_PULL_NUMBER = 2_147_483_647;
export const DEFAULT_FORGE_HOST = "github.com";
export const ATTEMPT_TRAILER = "ratchet-attempt";

const MAX_HOST = 253;
const MAX_OWNER = 39;
const MAX_REPO = 100;
/** Characters that may stand right before `https://` (anything else, e.g. `=` or `/`, means a URL nested in another). */
const BEFORE = new Set([..." \t\r\n\f\v([<{\"'`,;|*>"]);
/** Characters that may end a pull-request URL (after the number). */
const AFTER = new Set([..." \t\r\n\f\v)]>}\"'`,.;:!?/#|*"]);

const isDigit = (c: number) => c >= 48 && c <= 57;
const isAlnum = (c: number) => isDigit(c) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);

/** Reads `[start, end)` while `ok` holds, at most `max` chars; the end index, or -1 if longer. */
function run(text: string, start: number, max: number, ok: (c: number) => boolean): number {
  let i = start;
  while (i < text.length && i - start <= max && ok(text.charCodeAt(i))) i++;
  return i - start > max ? -1 : i;
}

/** Parses a pull-request URL starting right after `https://` at `i`; null if it is not one. */
function parseAt(text: string, i: number, hosts: ReadonlySet<string>): FoundPull | null {
  const hostEnd = run(text, i, MAX_HOST, (c) => isAlnum(c) || c === 45 || c === 46 || c === 58);
  if (hostEnd <= i || text.charCodeAt(hostEnd) !== 47) return null;
  const host = text.slice(i, hostEnd).toLowerCase();
  if (!hosts.has(host)) return null;
  const ownerEnd = run(text, hostEnd + 1, MAX_OWNER, (c) => isAlnum(c) || c === 45);
  if (ownerEnd <= hostEnd + 1 || ownerEnd < 0 || text.charCodeAt(ownerEnd) !== 47) return null;
  const owner = text.slice(hostEnd + 1, ownerEnd);
  if (owner.startsWith("-")) return null;
  const repoEnd = run(text, ownerEnd + 1, MAX_REPO, (c) => isAlnum(c) || c === 45 || c === 46 || c === 95);
  if (repoEnd <= ownerEnd + 1 || repoEnd < 0 || text.charCodeAt(repoEnd) !== 47) return null;
  const repo = text.slice(ownerEnd + 1, repoEnd);
  if (repo === "." || repo === "..") return null;
  if (text.slice(repoEnd, repoEnd + 6) !== "/pull/") return null;
  const numStart = repoEnd + 6;
  const numEnd = run(text, numStart, 10, isDigit);
  if (numEnd <= numStart || numEnd < 0 || text.charCodeAt(numStart) === 48) return null;
  if (numEnd < text.length && !AFTER.has(text[numEnd]!)) return null;
  const number = Number(text.slice(numStart, numEnd));
  if (number > MAX_PULL_NUMBER) return null;
  return { host, owner, repo, number, url: `https://${host}/${owner}/${repo}/pull/${number}` };
}

/** The identity of a pull request: host, owner and repository compare case-insensitively on GitHub. */
export function pullKey(r: PullRef): string {
  return `${r.host}/${r.owner}/${r.repo}#${r.number}`.toLowerCase();
}

/**
 * The pull-request URLs in `text`, first occurrence first, without repeats
 * (spec §22.1). Only `https`, only the hosts given (github.com when none
 * are), only when the URL starts the text or follows a space or an opening
 * punctuation mark (a URL nested in another URL's path or query is not a
 * link), and only when the number ends at a space, punctuation or the end.
 * Looks at the first MAX_SCAN_CHARS characters and returns at most
 * MAX_FOUND_PULLS.
 * Invariant: linear in the scanned length (each position is read a bounded
 * number of times), and total: no string makes it throw.
 */
export function findPullUrls(text: string, hosts: readonly string[] = [DEFAULT_FORGE_HOST]): FoundPull[] {
  if (typeof text !== "string") return [];
  const known = new Set(hosts.map((h) => h.toLowerCase()));
  const s = text.length > MAX_SCAN_CHARS ? text.slice(0, MAX_SCAN_CHARS) : text;
  const out: FoundPull[] = [];
  const seen = new Set<string>();
  let from = 0;
  while (out.length < MAX_FOUND_PULLS) {
    const at = s.indexOf("://", from);
    if (at < 0) break;
    from = at + 3;
    const start = at - 5;
    if (start < 0 || s.slice(start, at).toLowerCase() !== "https") continue;
    if (start > 0 && !BEFORE.has(s[start - 1]!)) continue;
    const found = parseAt(s, at + 3, known);
    if (found === null) continue;
    const key = pullKey(found);
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(found);
  }
  return out;
}

/**
 * The part of a session's output whose pull-request URLs count (spec §22.11): when the output was
 * `cut` at the front, its first line may be the tail of a longer one and is left out; while the
 * session may still print (`final` false), text after the last line break may be a URL half
 * printed and is left out too. Pure and total.
 */
export function scannableOutput(text: string, cut: boolean, final: boolean): string {
  if (typeof text !== "string") return "";
  const start = cut ? text.indexOf("\n") + 1 : 0;
  if (cut && start === 0) return "";
  const end = final ? text.length : text.lastIndexOf("\n") + 1;
  return end > start ? text.slice(start, end) : "";
}

/** Parses one URL that must be a pull-request URL and nothing else (a manual link, spec §22.1); null if it is not. */
export function parsePullUrl(url: string, hosts: readonly string[] = [DEFAULT_FORGE_HOST]): FoundPull | null {
  if (typeof url !== "string" || url.length > 2048) return null;
  const t = url.trim();
  const found = findPullUrls(t, hosts);
  if (found.length !== 1) return null;
  const f = found[0]!;
  // The whole text is the URL: an optional `/…`, `#…` or `?…` may follow the number, nothing else.
  const rest = t.slice(f.url.length);
  if (t.slice(0, f.url.length).toLowerCase() !== f.url.toLowerCase()) return null;
  if (rest !== "" && (!"/#?".includes(rest[0]!) || /\s/.test(rest))) return null;
  return f;
}

export interface Trailer {
  /** As written. */
  readonly key: string;
  readonly value: string;
}

/** `Key: value` with git's token key (letters, digits, `-`); whitespace may precede the colon. */
function trailerOf(line: string): Trailer | null {
  let i = 0;
  while (i < line.length && i < 100 && (isAlnum(line.charCodeAt(i)) || line.charCodeAt(i) === 45)) i++;
  if (i === 0 || line.charCodeAt(0) === 45) return null;
  const key = line.slice(0, i);
  while (i < line.length && (line[i] === " " || line[i] === "\t")) i++;
  if (line[i] !== ":") return null;
  return { key, value: line.slice(i + 1).trim() };
}

/**
 * The trailers of a commit message by git's rules (spec §22.2): the last
 * paragraph (lines after the last blank line, trailing blank lines and
 * `#` comment lines ignored), never the subject's paragraph; it is a trailer
 * block when every line is a trailer or a continuation (a line starting with
 * whitespace), or when at least a quarter of its lines are trailers and one
 * of them is `Ratchet-Attempt` (git's rule for a configured trailer). A
 * continuation line joins the trailer above it. Reads the last
 * MAX_TRAILER_SCAN_CHARS characters.
 * Invariant: total and linear; a message without a trailer block gives [].
 */
export function parseTrailers(message: string): Trailer[] {
  if (typeof message !== "string") return [];
  const text = message.length > MAX_TRAILER_SCAN_CHARS ? message.slice(-MAX_TRAILER_SCAN_CHARS) : message;
  const lines = text
    .split("\n")
    .map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l))
    .filter((l) => !l.startsWith("#"));
  while (lines.length > 0 && lines.at(-1)!.trim() === "") lines.pop();
  let start = lines.length;
  while (start > 0 && lines[start - 1]!.trim() !== "") start--;
  // The subject's paragraph is never the trailer block (a one-paragraph message has none).
  if (start === 0 && message.length <= MAX_TRAILER_SCAN_CHARS) return [];
  const block = lines.slice(start);
  const out: { key: string; value: string }[] = [];
  let trailers = 0;
  let others = 0;
  for (const line of block) {
    if ((line.startsWith(" ") || line.startsWith("\t")) && out.length > 0) {
      out.at(-1)!.value = `${out.at(-1)!.value} ${line.trim()}`.trim();
      continue;
    }
    const t = trailerOf(line);
    if (t) {
      trailers++;
      out.push({ key: t.key, value: t.value });
    } else others++;
  }
  if (trailers === 0) return [];
  const configured = out.some((t) => t.key.toLowerCase() === ATTEMPT_TRAILER);
  if (others === 0 || (configured && trailers * 4 >= trailers + others)) return out;
  return [];
}

/**
 * The attempt ids a commit message names in `Ratchet-Attempt:` trailers (key
 * case-insensitive), in order, without repeats, at most MAX_TRAILER_IDS. A
 * value that is not a positive integer id is ignored. spec §22.2.
 */
export function attemptTrailers(message: string): string[] {
  const out: string[] = [];
  for (const t of parseTrailers(message)) {
    if (t.key.toLowerCase() !== ATTEMPT_TRAILER) continue;
    if (!/^[1-9][0-9]{0,17}$/.test(t.value) || out.includes(t.value)) continue;
    out.push(t.value);
    if (out.length >= MAX_TRAILER_IDS) break;
  }
  return out;
}
