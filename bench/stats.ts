/** Number formatting and summary statistics shared by every benchmark driver. */
import { readdirSync, readFileSync } from "node:fs";
import { resolve } from "node:path";

export const fmtInt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const fmt1 = new Intl.NumberFormat("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });

/** Whole numbers from 100 up, one decimal below. */
export const fmt = (v: number): string => (Math.abs(v) >= 100 ? fmtInt.format(v) : fmt1.format(v));
/** A count, with thousands separators. */
export const n = (v: number): string => fmtInt.format(v);

export function progress(msg: string): void {
  process.stderr.write(`${msg}\n`);
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Nearest-rank percentile (p in 0–100) of an ascending array; NaN when empty. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

/** CPU time (user + system) of the processes whose /proc/<pid>/stat passes `pick`, in ms (clock ticks of 10 ms). */
function cpuMsWhere(pids: Iterable<string>, pick: (stat: string) => boolean): number {
  let ticks = 0;
  for (const p of pids) {
    try {
      const st = readFileSync(`/proc/${p}/stat`, "utf8");
      if (!pick(st)) continue;
      const f = st.slice(st.lastIndexOf(")") + 2).split(" ");
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return ticks * 10;
}

/** CPU time of every process of this machine named `comm` (postgres, redis-server), in ms. */
export function serverCpuMs(comm: string): number {
  return cpuMsWhere(
    readdirSync("/proc").filter((p) => /^\d+$/.test(p)),
    (st) => st.includes(`(${comm})`),
  );
}

/** CPU time of every postgres process of this machine, in ms. */
export const postgresCpuMs = (): number => serverCpuMs("postgres");

/** CPU time of the given processes, in ms. */
export const processCpuMs = (pids: readonly number[]): number => cpuMsWhere(pids.map(String), () => true);

/**
 * This process's CPU time in ms, split into its main thread and every other thread (V8's optimizing
 * compiler and its GC helpers, libuv's pool): Linux, from /proc/self/task. A short drain in a fresh
 * process spends a large share of its CPU on the other threads while the JIT warms up.
 */
export function threadCpuMs(): { main: number; other: number } {
  const all = cpuMsWhere(
    readdirSync("/proc/self/task").map((t) => `self/task/${t}`),
    () => true,
  );
  const main = cpuMsWhere([`self/task/${process.pid}`], () => true);
  return { main, other: all - main };
}

/** The builds an A/B alternates: `--base`'s dist/ (when given) and this one's, by name. */
export function abBuilds(base: string | undefined, own: string): [string, string][] {
  return base
    ? [
        ["base", resolve(base)],
        ["this", own],
      ]
    : [["this", own]];
}

/** A figure with `d` decimals, or a dash where there is none. */
export const fixedOrDash = (x: number | null, d = 1): string => (x === null ? "–" : x.toFixed(d));
