/**
 * The demo's simulated outside world: a document source and a flaky,
 * rate-limited summarisation model. Everything random is drawn from a
 * seeded PRNG keyed by (seed, what, document, attempt), so a document's
 * latency, text and failures are the same in every run with the same seed,
 * whatever order the worker happens to run tasks in.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { seededRandom } from "../../src/testing/fake-clock.js";

/** FNV-1a over the parts: a stable 32-bit seed per (seed, what, doc, attempt). */
function keyOf(parts: readonly (string | number)[]): number {
  let h = 0x811c9dc5;
  for (const ch of parts.join("\u0000")) {
    h ^= ch.codePointAt(0)!;
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function rngFor(...parts: (string | number)[]): () => number {
  return seededRandom(keyOf(parts));
}

const WORDS = (
  "ledger lease claim retry backoff queue worker crash commit replay durable step sleep token fence " +
  "budget batch report summary model document latency failure recovery sqlite journal audit signal " +
  "deadline heartbeat progress outcome upstream dependency invoice shipment customer contract review"
).split(" ");

function pick<T>(rng: () => number, items: readonly T[]): T {
  return items[Math.floor(rng() * items.length)]!;
}

export interface Doc {
  doc: number;
  title: string;
  text: string;
}

/** Downloads document `doc`: 5–30 ms of simulated network latency. */
export async function download(seed: number, doc: number): Promise<Doc> {
  const rng = rngFor(seed, "fetch", doc);
  await sleep(5 + Math.floor(rng() * 26));
  const title = `${pick(rng, WORDS)} ${pick(rng, WORDS)}`;
  const words = Array.from({ length: 30 + Math.floor(rng() * 30) }, () => pick(rng, WORDS));
  return { doc, title: `Doc ${doc}: ${title}`, text: words.join(" ") };
}

/** Thrown by the model when it is overloaded or the rate limit is hit; the task retries. */
export class ModelError extends Error {
  override name = "ModelError";
  constructor(
    message: string,
    readonly kind: "overloaded" | "rate_limited",
  ) {
    super(message);
  }
}

/**
 * A token bucket: `ratePerSec` calls per second, bursts up to `burst`. A
 * caller that finds it empty may wait for a later token, but at most
 * `maxWaitMs` (a reservation: the balance goes negative by the tokens
 * promised to waiters). A call that would wait longer is refused at once,
 * which the model reports as "429 rate limited".
 *
 * Why a bounded wait and not an instant refusal: with instant refusals a
 * pool of workers slightly faster than the limit turns every refusal into a
 * quick retry that is refused again, until tasks run out of attempts. The
 * short wait absorbs ordinary bursts; only real overload is refused.
 */
export class TokenBucket {
  #tokens: number;
  #last = performance.now();
  constructor(
    readonly ratePerSec: number,
    readonly burst: number,
    readonly maxWaitMs: number,
  ) {
    this.#tokens = burst;
  }

  /** Milliseconds to wait for the reserved token, or null when refused. */
  reserve(): number | null {
    const now = performance.now();
    this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#last) * this.ratePerSec) / 1000);
    this.#last = now;
    const waitMs = this.#tokens >= 1 ? 0 : ((1 - this.#tokens) * 1000) / this.ratePerSec;
    if (waitMs > this.maxWaitMs) return null;
    this.#tokens -= 1;
    return waitMs;
  }
}

export const FAILURE_RATE = 0.15;

/**
 * The model: takes a rate-limit token (refused with "429 rate limited" when
 * the wait would be too long), then fails ~15% of attempts ("503
 * overloaded"), otherwise answers after 15–45 ms with a summary.
 */
export async function summarise(
  seed: number,
  d: Doc,
  attempt: number,
  limiter: TokenBucket,
): Promise<string> {
  const waitMs = limiter.reserve();
  if (waitMs === null)
    throw new ModelError("429 rate limited: over the model's calls per second", "rate_limited");
  if (waitMs > 0) await sleep(waitMs);
  const rng = rngFor(seed, "model", d.doc, attempt);
  await sleep(15 + Math.floor(rng() * 31));
  if (rng() < FAILURE_RATE) throw new ModelError("503 model overloaded, try again later", "overloaded");
  const words = d.text.split(" ");
  // The "summary": the document's four most frequent words.
  const freq = new Map<string, number>();
  for (const w of words) freq.set(w, (freq.get(w) ?? 0) + 1);
  const key = [...freq].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).slice(0, 4);
  return `${d.title} covers ${key.map(([w]) => w).join(", ")} (${words.length} words)`;
}
