export {
  type Assertion,
  type ConformanceRunner,
  type Expect,
  registerStoreConformance,
  type StoreConformanceOptions,
} from "./conformance.js";
export { FakeClock, seededRandom } from "./fake-clock.js";
