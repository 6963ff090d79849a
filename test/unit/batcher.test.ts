import { describe, expect, it } from "vitest";
import { Batcher } from "../../src/engine/batcher.js";

/** A write that waits until released, recording how many writes are in flight and each batch's size. */
function gatedWrite() {
  const gates: (() => void)[] = [];
  const sizes: number[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const write = async (items: number[]): Promise<number[]> => {
    sizes.push(items.length);
    maxInFlight = Math.max(maxInFlight, ++inFlight);
    await new Promise<void>((r) => gates.push(r));
    inFlight--;
    if (items.includes(-1)) throw new Error("refused");
    return items.map((x) => x * 10);
  };
  return {
    write,
    sizes,
    get maxInFlight() {
      return maxInFlight;
    },
    /** Releases every write waiting now. */
    releaseAll() {
      for (const g of gates.splice(0)) g();
    },
  };
}

const turn = () => new Promise<void>((r) => setImmediate(r));

describe("settle batches (spec §8.9)", () => {
  it("§8.9 one lane: a single write in flight, whatever waits", async () => {
    const w = gatedWrite();
    const b = new Batcher(w.write, 500, 1);
    const all = Array.from({ length: 1_200 }, (_, i) => b.submit(i));
    await turn();
    expect(w.sizes).toEqual([500]);
    while (w.sizes.length < 3) {
      w.releaseAll();
      await turn();
    }
    w.releaseAll();
    expect(await Promise.all(all)).toEqual(Array.from({ length: 1_200 }, (_, i) => i * 10));
    expect(w.sizes).toEqual([500, 500, 200]);
    expect(w.maxInFlight).toBe(1);
  });

  it("§8.9 two lanes: a second write starts while one is in flight once half a batch waits, and never a third", async () => {
    const w = gatedWrite();
    const b = new Batcher(w.write, 500, 2);
    const first = Array.from({ length: 10 }, (_, i) => b.submit(i));
    await turn();
    expect(w.sizes).toEqual([10]);
    // A trickle while the first write is in flight waits for it: no second write for 249 items.
    const trickle = Array.from({ length: 249 }, (_, i) => b.submit(100 + i));
    await turn();
    expect(w.sizes).toEqual([10]);
    expect(b.writing).toBe(1);
    // The 250th item opens the second lane; it takes everything waiting, up to a batch.
    const more = Array.from({ length: 900 }, (_, i) => b.submit(1_000 + i));
    await turn();
    expect(w.sizes).toEqual([10, 500]);
    expect(b.writing).toBe(2);
    // Both lanes busy: what arrives now waits, however much it is.
    const late = Array.from({ length: 300 }, (_, i) => b.submit(5_000 + i));
    await turn();
    expect(w.sizes).toEqual([10, 500]);
    expect(w.maxInFlight).toBe(2);
    // Each lane goes on with what waits when its write returns.
    w.releaseAll();
    await turn();
    expect(w.sizes).toEqual([10, 500, 500, 449]);
    w.releaseAll();
    await turn();
    w.releaseAll();
    const got = await Promise.all([...first, ...trickle, ...more, ...late]);
    expect(got).toEqual([
      ...Array.from({ length: 10 }, (_, i) => i * 10),
      ...Array.from({ length: 249 }, (_, i) => (100 + i) * 10),
      ...Array.from({ length: 900 }, (_, i) => (1_000 + i) * 10),
      ...Array.from({ length: 300 }, (_, i) => (5_000 + i) * 10),
    ]);
    expect(w.maxInFlight).toBe(2);
    expect(b.writing).toBe(0);
  });

  it("§8.9 a failed write fails only its own batch; the other lane's items succeed", async () => {
    const w = gatedWrite();
    const b = new Batcher(w.write, 500, 2);
    const a = b.submit(-1);
    await turn();
    const rest = Array.from({ length: 300 }, (_, i) => b.submit(i));
    await turn();
    expect(w.sizes).toEqual([1, 300]);
    w.releaseAll();
    await expect(a).rejects.toThrow("refused");
    expect(await Promise.all(rest)).toEqual(Array.from({ length: 300 }, (_, i) => i * 10));
  });

  it("§8.9 lanes and batch size are bounded", () => {
    const write = async (items: number[]) => items;
    for (const lanes of [0, 9, 1.5, Number.NaN])
      expect(() => new Batcher(write, 500, lanes)).toThrow(RangeError);
    for (const max of [0, -1, 2.5]) expect(() => new Batcher(write, max, 1)).toThrow(RangeError);
  });
});
