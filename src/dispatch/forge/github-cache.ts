/**
 * Conditional requests for GitHubForge (spec §22.3): every GET is sent with the `ETag` of the last
 * answer to the same URL (`If-None-Match`), and a `304 Not Modified` is answered from that earlier
 * answer. GitHub does not count a 304 against the rate limit, so a watcher that looks at a pull
 * request that did not change spends none of its host's budget on it.
 *
 * The cache is bounded: at most `maxEntries` answers (least recently used evicted) and none larger
 * than MAX_CACHED_BYTES (such an answer is simply not cached). It lives in the adapter's memory only;
 * a restarted watcher asks once without it.
 */
import type { Octokit } from "@octokit/rest";

export const DEFAULT_CACHE_ENTRIES = 1_000;
export const MAX_CACHE_ENTRIES = 100_000;
const MAX_CACHED_BYTES = 512 * 1024;

interface Cached {
  etag: string;
  response: { status: number; url: string; headers: Record<string, unknown>; data: unknown };
}

/** Installs the conditional-request cache on an Octokit instance; returns its counters. */
export function useConditionalRequests(octokit: Octokit, maxEntries: number): { hits: () => number } {
  const cache = new Map<string, Cached>();
  let hits = 0;
  octokit.hook.wrap("request", async (request, options) => {
    if (maxEntries === 0 || String(options.method).toUpperCase() !== "GET") return request(options);
    const { url } = octokit.request.endpoint(options);
    const known = cache.get(url);
    if (known) {
      cache.delete(url); // re-inserted below: the Map's order is the recency
      options.headers = { ...options.headers, "if-none-match": known.etag };
    }
    try {
      const res = await request(options);
      const etag = res.headers.etag;
      const size = Number(res.headers["content-length"] ?? 0);
      // A copy: Octokit's paging rewrites the answers it is given (a check-runs page becomes its list).
      if (typeof etag === "string" && etag !== "" && size <= MAX_CACHED_BYTES)
        remember(url, { etag, response: structuredClone(res) });
      return res;
    } catch (e) {
      if (known && (e as { status?: number })?.status === 304) {
        hits++;
        remember(url, known);
        return structuredClone(known.response) as Awaited<ReturnType<typeof request>>;
      }
      throw e;
    }
  });
  function remember(url: string, entry: Cached): void {
    cache.set(url, entry);
    if (cache.size > maxEntries) cache.delete(cache.keys().next().value as string);
  }
  return { hits: () => hits };
}
