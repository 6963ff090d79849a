/**
 * Bytes allocated while a piece of code runs, from V8's sampling heap profiler (a sample every 256
 * bytes, objects already collected included), in all and by allocation site. It slows what it
 * measures: CPU figures taken with it on do not compare. engine.ts and drain.ts use it (`--heap`).
 */
import { Session } from "node:inspector";

interface HeapNode {
  selfSize: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children: HeapNode[];
}

export interface Allocations {
  /** Every byte sampled. */
  bytes: number;
  /** Bytes by allocation site ("function dir/file:line"), most first. */
  sites: [string, number][];
}

/** Starts sampling; the returned function stops it and reports what was allocated since. */
export async function sampleAllocations(): Promise<() => Promise<Allocations>> {
  const session = new Session();
  session.connect();
  const post = (method: string, params: object = {}) =>
    new Promise<unknown>((res, rej) => session.post(method, params, (e, out) => (e ? rej(e) : res(out))));
  await post("HeapProfiler.enable");
  await post("HeapProfiler.startSampling", {
    samplingInterval: 256,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  return async () => {
    const { profile } = (await post("HeapProfiler.stopSampling")) as { profile: { head: HeapNode } };
    session.disconnect();
    const by = new Map<string, number>();
    let bytes = 0;
    const walk = (n: HeapNode) => {
      const f = n.callFrame;
      const k = `${f.functionName || "(anonymous)"} ${f.url.split("/").slice(-2).join("/")}:${f.lineNumber + 1}`;
      by.set(k, (by.get(k) ?? 0) + n.selfSize);
      bytes += n.selfSize;
      for (const c of n.children) walk(c);
    };
    walk(profile.head);
    return { bytes, sites: [...by].sort((x, y) => y[1] - x[1]) };
  };
}

/** The `top` sites of `a` as lines of bytes per task (`n` tasks), for stderr. */
export function siteLines(a: Allocations, n: number, top: number): string {
  return a.sites
    .slice(0, top)
    .map(([k, b]) => `${(b / n).toFixed(0).padStart(6)} B/task  ${k}\n`)
    .join("");
}
