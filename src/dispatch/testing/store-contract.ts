/**
 * The dispatch store conformance group (spec §20.18–§20.21): the dispatch
 * operations of a store (`store.dispatch`), checked on any backend. The test
 * framework is a parameter, as in the store conformance suite; `open(clock)`
 * returns a store over empty storage whose "now" is `clock.now()` (the suite
 * migrates and closes it).
 */

import type { DispatchCapable, DispatchOps } from "../../store/dispatch/ops.js";
import type { OutboxOps } from "../../store/outbox/ops.js";
import { registerPullTests } from "../../testing/conformance/pulls.js";
import type { ConformanceRunner } from "../../testing/conformance.js";
import { FakeClock } from "../../testing/fake-clock.js";
import { registerDispatchStoreCases } from "./store-cases.js";
import { registerDispatchOutboxCases } from "./store-outbox-cases.js";
import { registerDispatchSessionCases } from "./store-session-cases.js";

export interface DispatchStore extends DispatchCapable {
  /** The outbox the dispatch programs write their facts to (spec part 21). */
  readonly outbox: OutboxOps;
  migrate(): Promise<void>;
  close(): Promise<void>;
}

export interface DispatchStoreContractOptions {
  name: string;
  open(clock: FakeClock): Promise<DispatchStore>;
  cleanup?(): Promise<void>;
  runner: ConformanceRunner;
}

export interface DispatchEnv {
  clock: FakeClock;
  ops: DispatchOps;
  store: DispatchStore;
  expect: ConformanceRunner["expect"];
}

export function registerDispatchStoreContract(opts: DispatchStoreContractOptions): void {
  const { runner } = opts;
  runner.describe(`dispatch store conformance: ${opts.name}`, () => {
    const define = (title: string, fn: (env: DispatchEnv) => Promise<void>) =>
      runner.it(title, async () => {
        const clock = new FakeClock();
        const store = await opts.open(clock);
        try {
          await store.migrate();
          await fn({ clock, ops: store.dispatch, store, expect: runner.expect });
        } finally {
          await store.close().catch(() => {});
        }
      });
    registerDispatchStoreCases(define);
    registerDispatchSessionCases(define);
    registerDispatchOutboxCases(define);
    registerPullTests(define);
    const cleanup = opts.cleanup;
    if (cleanup) {
      if (runner.afterAll) runner.afterAll(() => cleanup());
      else runner.it("cleanup", () => cleanup());
    }
  });
}
