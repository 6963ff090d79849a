/**
 * @ratchet-engine/ratchet/models (spec §18): the provider seam on the AI SDK's language-model specification, the
 * scripted `faux` provider, an OpenAI-compatible Chat Completions provider, the model catalog, the
 * inference router with durable circuit breakers, the usage ledger's types, and `generate`, one
 * durable model turn inside a task.
 */
export type { BreakerConfig, BreakerMode, BreakerState } from "../core/breaker.js";
export { DEFAULT_BREAKER } from "../core/breaker.js";
export { ModelError, type ModelErrorCode, NoRouteError } from "../errors.js";
export type { BreakerAdmission, BreakerOps, BreakerRecord } from "../store/breakers/ops.js";
export type { ModelUsage, UsageFilter, UsageRecord, UsageRow, UsageTotals } from "../store/usage/ops.js";
export { memoryBreakers } from "./breakers.js";
export {
  BUILTIN_MODELS,
  type CatalogEntry,
  type CatalogOverride,
  type Cost,
  defaultCatalog,
  ModelCatalog,
  type ModelPrices,
} from "./catalog.js";
export { codeOfStatus, parseRetryAfter, toModelError } from "./classify.js";
export { FauxApiError, type FauxModel, type FauxOptions, type FauxScript, fauxModel } from "./faux.js";
export { type GenerateOptions, generate, type TurnChunk, type TurnResult } from "./generate.js";
export { type OpenAICompatibleOptions, openAICompatible } from "./openai-compatible.js";
export {
  createRouter,
  MAX_ROUTES,
  type Router,
  type RouterOptions,
  type RouteSpec,
  routeOrder,
} from "./router.js";
export {
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_TIMEOUT_MS,
  type LanguageModel,
  type ModelCallOptions,
  type ModelEvent,
  type ModelPrompt,
  type RouteInfo,
  type StreamOptions,
  streamModel,
  toUsage,
  type Usage,
} from "./stream.js";
