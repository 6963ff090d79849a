/**
 * The inference router (spec §18.5): a LanguageModelV4 over routes, so it goes wherever a model
 * does. A request tries the routes in order (a weighted random order when weights are given);
 * each route's breaker (spec §18.6) is asked first, and an open one is skipped.
 *
 * Modes of one request:
 * - choosing: the next route is admitted by its breaker or skipped;
 * - starting: doStream is called and parts are read up to the first content part (text,
 *   reasoning, tool call, finish), within firstPartTimeoutMs (a stall is a TIMEOUT). A retryable failure here falls back to the next route; a
 *   non-retryable one (a 4xx a retry cannot fix) is thrown at once, never retried elsewhere;
 * - committed: the route's parts pass through. Its finish carries the route (providerMetadata
 *   .ratchet.route) and reports success to the breaker; a failure after content is thrown as it
 *   is (the caller already holds part of the answer) and counts against the breaker.
 * When every route failed or was open, NoRouteError, with the shortest retry-after any of them gave.
 *
 * Invariant: fallback happens only before a route's first content part and only on a retryable
 * failure (spec §18.5); every admitted request reports once to its breaker, except when the
 * caller aborted it.
 */
import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4StreamPart,
} from "@ai-sdk/provider";
import { type BreakerConfig, checkBreakerConfig } from "../core/breaker.js";
import { type Clock, type Random, systemClock, systemRandom } from "../core/clock.js";
import { ModelError, NoRouteError, ValidationError } from "../errors.js";
import type { BreakerOps } from "../store/breakers/ops.js";
import { memoryBreakers } from "./breakers.js";
import { toModelError } from "./classify.js";
import { collect } from "./faux.js";
import type { RouteInfo } from "./stream.js";

export interface RouteSpec {
  model: LanguageModelV4;
  /** Shown in usage and decisions; default provider/modelId. */
  name?: string;
  /** Relative share of first picks (> 0), or 0: only a fallback. All absent: the order given. */
  weight?: number;
}

export interface RouterOptions {
  routes: readonly RouteSpec[];
  /** The router's own model id. Default "router". */
  name?: string;
  /** Where breakers live: `ratchet.store.breakers` shares them across workers; default this process. */
  breakers?: BreakerOps;
  breaker?: Partial<BreakerConfig>;
  random?: Random;
  clock?: Clock;
  /** Longest wait for a route's first content part before falling back (spec §18.5). Default 30 s. */
  firstPartTimeoutMs?: number;
}

export interface Router extends LanguageModelV4 {
  readonly routes: readonly { name: string; key: string; weight: number | undefined }[];
}

export const MAX_ROUTES = 32;

interface Route {
  name: string;
  /** The breaker key: provider/modelId. */
  key: string;
  model: LanguageModelV4;
  weight: number | undefined;
}

function checkRoutes(routes: readonly RouteSpec[]): Route[] {
  if (!Array.isArray(routes) || routes.length === 0 || routes.length > MAX_ROUTES)
    throw new ValidationError(`a router needs 1–${MAX_ROUTES} routes`);
  const names = new Set<string>();
  return routes.map((r) => {
    if (!r?.model || typeof r.model.doStream !== "function")
      throw new ValidationError("a route needs a model");
    const w = r.weight;
    if (w !== undefined && (typeof w !== "number" || !Number.isFinite(w) || w < 0))
      throw new ValidationError("a route's weight must be a finite number ≥ 0");
    const key = `${r.model.provider}/${r.model.modelId}`;
    const name = r.name ?? key;
    if (names.has(name)) throw new ValidationError(`two routes are named "${name}"`);
    names.add(name);
    return { name, key, model: r.model, weight: w };
  });
}

/** The order routes are tried in (spec §18.5): as given, or weighted random without replacement. */
export function routeOrder<T extends { weight: number | undefined }>(
  routes: readonly T[],
  random: Random,
): T[] {
  if (routes.every((r) => r.weight === undefined)) return [...routes];
  const keyed = routes.map((r, i) => {
    const w = r.weight ?? 1;
    return { r, i, k: w > 0 ? random() ** (1 / w) : -1 };
  });
  keyed.sort((a, b) => b.k - a.k || a.i - b.i);
  return keyed.map((x) => x.r);
}

/**
 * A route's request up to its first content part, within `firstPartMs` (spec §18.5): a route that
 * stalls before answering is cancelled (its own AbortSignal, linked to the caller's) and counts as
 * a TIMEOUT, so the next route is tried instead of the whole request waiting for its idle timeout.
 */
async function openRoute(route: Route, call: LanguageModelV4CallOptions, firstPartMs: number) {
  const ac = new AbortController();
  const outer = call.abortSignal;
  if (outer?.aborted) ac.abort(outer.reason);
  else outer?.addEventListener("abort", () => ac.abort(outer.reason), { once: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const stalled = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const e = new ModelError("RATCHET_MODEL_TIMEOUT", `${route.name}: no answer within ${firstPartMs} ms`);
      ac.abort(e);
      reject(e);
    }, firstPartMs);
  });
  stalled.catch(() => {});
  let reader: ReadableStreamDefaultReader<LanguageModelV4StreamPart> | undefined;
  try {
    const res = await Promise.race([route.model.doStream({ ...call, abortSignal: ac.signal }), stalled]);
    reader = res.stream.getReader();
    const head: LanguageModelV4StreamPart[] = [];
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), stalled]);
      if (done)
        throw new ModelError("RATCHET_MODEL_PROTOCOL", `${route.name}: stream ended before any content`);
      if (value.type === "error") throw value.error;
      head.push(value);
      if (isContent(value)) return { res, reader, head };
    }
  } catch (e) {
    reader?.cancel().catch(() => {});
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

const isContent = (p: LanguageModelV4StreamPart) =>
  p.type === "text-delta" || p.type === "reasoning-delta" || p.type === "tool-call" || p.type === "finish";

export function createRouter(opts: RouterOptions): Router {
  const routes = checkRoutes(opts.routes);
  const config = checkBreakerConfig(opts.breaker);
  const clock = opts.clock ?? systemClock;
  const breakers = opts.breakers ?? memoryBreakers(clock);
  const random = opts.random ?? systemRandom;
  const firstPartMs = opts.firstPartTimeoutMs ?? 30_000;
  if (!Number.isInteger(firstPartMs) || firstPartMs < 1 || firstPartMs > 3_600_000)
    throw new ValidationError("firstPartTimeoutMs must be an integer in [1, 3600000]");
  const callerAborted = (call: LanguageModelV4CallOptions) =>
    call.abortSignal?.aborted === true && !(call.abortSignal.reason instanceof ModelError);

  async function start(call: LanguageModelV4CallOptions) {
    const fallbacks: RouteInfo["fallbacks"] = [];
    let retryAfter: number | null = null;
    const later = (ms: number | null) => {
      if (ms !== null) retryAfter = retryAfter === null ? ms : Math.min(retryAfter, ms);
    };
    for (const route of routeOrder(routes, random)) {
      const adm = await breakers.admitBreaker(route.key, config);
      if (!adm.admit) {
        fallbacks.push({ route: route.name, code: "BREAKER_OPEN" });
        later(Math.max(0, adm.until - clock.now()));
        continue;
      }
      const report = (ok: boolean) => breakers.reportBreaker(route.key, ok, adm.probe, config);
      try {
        const { res, reader, head } = await openRoute(route, call, firstPartMs);
        const info: RouteInfo = {
          name: route.name,
          provider: route.model.provider,
          model: route.model.modelId,
          fallbacks,
        };
        return { ...res, stream: committed(reader, head, info, report, call) };
      } catch (e) {
        if (callerAborted(call)) throw call.abortSignal?.reason;
        const err = toModelError(e, route.name, clock.now());
        // A rejection is the provider answering: it is up, and no other route can fix the request.
        await report(!err.retryable);
        if (!err.retryable) throw err;
        fallbacks.push({ route: route.name, code: err.code });
        later(err.retryAfterMs);
      }
    }
    throw new NoRouteError(
      `no route answered: ${fallbacks.map((f) => `${f.route} (${f.code})`).join(", ")}`,
      fallbacks.map((f) => ({ route: f.route, error: f.code })),
      retryAfter,
    );
  }

  function committed(
    reader: ReadableStreamDefaultReader<LanguageModelV4StreamPart>,
    head: LanguageModelV4StreamPart[],
    info: RouteInfo,
    report: (ok: boolean) => Promise<unknown>,
    call: LanguageModelV4CallOptions,
  ): ReadableStream<LanguageModelV4StreamPart> {
    let reported = false;
    const once = async (ok: boolean) => {
      if (reported || (!ok && callerAborted(call))) return;
      reported = true;
      await report(ok);
    };
    return new ReadableStream<LanguageModelV4StreamPart>({
      async pull(c) {
        let part: LanguageModelV4StreamPart | undefined = head.shift();
        if (!part) {
          let r: Awaited<ReturnType<typeof reader.read>>;
          try {
            r = await reader.read();
          } catch (e) {
            await once(false);
            throw e;
          }
          if (r.done) {
            await once(false);
            c.close();
            return;
          }
          part = r.value;
        }
        if (part.type === "error") await once(false);
        if (part.type === "finish") {
          await once(true);
          part = { ...part, providerMetadata: { ...part.providerMetadata, ratchet: { route: { ...info } } } };
        }
        c.enqueue(part);
      },
      async cancel(reason) {
        await once(false);
        await reader.cancel(reason);
      },
    });
  }

  const router: Router = {
    specificationVersion: "v4",
    provider: "router",
    modelId: opts.name ?? "router",
    supportedUrls: {},
    routes: routes.map((r) => ({ name: r.name, key: r.key, weight: r.weight })),
    doStream: (call) => start(call),
    // Non-streaming callers (the AI SDK's generateText) get the same routing over doStream.
    doGenerate: async (call) => collect((await start(call)).stream),
  };
  return router;
}
