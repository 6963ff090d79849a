/**
 * A local GitHub REST mock (spec §22.3) on 127.0.0.1, serving a ForgeModel
 * with the JSON shapes of the endpoints GitHubForge uses, so the real
 * adapter (Octokit, its paging, its errors) is tested without a network:
 * pull requests, their commits (paged with `Link` headers), combined
 * statuses, check runs (paged), pulls by head branch; 404 for what the model
 * does not have; scripted failures (`model.failNext`): 401, 403 with
 * `x-ratelimit-remaining: 0` and `x-ratelimit-reset`, 429 with
 * `retry-after`, 5xx. With `token` set, a request without that token is 401.
 * Every 200 carries an `ETag` of its body; a request whose `If-None-Match`
 * names the current one is answered `304 Not Modified` with no body, as
 * GitHub does (and does not count against the rate limit).
 */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { ForgeModel, ModelPull, ScriptedFailure } from "../forge/fake.js";

export interface GitHubMock {
  /** The API base URL to give GitHubForge (`http://127.0.0.1:PORT`). */
  readonly url: string;
  /** Every request's method and path (with query), in order. */
  readonly requests: string[];
  /** Requests answered `304 Not Modified`. */
  readonly notModified: number;
  close(): Promise<void>;
}

/** Each live response's 304 counter (a WeakMap: send has only the response). */
const counts = new WeakMap<ServerResponse, () => void>();

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): true {
  const text = JSON.stringify(body);
  if (status === 200) {
    const etag = `"${createHash("sha1").update(text).digest("hex")}"`;
    headers = { ...headers, etag };
    if (res.req.headers["if-none-match"] === etag) {
      counts.get(res)?.();
      res.writeHead(304, { etag, "x-ratelimit-limit": "5000", "x-ratelimit-remaining": "4999" });
      res.end();
      return true;
    }
  }
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "x-ratelimit-limit": "5000",
    "x-ratelimit-remaining": "4999",
    ...headers,
  });
  res.end(text);
  return true;
}

function sendFailure(res: ServerResponse, f: ScriptedFailure): true {
  const h: Record<string, string> = {};
  if (f.retryAfterSeconds !== undefined) h["retry-after"] = String(f.retryAfterSeconds);
  if (f.resetAt !== undefined) {
    h["x-ratelimit-remaining"] = "0";
    h["x-ratelimit-reset"] = String(Math.ceil(f.resetAt / 1000));
  }
  const message =
    f.status === 401 ? "Bad credentials" : f.status >= 500 ? "Server Error" : "API rate limit exceeded";
  return send(res, f.status, { message, documentation_url: "https://docs.github.com/rest" }, h);
}

/** One page of `all` with the `Link` header GitHub sends (`next`, `last`). */
function page<T>(base: string, u: URL, all: T[], res: ServerResponse, wrap?: (items: T[]) => unknown): true {
  const per = Math.min(100, Math.max(1, Number(u.searchParams.get("per_page") ?? 30) || 30));
  const n = Math.max(1, Number(u.searchParams.get("page") ?? 1) || 1);
  const last = Math.max(1, Math.ceil(all.length / per));
  const items = all.slice((n - 1) * per, n * per);
  const link = (p: number) => {
    const q = new URL(u.toString());
    q.searchParams.set("page", String(p));
    q.searchParams.set("per_page", String(per));
    return `<${base}${q.pathname}${q.search}>`;
  };
  const rels: string[] = [];
  if (n < last) rels.push(`${link(n + 1)}; rel="next"`, `${link(last)}; rel="last"`);
  if (n > 1) rels.push(`${link(1)}; rel="first"`, `${link(n - 1)}; rel="prev"`);
  return send(res, 200, wrap ? wrap(items) : items, rels.length ? { link: rels.join(", ") } : {});
}

function pullJson(base: string, owner: string, repo: string, p: ModelPull, host: string) {
  return {
    url: `${base}/repos/${owner}/${repo}/pulls/${p.number}`,
    id: 1_000_000 + p.number,
    number: p.number,
    state: p.state,
    locked: false,
    title: `Pull request ${p.number}`,
    user: { login: "octo", id: 1, type: "User" },
    draft: p.draft,
    merged: p.merged,
    merged_at: p.merged ? "2026-01-02T03:04:05Z" : null,
    mergeable: p.mergeable,
    mergeable_state: p.mergeable === null ? "unknown" : p.mergeable ? "clean" : "dirty",
    html_url: `https://${host}/${owner}/${repo}/pull/${p.number}`,
    head: { label: `${owner}:${p.headRef}`, ref: p.headRef, sha: p.headSha },
    base: { label: `${owner}:main`, ref: "main", sha: "base-sha" },
    created_at: "2026-01-01T00:00:00Z",
    updated_at: "2026-01-02T03:04:05Z",
  };
}

function route(model: ForgeModel, base: string, req: IncomingMessage, res: ServerResponse): true {
  const u = new URL(req.url ?? "/", base);
  const parts = u.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  if (req.method !== "GET" || parts[0] !== "repos" || parts.length < 4)
    return send(res, 404, { message: "Not Found" });
  const [, owner, repo, kind, a, b] = parts as [string, string, string, string, string?, string?];
  const ref = { owner, repo };
  if (kind === "pulls" && a === undefined) {
    const head = u.searchParams.get("head") ?? "";
    const branch = head.includes(":") ? head.slice(head.indexOf(":") + 1) : head;
    const list = model
      .pullsOf(ref)
      .filter((p) => (u.searchParams.get("state") ?? "open") !== "open" || p.state === "open")
      .filter((p) => head === "" || p.headRef === branch)
      .sort((x, y) => y.number - x.number)
      .map((p) => pullJson(base, owner, repo, p, model.host));
    return page(base, u, list, res);
  }
  if (kind === "pulls" && a && /^\d+$/.test(a)) {
    const p = model.getPull({ ...ref, number: Number(a) });
    if (!p) return send(res, 404, { message: "Not Found" });
    if (b === undefined) return send(res, 200, pullJson(base, owner, repo, p, model.host));
    if (b === "commits")
      return page(
        base,
        u,
        p.commits.slice(0, 250).map((c) => ({
          sha: c.sha,
          commit: { message: c.message, author: { name: "octo", date: "2026-01-01T00:00:00Z" } },
          url: `${base}/repos/${owner}/${repo}/commits/${c.sha}`,
        })),
        res,
      );
  }
  if (kind === "commits" && a && b === "status") {
    const c = model.checksOf(a);
    const state = c.statuses.some((s) => s === "failure" || s === "error")
      ? "failure"
      : c.statuses.every((s) => s === "success") && c.statuses.length > 0
        ? "success"
        : "pending";
    return send(res, 200, {
      state,
      sha: a,
      total_count: c.statuses.length,
      statuses: c.statuses.map((s, i) => ({ state: s, context: `ci/${i}`, description: null })),
    });
  }
  if (kind === "commits" && a && b === "check-runs") {
    const runs = model.checksOf(a).runs.map((r, i) => ({ id: i + 1, name: `check-${i}`, head_sha: a, ...r }));
    return page(base, u, runs, res, (items) => ({ total_count: runs.length, check_runs: items }));
  }
  return send(res, 404, { message: "Not Found" });
}

/** Starts the mock on 127.0.0.1 (a free port). */
export async function startGitHubMock(model: ForgeModel, o: { token?: string } = {}): Promise<GitHubMock> {
  const requests: string[] = [];
  let base = "";
  let notModified = 0;
  const server: Server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    counts.set(res, () => notModified++);
    const auth = req.headers.authorization ?? "";
    const f = model.takeCall();
    if (f) return sendFailure(res, f);
    if (o.token !== undefined && auth !== `token ${o.token}` && auth !== `Bearer ${o.token}`)
      return send(res, 401, { message: "Bad credentials" });
    try {
      route(model, base, req, res);
    } catch {
      send(res, 500, { message: "Server Error" });
    }
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: base,
    requests,
    get notModified() {
      return notModified;
    },
    close: () => new Promise<void>((ok) => server.close(() => ok())),
  };
}
