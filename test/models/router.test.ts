/** The inference router: fallback order, breakers, retry-after (spec §18.5, §18.6). */
import { describe, expect, it } from "vitest";
import type { ModelError, NoRouteError } from "../../src/errors.js";
import { memoryBreakers } from "../../src/models/breakers.js";
import { fauxModel } from "../../src/models/faux.js";
import { createRouter, routeOrder } from "../../src/models/router.js";
import { type ModelEvent, type ModelPrompt, streamModel } from "../../src/models/stream.js";
import { FakeClock } from "../../src/testing/fake-clock.js";

const PROMPT: ModelPrompt = [{ role: "user", content: [{ type: "text", text: "q" }] }];
const CFG = { failures: 2, windowMs: 10_000, coolDownMs: 1_000, probeMs: 5_000 };

async function ask(
  model: Parameters<typeof streamModel>[0],
): Promise<{ events: ModelEvent[]; error: unknown }> {
  const events: ModelEvent[] = [];
  try {
    for await (const e of streamModel(model, PROMPT)) events.push(e);
    return { events, error: null };
  } catch (e) {
    return { events, error: e };
  }
}

const text = (evs: ModelEvent[]) => evs.flatMap((e) => (e.type === "text" ? [e.delta] : [])).join("");
const finishOf = (evs: ModelEvent[]) =>
  evs.find((e) => e.type === "finish") as Extract<ModelEvent, { type: "finish" }>;

describe("the inference router (spec §18.5)", () => {
  it("§18.5 falls back in order on 429, 5xx, timeouts and connection errors; the finish names the route and the fallbacks", async () => {
    const a = fauxModel({ provider: "pa", scripts: [{ error: { status: 429, retryAfterSeconds: 3 } }] });
    const b = fauxModel({ provider: "pb", scripts: [{ error: { status: 503 } }] });
    const c = fauxModel({ provider: "pc", scripts: [{ text: "from c" }] });
    const t = fauxModel({ provider: "pt", scripts: [{ error: { status: 408 } }] });
    const n = fauxModel({ provider: "pn", scripts: [{ text: "x" }] });
    n.doStream = async () => {
      throw Object.assign(new TypeError("fetch failed"), { cause: { code: "ECONNREFUSED" } });
    };
    const r = createRouter({
      routes: [{ model: a }, { model: b }, { model: t }, { model: n }, { model: c, name: "third" }],
      breaker: CFG,
    });
    const { events, error } = await ask(r);
    expect(error).toBeNull();
    expect(text(events)).toBe("from c");
    expect(finishOf(events).route).toEqual({
      name: "third",
      provider: "pc",
      model: "faux-1",
      fallbacks: [
        { route: "pa/faux-1", code: "RATCHET_MODEL_RATE_LIMITED" },
        { route: "pb/faux-1", code: "RATCHET_MODEL_UNAVAILABLE" },
        { route: "pt/faux-1", code: "RATCHET_MODEL_TIMEOUT" },
        { route: "pn/faux-1", code: "RATCHET_MODEL_CONNECTION" },
      ],
    });
    expect([a.calls, b.calls, c.calls]).toEqual([1, 1, 1]);
  });

  it("§18.5 a route that stalls before its first content is cancelled and the next route answers", async () => {
    let cancelled: AbortSignal | undefined;
    const a = fauxModel({ scripts: [{ stall: true }] });
    const inner = a.doStream.bind(a);
    a.doStream = (call) => {
      cancelled = call.abortSignal;
      return inner(call);
    };
    const b = fauxModel({ provider: "pb", scripts: [{ text: "b" }] });
    const r = createRouter({ routes: [{ model: a }, { model: b }], firstPartTimeoutMs: 30 });
    const { events } = await ask(r);
    expect(text(events)).toBe("b");
    expect(finishOf(events).route?.fallbacks).toEqual([
      { route: "faux/faux-1", code: "RATCHET_MODEL_TIMEOUT" },
    ]);
    expect(cancelled?.aborted).toBe(true);
  });

  it("§18.5 never falls back on a non-retryable 4xx", async () => {
    const a = fauxModel({ scripts: [{ error: { status: 400 } }] });
    const b = fauxModel({ provider: "pb", scripts: [{ text: "never" }] });
    const { error } = await ask(createRouter({ routes: [{ model: a }, { model: b }] }));
    expect((error as ModelError).code).toBe("RATCHET_MODEL_REJECTED");
    expect(b.calls).toBe(0);
  });

  it("§18.5 a failure after the first content is not a fallback: the caller holds part of the answer", async () => {
    const a = fauxModel({
      scripts: [{ text: "abcdef", chunkChars: 2, error: { status: 502, afterChunks: 1 } }],
    });
    const b = fauxModel({ provider: "pb", scripts: [{ text: "b" }] });
    const { events, error } = await ask(createRouter({ routes: [{ model: a }, { model: b }] }));
    expect(text(events)).toBe("ab");
    expect((error as ModelError).code).toBe("RATCHET_MODEL_UNAVAILABLE");
    expect(b.calls).toBe(0);
  });

  it("§18.5 every route failing is NoRouteError with the shortest retry-after", async () => {
    const a = fauxModel({ scripts: [{ error: { status: 429, retryAfterSeconds: 9 } }] });
    const b = fauxModel({ provider: "pb", scripts: [{ error: { status: 429, retryAfterSeconds: 4 } }] });
    const { error } = await ask(createRouter({ routes: [{ model: a }, { model: b }] }));
    expect((error as NoRouteError).code).toBe("RATCHET_NO_ROUTE");
    expect((error as NoRouteError).retryAfterMs).toBe(4000);
  });

  it("§18.6 a route's breaker opens after N failures: it is skipped until the cool-down, then one probe closes it", async () => {
    const clock = new FakeClock();
    let aFails = true;
    const a = fauxModel({ scripts: () => (aFails ? { error: { status: 500 } } : { text: "a" }) });
    const b = fauxModel({ provider: "pb", scripts: [{ text: "b" }] });
    const r = createRouter({
      routes: [{ model: a }, { model: b }],
      breaker: CFG,
      clock,
      breakers: memoryBreakers(clock),
    });
    for (let i = 0; i < 2; i++) expect(text((await ask(r)).events)).toBe("b");
    expect(a.calls).toBe(2);
    const skipped = await ask(r);
    expect(a.calls).toBe(2);
    expect(finishOf(skipped.events).route?.fallbacks).toEqual([
      { route: "faux/faux-1", code: "BREAKER_OPEN" },
    ]);
    clock.advance(1_000);
    aFails = false;
    expect(text((await ask(r)).events)).toBe("a");
    expect(text((await ask(r)).events)).toBe("a");
    expect(a.calls).toBe(4);
  });

  it("§18.5 weights order the first pick by weighted random; weight 0 is only a fallback; no weights keep the order", () => {
    const rs = [
      { n: "a", weight: 1 },
      { n: "b", weight: 3 },
      { n: "z", weight: 0 },
    ];
    let seed = 1;
    const random = () => {
      seed = (seed * 16807) % 2147483647;
      return seed / 2147483647;
    };
    const firsts: Record<string, number> = { a: 0, b: 0, z: 0 };
    for (let i = 0; i < 2000; i++) {
      const o = routeOrder(rs, random);
      firsts[o[0]!.n]!++;
      expect(o[2]!.n).toBe("z");
    }
    expect(firsts.b).toBeGreaterThan(firsts.a!);
    expect(firsts.z).toBe(0);
    expect(
      routeOrder(
        [
          { n: 1, weight: undefined },
          { n: 2, weight: undefined },
        ],
        random,
      ).map((x) => x.n),
    ).toEqual([1, 2]);
  });

  it("§18.5 doGenerate routes too (for non-streaming callers)", async () => {
    const a = fauxModel({ scripts: [{ error: { status: 503 } }] });
    const b = fauxModel({ provider: "pb", scripts: [{ text: "whole" }] });
    const res = await createRouter({ routes: [{ model: a }, { model: b }] }).doGenerate({ prompt: PROMPT });
    expect(res.content).toEqual([{ type: "text", text: "whole" }]);
    expect(res.finishReason.unified).toBe("stop");
  });

  it("§18.5 bad routes are refused when the router is made", () => {
    expect(() => createRouter({ routes: [] })).toThrow(/routes/);
    const m = fauxModel({ scripts: [{ text: "x" }] });
    expect(() => createRouter({ routes: [{ model: m }, { model: m }] })).toThrow(/two routes/);
    expect(() => createRouter({ routes: [{ model: m, weight: -1 }] })).toThrow(/weight/);
    expect(() => createRouter({ routes: [{ model: m }], breaker: { failures: 0 } })).toThrow(/failures/);
  });
});
