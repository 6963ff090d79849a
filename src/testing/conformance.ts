/**
 * The Store conformance suite: every rule of the Store contract
 * (src/store/store.ts), checked through the `Store` interface only, so any
 * backend (SQLite, PostgreSQL, a custom store) can run it.
 *
 * The test framework is a parameter, so this module depends on none:
 *
 * ```ts
 * import { afterAll, describe, expect, it } from "vitest";
 * import { registerStoreConformance } from "@ratchet-engine/ratchet/testing";
 * registerStoreConformance({
 *   name: "my store",
 *   open: async (clock) => new MyStore({ clock }),
 *   runner: { describe, it, expect, afterAll },
 * });
 * ```
 *
 * `open(clock)` is called at least once per test and must return a store over
 * EMPTY storage (a fresh `:memory:` database, a new file, a new schema), whose
 * "now" is `clock.now()`. The suite calls `migrate()` itself and closes every
 * store it opened when the test ends. `cleanup()` runs once after all tests
 * (in `afterAll`; without one, as a last test).
 */
import type { Clock } from "../core/clock.js";
import type { Store } from "../store/store.js";
import { registerClaimTests } from "./conformance/claims.js";
import { registerConversationTests } from "./conformance/conversations.js";
import { registerEnqueueTests } from "./conformance/enqueue.js";
import { registerGraphTests } from "./conformance/graph.js";
import { makeDefine } from "./conformance/kit.js";
import { registerLifecycleTests } from "./conformance/lifecycle.js";
import { registerModelTests } from "./conformance/models.js";
import { registerObservabilityTests } from "./conformance/observability.js";
import { registerOutboxTests } from "./conformance/outbox.js";
import { registerReadTests } from "./conformance/reads.js";
import { registerSettleTests } from "./conformance/settle.js";
import { registerStreamTests } from "./conformance/streams.js";
import { registerTreeTests } from "./conformance/trees.js";
import { registerTurnTests } from "./conformance/turns.js";

/** The matchers the suite uses; vitest's and jest's `expect` satisfy it. */
export interface Assertion {
  toBe(expected: unknown): void;
  toEqual(expected: unknown): void;
  toMatchObject(expected: object): void;
  toBeNull(): void;
  toHaveLength(length: number): void;
  toContain(item: unknown): void;
  toBeGreaterThan(n: number): void;
  toBeGreaterThanOrEqual(n: number): void;
  toBeLessThan(n: number): void;
  toBeInstanceOf(ctor: unknown): void;
  readonly not: Assertion;
}

export type Expect = (actual: unknown, message?: string) => Assertion;

/** The parts of a test framework the suite needs (vitest, jest, or a shim over node:test). */
export interface ConformanceRunner {
  describe(name: string, fn: () => void): void;
  it(name: string, fn: () => Promise<void>): void;
  expect: Expect;
  /** Accepted for symmetry; the suite closes its stores itself, so it is not required. */
  afterEach?(fn: () => Promise<void>): void;
  beforeAll?(fn: () => Promise<void>): void;
  afterAll?(fn: () => Promise<void>): void;
}

export interface StoreConformanceOptions {
  /** Shown in the suite's title. */
  name: string;
  /** A store over empty storage whose "now" is `clock.now()`; migrated by the suite. */
  open(clock: Clock): Promise<Store>;
  /** Runs once after every test (drop schemas, remove temp files). */
  cleanup?(): Promise<void>;
  runner: ConformanceRunner;
}

/** Registers the Store conformance tests with `runner`. */
export function registerStoreConformance(opts: StoreConformanceOptions): void {
  const { runner } = opts;
  runner.describe(`Store conformance: ${opts.name}`, () => {
    const define = makeDefine(opts);
    registerLifecycleTests(define);
    registerEnqueueTests(define);
    registerClaimTests(define);
    registerSettleTests(define);
    registerTreeTests(define);
    registerGraphTests(define);
    registerReadTests(define);
    registerObservabilityTests(define);
    registerConversationTests(define);
    registerStreamTests(define);
    registerModelTests(define);
    registerTurnTests(define);
    registerOutboxTests(define);
    const cleanup = opts.cleanup;
    if (cleanup) {
      if (runner.afterAll) runner.afterAll(() => cleanup());
      else runner.it("cleanup", () => cleanup());
    }
  });
}
