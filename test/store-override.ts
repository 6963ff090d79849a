/**
 * A store with some of its members replaced, for tests and fixtures that watch or bend one call
 * (count claims, hang a reconcile, ignore fences). `undefined` hides a member (such as `subscribe`);
 * the others are the store's own, bound to it (its methods use private fields, so they must run with
 * the real store as `this`).
 */
import type { Store } from "../src/store/store.js";

export function overriding(inner: Store, over: Partial<Record<keyof Store, unknown>>): Store {
  return new Proxy(inner, {
    get(target, prop) {
      if (Object.hasOwn(over, prop)) return over[prop as keyof Store];
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}
