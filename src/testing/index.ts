export { FakeClock, seededRandom } from "./fake-clock.js";
