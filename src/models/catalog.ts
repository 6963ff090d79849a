/**
 * The model catalog (spec §18.4): per provider and model, the context window, the longest output
 * and the prices in US dollars per million tokens (input, output, cached input). Users override
 * or add entries; an override replaces the fields it names and keeps the rest.
 *
 * Invariant: cost = (input − cached) × input price + cached × cached price + output × output price,
 * per million; a model missing from the catalog costs 0 and says so (`known: false`) (spec §18.4).
 */
import { ValidationError } from "../errors.js";
import type { Usage } from "./stream.js";

export interface ModelPrices {
  /** USD per million prompt tokens not read from the cache. */
  input: number;
  /** USD per million output tokens (reasoning included). */
  output: number;
  /** USD per million prompt tokens read from the cache; the input price when absent. */
  cached?: number;
}

export interface CatalogEntry {
  provider: string;
  model: string;
  contextWindow: number;
  maxOutput: number;
  prices: ModelPrices;
}

export type CatalogOverride = Pick<CatalogEntry, "provider" | "model"> &
  Partial<Omit<CatalogEntry, "provider" | "model">>;

/** Built-in entries. Prices as OpenAI lists them (openai.com/api/pricing); check before relying on them. */
export const BUILTIN_MODELS: readonly CatalogEntry[] = [
  {
    provider: "faux",
    model: "faux-1",
    contextWindow: 128_000,
    maxOutput: 16_384,
    prices: { input: 0, output: 0, cached: 0 },
  },
  {
    provider: "openai",
    model: "gpt-4o",
    contextWindow: 128_000,
    maxOutput: 16_384,
    prices: { input: 2.5, output: 10, cached: 1.25 },
  },
  {
    provider: "openai",
    model: "gpt-4o-mini",
    contextWindow: 128_000,
    maxOutput: 16_384,
    prices: { input: 0.15, output: 0.6, cached: 0.075 },
  },
];

const MAX_ENTRIES = 10_000;

function checkEntry(e: CatalogEntry): CatalogEntry {
  const pos = (v: unknown, what: string) => {
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0)
      throw new ValidationError(`catalog ${what} must be a finite number ≥ 0`);
  };
  if (typeof e.provider !== "string" || !e.provider || typeof e.model !== "string" || !e.model)
    throw new ValidationError("a catalog entry needs a provider and a model");
  for (const k of ["contextWindow", "maxOutput"] as const)
    if (!Number.isInteger(e[k]) || e[k] < 1) throw new ValidationError(`catalog ${k} must be an integer ≥ 1`);
  pos(e.prices?.input, "input price");
  pos(e.prices?.output, "output price");
  if (e.prices.cached !== undefined) pos(e.prices.cached, "cached price");
  return e;
}

const keyOf = (provider: string, model: string) => `${provider}\u0000${model}`;

export interface Cost {
  usd: number;
  /** The model was in the catalog (else usd is 0). */
  known: boolean;
}

export class ModelCatalog {
  readonly #entries = new Map<string, CatalogEntry>();

  /** The built-in entries with `overrides` applied (a new entry needs every field). */
  constructor(overrides: readonly CatalogOverride[] = [], base: readonly CatalogEntry[] = BUILTIN_MODELS) {
    if (base.length + overrides.length > MAX_ENTRIES)
      throw new ValidationError(`a catalog holds at most ${MAX_ENTRIES} entries`);
    for (const e of base) this.#entries.set(keyOf(e.provider, e.model), checkEntry(e));
    for (const o of overrides) {
      const old = this.#entries.get(keyOf(o.provider, o.model));
      const merged = { ...old, ...o, prices: { ...old?.prices, ...o.prices } } as CatalogEntry;
      this.#entries.set(keyOf(o.provider, o.model), checkEntry(merged));
    }
  }

  get(provider: string, model: string): CatalogEntry | undefined {
    return this.#entries.get(keyOf(provider, model));
  }

  list(): CatalogEntry[] {
    return [...this.#entries.values()];
  }

  /** A new catalog: this one with `overrides` applied. */
  with(overrides: readonly CatalogOverride[]): ModelCatalog {
    return new ModelCatalog(overrides, this.list());
  }

  /** spec §18.4: the cost of a response's usage. */
  cost(provider: string, model: string, u: Usage): Cost {
    const e = this.get(provider, model);
    if (!e) return { usd: 0, known: false };
    const cached = Math.min(u.cached, u.input);
    const p = e.prices;
    const usd = ((u.input - cached) * p.input + cached * (p.cached ?? p.input) + u.output * p.output) / 1e6;
    return { usd, known: true };
  }
}

export const defaultCatalog = new ModelCatalog();
